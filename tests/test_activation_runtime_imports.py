"""A deploy host needs no compiler: `activate` works with lark, jinja2, networkx and z3 unimportable.

Each command runs in a fresh interpreter whose `sys.meta_path` starts with a
finder that raises `ImportError` for those four packages, as if they were
not installed. The bundle is built and signed in this (test) process, which
may use the compiler; the child only verifies and activates it. The child
also reports which compiler or verifier modules it loaded: none may be.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.signed_bundles import NOW, default_trust, signed, write

BLOCKED = ("lark", "jinja2", "networkx", "z3")
_CHILD = f"""
import sys

class BlockCompilerDependencies:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"`{{name}}` is not installed on this deploy host")
        return None

sys.meta_path.insert(0, BlockCompilerDependencies())
if sys.argv[1] == "--import":
    __import__(sys.argv[2])
    raise SystemExit(0)
from pactwright.cli.main import main
code = main(sys.argv[1:])
heavy = ("pactwright.compiler", "pactwright.verifier", "pactwright.templates", *{BLOCKED!r})
print("LOADED", sorted(m for m in sys.modules if m.startswith(heavy)))
raise SystemExit(code)
"""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture(scope="module")
def deploy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("deploy")
    (root / "trust.json").write_bytes(default_trust())
    return {
        "bundle": str(write(signed("1.0.0"), root / "bundle")),
        "trust": str(root / "trust.json"),
        "store": str(root / "store.db"),
    }


@pytest.mark.parametrize("module", BLOCKED)
def test_the_blocker_really_blocks(module: str) -> None:
    result = _run("--import", module)
    assert result.returncode != 0
    assert "is not installed on this deploy host" in result.stderr


def test_activate_works_without_the_compiler_stack(deploy: dict[str, str]) -> None:
    args = ["activate", deploy["bundle"], "--trust", deploy["trust"], "--store", deploy["store"], "--now", NOW]
    result = _run(*args)
    assert result.returncode == 0, result.stderr
    assert "activated marketplace.milestone 1.0.0" in result.stdout
    assert "LOADED []" in result.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["store", "verify", "--store", "{store}", "--trust", "{trust}"],
        ["bundle", "inspect", "{bundle}", "--trust", "{trust}", "--now", NOW],
        ["provider-sim", "--port", "0", "--exit-after", "0.2"],
    ],
    ids=["store-verify", "bundle-inspect", "provider-sim"],
)
def test_the_other_runtime_commands_work_without_it_too(deploy: dict[str, str], command: list[str]) -> None:
    if command[0] == "store":
        assert (
            _run("activate", deploy["bundle"], "--trust", deploy["trust"], "--store", deploy["store"]).returncode == 0
        )
    result = _run(*(part.format(**deploy) for part in command))
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout


def test_a_refusal_is_reported_without_it(deploy: dict[str, str], tmp_path: Path) -> None:
    tampered = write(signed("1.0.0"), tmp_path / "bundle")
    (tampered / "ledger" / "fund.num").write_bytes(b"changed\n")
    result = _run("activate", str(tampered), "--trust", deploy["trust"], "--store", str(tmp_path / "s.db"))
    assert result.returncode == 1
    assert result.stderr.startswith("error[PW434]: refused to activate marketplace.milestone 1.0.0")
    assert "LOADED []" in result.stdout


def test_open_submit_and_show_work_without_it(deploy: dict[str, str], tmp_path: Path) -> None:
    store = str(tmp_path / "agreements.db")
    clock = tmp_path / "clock"
    clock.write_text("1780315200\n")
    steps = [
        ["activate", deploy["bundle"], "--trust", deploy["trust"], "--store", store, "--now", NOW],
        ["open", "marketplace.milestone", "--store", store, "--id", "a1", "--param", "price=64.90",
         "--party", "buyer=alice", "--party", "seller=bob", "--party", "arbiter=carol", "--clock-file", str(clock)],
        ["submit", "a1", "fund", "--as", "buyer:alice", "--key", "k1", "--store", store, "--clock-file", str(clock)],
        ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2", "--store", store, "--dry-run"],
        ["show", "a1", "--store", store, "--format", "json"],
        ["worker", "--store", store, "--drain", "--clock-file", str(clock)],
        ["outbox", "list", "--store", store, "--quarantined"],
        ["effects", "list", "--store", store, "--parked"],
        ["parties", "add", "carol", "--role", "arbiter", "--store", store, "--clock-file", str(clock)],
        ["parties", "list", "--store", store],
        ["parties", "add", "dora", "--role", "buyer", "--store", store, "--clock-file", str(clock), "--token"],
        ["parties", "token", "dora", "--store", store, "--clock-file", str(clock)],
        ["parties", "tokens", "--store", store],
        ["approvals", "list", "--store", store, "--status", "pending"],
        ["show", "a1", "--store", store, "--format", "json"],
        ["scheduler", "--store", store, "--once", "--clock-file", str(clock)],
        ["evidence", "a1", "--store", store],
        ["evidence", "verify", "a1", "--store", store],
    ]  # fmt: skip
    for step in steps:
        result = _run(*step)
        assert result.returncode == 0, (step[0], result.stderr)
        assert "LOADED []" in result.stdout, step[0]
    listed = _run("parties", "tokens", "--store", store, "--format", "json").stdout
    token_id = json.loads(listed[: listed.index("LOADED")])[0]["token_id"]
    revoked = _run("parties", "revoke", token_id, "--store", store)
    assert (revoked.returncode, revoked.stdout.splitlines()) == (0, [f"revoked {token_id}", "LOADED []"])
    refused = _run("submit", "a1", "nope", "--as", "buyer:alice", "--key", "k9", "--store", store)
    assert refused.returncode == 1
    assert refused.stderr.startswith("error[PW506]")
    assert "LOADED []" in refused.stdout


@pytest.mark.parametrize("command", [["balances"], ["postings", "fund:1"]], ids=["ledger-balances", "ledger-postings"])
def test_the_ledger_commands_work_without_it(tmp_path: Path, command: list[str]) -> None:
    from pactwright.runtime.ledger_db import open_ledger

    ledger_path = str(tmp_path / "pw.ledger.sqlite")
    with open_ledger(ledger_path, None) as ledger:
        ledger.apply("fund:1", "send [EUR/2 5] ( source = @world destination = @a )", {})
    result = _run("ledger", *command, "--ledger", ledger_path)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout
