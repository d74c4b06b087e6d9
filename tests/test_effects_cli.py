"""`pactwright effects` and `worker --providers` from the command line: real processes, hostile input.

A parked refund (reconcilable, lost response, the first lookup unanswered)
is resolved through the CLI; every malformed resolution, unknown call,
non-operator and bad providers file is a clear code with exit 1 or 2, no
traceback, and changes nothing.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pactwright.runtime.effect_ops import list_effects
from pactwright.runtime.provider_sim import Simulator, start_simulator
from pactwright.runtime.store import open_store
from tests.effect_env import T0, issued, providers_file, refund_store


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pactwright.cli.main", *args], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip


@pytest.fixture
def parked(tmp_path: Path) -> Iterator[tuple[str, Path, Simulator]]:
    with start_simulator() as sim, refund_store("sqlite", tmp_path, "reconcilable") as url:
        with open_store(url) as store:
            issued(store)
            with store.transaction(exclusive=False) as db:
                db.execute("INSERT INTO parties (party, role, public_key, added_at) VALUES ('olga', 'operator', "
                           "NULL, ?)", (T0,))  # fmt: skip
        clock = tmp_path / "clock"
        clock.write_text(f"{T0 + 30}\n")
        sim.queue("lost_response", "lookup_unknown")
        done = _cli("worker", "--store", url, "--drain", "--providers", str(providers_file(tmp_path, sim.url)),
                    "--clock-file", str(clock))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "needs_reconciliation" in done.stdout
        yield url, tmp_path, sim


def _dump(url: str) -> object:
    with open_store(url) as store:
        return store.dump()


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    [
        (["reconcile", "r1", "r1/9/e0", "--resolution", "not_occurred", "--as", "olga"], "PW640", 1),
        (["reconcile", "r1", "refund_payment", "--resolution", "recovered_acknowledgement", "--as", "olga"],
         "PW643", 2),
        (["reconcile", "r1", "refund_payment", "--resolution", "not_occurred", "--provider-ref", "x", "--as",
          "olga"], "PW643", 2),
        (["reconcile", "r1", "refund_payment", "--resolution", "recovered_acknowledgement", "--provider-ref",
          "bad\x07ref", "--as", "olga"], "PW643", 2),
        (["reconcile", "r1", "refund_payment", "--resolution", "maybe", "--as", "olga"], "PW001", 2),
        (["reconcile", "r1", "refund_payment", "--resolution", "not_occurred", "--as", "sam"], "PW641", 1),
        (["abandon", "r1", "refund_payment", "--reason", "", "--as", "olga"], "PW643", 2),
        (["abandon", "r1", "read_order", "--reason", "no", "--as", "olga"], "PW642", 1),
        (["abandon", "nope", "refund_payment", "--reason", "no", "--as", "olga"], "PW501", 1),
    ],
    ids=["unknown-call", "recovered-without-ref", "not-occurred-with-ref", "control-char-ref", "bad-resolution",
         "not-an-operator", "empty-reason", "not-parked", "unknown-agreement"],
)  # fmt: skip
def test_a_bad_resolution_is_a_clear_code_and_changes_nothing(
    parked: tuple[str, Path, Simulator], args: list[str], code: str, exit_code: int
) -> None:
    url, _, _ = parked
    before = _dump(url)
    done = _cli("effects", *args, "--store", url)
    assert done.returncode == exit_code, done.stderr
    assert f"error[{code}]" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert _dump(url) == before


def test_an_operator_resolves_the_parked_refund_from_the_cli(parked: tuple[str, Path, Simulator]) -> None:
    url, _, sim = parked
    listed = _cli("effects", "list", "--parked", "--store", url, "--format", "json")
    assert listed.returncode == 0 and '"needs_reconciliation"' in listed.stdout
    ref = sim.state()["records"][0]["id"]
    done = _cli("effects", "reconcile", "r1", "refund_payment", "--resolution", "recovered_acknowledgement",
                "--provider-ref", ref, "--as", "olga", "--store", url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    with open_store(url) as store:
        refund = next(r for r in list_effects(store) if r.effect == "refund_payment")
    assert (refund.phase, refund.provider_ref, refund.resolved_by) == ("reconciled_recovered", ref, "olga")
    assert sim.state()["writes"] == 1


@pytest.mark.parametrize(
    "content",
    ["not toml [[[", '[destination."https://api.payments.example.com"]\nendpoint = "ftp://x"\n', "\xff\xfe"],
    ids=["not-toml", "bad-endpoint", "not-utf8"],
)
def test_a_bad_providers_file_is_refused_before_anything_is_sent(
    parked: tuple[str, Path, Simulator], content: str
) -> None:
    url, directory, sim = parked
    bad = directory / "bad.toml"
    bad.write_bytes(content.encode("utf-8", "surrogateescape") if content != "\xff\xfe" else b"\xff\xfe")
    requests = sim.state()["requests"]
    before = _dump(url)
    done = _cli("worker", "--store", url, "--drain", "--providers", str(bad))
    assert done.returncode == 2, done.stderr
    assert "error[PW623]" in done.stderr and "Traceback" not in done.stderr
    assert _dump(url) == before and sim.state()["requests"] == requests


def test_a_credential_reaches_only_its_provider_and_nothing_written(tmp_path: Path) -> None:
    import hashlib
    import json
    import os

    secret = "sk_live_s3cr3t-token-0123456789"  # noqa: S105 - a test credential, grepped for
    with start_simulator() as sim, refund_store("sqlite", tmp_path, "reconcilable") as url:
        with open_store(url) as store:
            issued(store)
        clock = tmp_path / "clock"
        clock.write_text(f"{T0 + 30}\n")
        providers = providers_file(tmp_path, sim.url, credential="payments")
        sim.queue("lost_response")  # a retry and a lookup too: every path that carries the credential
        env = {**os.environ, "PACTWRIGHT_SECRET_PAYMENTS": secret}
        outputs = []
        for n in range(3):
            clock.write_text(f"{T0 + 30 + 1000 * n}\n")
            done = subprocess.run(
                [sys.executable, "-m", "pactwright.cli.main", "worker", "--store", url, "--drain", "--providers",
                 str(providers), "--clock-file", str(clock), "--format", "json"],
                capture_output=True, text=True, env=env, timeout=120, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            outputs += [done.stdout, done.stderr]
        for args in (["evidence", "r1"], ["evidence", "r1", "--format", "json"], ["effects", "list"],
                     ["show", "r1", "--format", "json"]):  # fmt: skip
            shown = _cli(*args, "--store", url)
            outputs += [shown.stdout, shown.stderr]
        with open_store(url) as store:
            outputs.append(repr(store.dump()))
        outputs += [p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()
                    and p.name != "providers.toml"]  # fmt: skip
        outputs.append(json.dumps(sim.state()))
        assert not [text for text in outputs if secret in text]
        refund = next(r for r in sim.state()["records"] if r["path"] == "/refunds")
        assert refund["authorization"] == "sha256:" + hashlib.sha256(f"Bearer {secret}".encode()).hexdigest()
