"""`keygen` and `trust` as an operator runs them: real processes, real keys, real files.

Key files: the private half is created 0600 in the creating call itself
(never world-readable, even with umask 0), is never printed, and is never
overwritten; the key id is the sha256 of the raw public key, computed here
independently of `pactwright.signing`. Trust files: add, merge, revoke and
threshold round-trip through canonical bytes; every read refuses a hand
edit, a duplicate key, a key id that is not its key's hash, bad base64, an
unknown format, a threshold below one. Tests assert codes and exit codes,
not wording, and no run may print a traceback.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from pactwright.canonical import canonical_bytes, load_json
from pactwright.errors import UsageError
from pactwright.keys import generate_key_files, load_public_key
from pactwright.trust import Trust, add_key, parse_trust, revoke_key, set_threshold

REPO = Path(__file__).resolve().parents[1]
PW = [sys.executable, "-m", "pactwright.cli.main"]


def run(*args: str | Path, cwd: Path, umask: int | None = None) -> subprocess.CompletedProcess[str]:
    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    result = subprocess.run(
        [*PW, *map(str, args)], cwd=cwd, capture_output=True, text=True, preexec_fn=set_umask, check=False
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert "internal error" not in result.stderr, result.stderr
    return result


def code_of(result: subprocess.CompletedProcess[str]) -> str:
    """The PW code of the `error[PWnnn]` line on stderr."""
    for line in result.stderr.splitlines():
        if line.startswith("error["):
            return line[len("error[") : line.index("]")]
    raise AssertionError(f"no error line in: {result.stderr!r}")


def raw_key_id(pub_path: Path) -> str:
    """The key id computed without pactwright: sha256 over the raw 32 public key bytes."""
    key = serialization.load_pem_public_key(pub_path.read_bytes())
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert len(raw) == 32
    return "sha256:" + hashlib.sha256(raw).hexdigest()


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    for name in ("alice", "ci", "ci2"):
        generate_key_files(tmp_path / name)
    return tmp_path


# keygen -----------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_keygen_writes_a_0600_private_key_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    result = run("keygen", "--out", "alice", cwd=tmp_path, umask=umask)
    assert result.returncode == 0, result.stderr
    private, public = tmp_path / "alice.key", tmp_path / "alice.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) == 0o644 & ~umask
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert result.stdout.strip() == raw_key_id(public)


def test_keygen_never_prints_the_private_key(tmp_path: Path) -> None:
    for fmt in ("text", "json"):
        result = run("keygen", "--out", f"k{fmt}", "--format", fmt, cwd=tmp_path)
        assert result.returncode == 0
        body = "".join((tmp_path / f"k{fmt}.key").read_text().splitlines()[1:-1])
        output = result.stdout + result.stderr
        assert "PRIVATE KEY" not in output
        assert body not in output
        assert body[10:30] not in output
    doc = json.loads(run("keygen", "--out", "kj2", "--format", "json", cwd=tmp_path).stdout)
    assert doc["keyid"] == raw_key_id(tmp_path / "kj2.pub")


def test_keygen_creates_the_private_file_exclusively_with_mode_0600(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mode is given to the creating `open`, so no moment exists where the file is wider."""
    calls: list[tuple[str, int, int]] = []
    real_open = os.open

    def spy(path: Any, flags: int, mode: int = 0o777, *args: Any, **kwargs: Any) -> int:
        calls.append((os.fspath(path), flags, mode))
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    generate_key_files(tmp_path / "alice")
    private = [(flags, mode) for path, flags, mode in calls if path.endswith("alice.key")]
    assert len(private) == 1
    flags, mode = private[0]
    assert flags & os.O_CREAT and flags & os.O_EXCL
    assert mode == 0o600


def test_keygen_refuses_to_overwrite(tmp_path: Path) -> None:
    assert run("keygen", "--out", "alice", cwd=tmp_path).returncode == 0
    before = (tmp_path / "alice.key").read_bytes(), (tmp_path / "alice.pub").read_bytes()
    again = run("keygen", "--out", "alice", cwd=tmp_path)
    assert again.returncode == 2
    assert code_of(again) == "PW401"
    assert ((tmp_path / "alice.key").read_bytes(), (tmp_path / "alice.pub").read_bytes()) == before


def test_keygen_refuses_when_only_the_public_half_exists_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "bob.pub").write_text("someone else's key\n")
    result = run("keygen", "--out", "bob", cwd=tmp_path)
    assert (result.returncode, code_of(result)) == (2, "PW401")
    assert not (tmp_path / "bob.key").exists()
    assert (tmp_path / "bob.pub").read_text() == "someone else's key\n"


def test_keygen_does_not_follow_a_planted_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (tmp_path / "bob.key").symlink_to(target)
    result = run("keygen", "--out", "bob", cwd=tmp_path)
    assert (result.returncode, code_of(result)) == (2, "PW401")
    assert not target.exists()


def test_key_id_is_the_sha256_of_the_raw_public_key(tmp_path: Path) -> None:
    written = generate_key_files(tmp_path / "k")
    assert written.keyid == raw_key_id(written.public_path)


# trust: editing round trip ----------------------------------------------------------


def test_trust_add_creates_a_canonical_file_with_threshold_one(keys: Path) -> None:
    result = run("trust", "add", "ci.pub", "--role", "signer", cwd=keys)
    assert result.returncode == 0, result.stderr
    data = (keys / "trust.json").read_bytes()
    assert canonical_bytes(load_json(data)) == data
    doc = load_json(data)
    assert doc["format"] == "pactwright.trust/1"
    assert doc["threshold"] == 1
    (entry,) = doc["keys"]
    assert entry == {
        "keyid": raw_key_id(keys / "ci.pub"),
        "public_key": entry["public_key"],
        "roles": ["signer"],
        "scope": None,
        "revoked": False,
    }
    assert "sha256:" + hashlib.sha256(base64.b64decode(entry["public_key"])).hexdigest() == entry["keyid"]


def test_trust_add_revoke_threshold_round_trip(keys: Path) -> None:
    trust = ("--file", "deploy/trust.json")
    (keys / "deploy").mkdir()
    assert run("trust", "add", "alice.pub", "--role", "approver", "--scope", "b.pact", *trust, cwd=keys).returncode == 0
    assert run("trust", "add", "ci.pub", "--role", "signer", *trust, cwd=keys).returncode == 0
    assert run("trust", "add", "ci2.pub", "--role", "signer", *trust, cwd=keys).returncode == 0
    # Adding an existing key merges roles and scope.
    merged = run("trust", "add", "alice.pub", "--role", "signer", "--scope", "a.pact", *trust, cwd=keys)
    assert merged.returncode == 0
    assert run("trust", "threshold", "2", *trust, cwd=keys).returncode == 0
    assert run("trust", "revoke", raw_key_id(keys / "ci2.pub"), *trust, cwd=keys).returncode == 0

    listed = run("trust", "list", "--format", "json", *trust, cwd=keys)
    assert listed.returncode == 0
    doc = json.loads(listed.stdout)
    assert doc["threshold"] == 2
    by_id = {k["keyid"]: k for k in doc["keys"]}
    assert [k["keyid"] for k in doc["keys"]] == sorted(by_id)
    alice = by_id[raw_key_id(keys / "alice.pub")]
    assert (alice["roles"], alice["scope"], alice["revoked"]) == (["approver", "signer"], ["a.pact", "b.pact"], False)
    assert by_id[raw_key_id(keys / "ci2.pub")]["revoked"] is True
    assert by_id[raw_key_id(keys / "ci.pub")] == {**by_id[raw_key_id(keys / "ci.pub")], "scope": None}

    text = run("trust", "list", *trust, cwd=keys)
    assert text.returncode == 0
    assert raw_key_id(keys / "ci2.pub") in text.stdout
    assert "REVOKED" in text.stdout
    # The file on disk is exactly the canonical encoding of what was listed; no temp files remain.
    assert (keys / "deploy" / "trust.json").read_bytes() == canonical_bytes(doc)
    assert sorted(p.name for p in (keys / "deploy").iterdir()) == ["trust.json"]


def test_trust_library_round_trip(keys: Path) -> None:
    alice = load_public_key(keys / "alice.pub")
    ci = load_public_key(keys / "ci.pub")
    trust = add_key(Trust(), alice, ["approver"], ["m"])
    trust = add_key(trust, ci, ["signer"])
    trust = add_key(trust, alice, ["approver"])  # no scope given: alice keeps hers
    trust = set_threshold(trust, 1)
    assert parse_trust(trust.to_bytes()) == trust
    alice_id = raw_key_id(keys / "alice.pub")
    entry = trust.get(alice_id)
    assert entry is not None
    assert entry.scope == ("m",)
    assert entry.may("approver", "m")
    assert not entry.may("approver", "other")
    assert not entry.may("signer", "m")
    revoked = revoke_key(trust, alice_id)
    assert parse_trust(revoked.to_bytes()) == revoked
    revoked_entry = revoked.get(alice_id)
    assert revoked_entry is not None
    assert not revoked_entry.may("approver", "m")


def test_trust_add_merges_scope_but_never_narrows_a_key_trusted_for_any_pact(keys: Path) -> None:
    assert run("trust", "add", "ci.pub", "--role", "signer", cwd=keys).returncode == 0
    assert run("trust", "add", "ci.pub", "--role", "signer", "--scope", "x", cwd=keys).returncode == 0
    (entry,) = load_json((keys / "trust.json").read_bytes())["keys"]
    assert entry["scope"] is None


# trust: refusals --------------------------------------------------------------------


def _trust_doc(keys: Path) -> dict[str, Any]:
    """A valid two-key trust document, written to `trust.json`."""
    trust = add_key(Trust(), load_public_key(keys / "alice.pub"), ["approver"])
    trust = add_key(trust, load_public_key(keys / "ci.pub"), ["signer"])
    (keys / "trust.json").write_bytes(trust.to_bytes())
    return trust.to_json()


ALL_SUBCOMMANDS = (("list",), ("add", "ci2.pub", "--role", "signer"), ("threshold", "1"), ("revoke", "KEYID"))


def _refused(keys: Path, data: bytes, code: str, subcommands: tuple[tuple[str, ...], ...] = (("list",),)) -> None:
    """The trust file is refused (exit 2 with `code`) and left as it was."""
    path = keys / "trust.json"
    path.write_bytes(data)
    with pytest.raises(UsageError) as caught:
        parse_trust(data)
    assert caught.value.code == code
    for args in subcommands:
        args = tuple(raw_key_id(keys / "ci.pub") if a == "KEYID" else a for a in args)
        result = run("trust", *args, cwd=keys)
        assert (result.returncode, code_of(result)) == (2, code), (args, result.stderr)
        assert path.read_bytes() == data


def test_trust_refuses_a_hand_edited_non_canonical_file(keys: Path) -> None:
    doc = _trust_doc(keys)
    _refused(keys, json.dumps(doc, indent=2).encode(), "PW403", ALL_SUBCOMMANDS)


def test_trust_refuses_duplicate_keys(keys: Path) -> None:
    doc = _trust_doc(keys)
    doc["keys"] = [doc["keys"][0], doc["keys"][0], doc["keys"][1]]
    _refused(keys, canonical_bytes(doc), "PW404")


def test_trust_refuses_a_key_id_that_is_not_its_keys_hash(keys: Path) -> None:
    doc = _trust_doc(keys)
    doc["keys"][0]["public_key"], doc["keys"][1]["public_key"] = (
        doc["keys"][1]["public_key"],
        doc["keys"][0]["public_key"],
    )
    _refused(keys, canonical_bytes(doc), "PW405")


@pytest.mark.parametrize("bad", ["not base64!", "AAAA", base64.b64encode(b"x" * 33).decode()])
def test_trust_refuses_bad_base64_public_keys(keys: Path, bad: str) -> None:
    doc = _trust_doc(keys)
    doc["keys"][0]["public_key"] = bad
    _refused(keys, canonical_bytes(doc), "PW405")


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"format": "pactwright.trust/2"}, "PW403"),
        ({"threshold": 0}, "PW406"),
        ({"threshold": -1}, "PW406"),
        ({"threshold": True}, "PW406"),
        ({"extra": 1}, "PW403"),
    ],
)
def test_trust_refuses_bad_top_level_fields(keys: Path, change: dict[str, Any], code: str) -> None:
    _refused(keys, canonical_bytes({**_trust_doc(keys), **change}), code)


@pytest.mark.parametrize(
    "change",
    [{"roles": ["owner"]}, {"roles": []}, {"roles": ["signer", "approver"]}, {"scope": []}, {"revoked": "no"}],
)
def test_trust_refuses_bad_key_fields(keys: Path, change: dict[str, Any]) -> None:
    doc = _trust_doc(keys)
    doc["keys"][0].update(change)
    _refused(keys, canonical_bytes(doc), "PW403")


def test_trust_refuses_unsorted_keys(keys: Path) -> None:
    doc = _trust_doc(keys)
    doc["keys"].reverse()
    _refused(keys, canonical_bytes(doc), "PW403")


def test_trust_revoke_of_an_unknown_key_and_re_adding_a_revoked_key_are_refused(keys: Path) -> None:
    _trust_doc(keys)
    unknown = run("trust", "revoke", raw_key_id(keys / "ci2.pub"), cwd=keys)
    assert (unknown.returncode, code_of(unknown)) == (2, "PW407")
    assert run("trust", "revoke", raw_key_id(keys / "ci.pub"), cwd=keys).returncode == 0
    before = (keys / "trust.json").read_bytes()
    again = run("trust", "add", "ci.pub", "--role", "signer", cwd=keys)
    assert (again.returncode, code_of(again)) == (2, "PW407")
    assert (keys / "trust.json").read_bytes() == before


def test_trust_threshold_below_one_is_a_usage_error(keys: Path) -> None:
    for value in ("0", "-3", "two"):
        result = run("trust", "threshold", value, cwd=keys)
        assert result.returncode == 2
        assert not (keys / "trust.json").exists()


def test_trust_warns_when_the_threshold_exceeds_the_signers(keys: Path) -> None:
    _trust_doc(keys)
    result = run("trust", "threshold", "2", cwd=keys)
    assert result.returncode == 0
    assert "warning" in result.stderr


def test_trust_add_refuses_a_private_key_file_and_a_missing_file(keys: Path) -> None:
    private = run("trust", "add", "ci.key", "--role", "signer", cwd=keys)
    assert (private.returncode, code_of(private)) == (2, "PW402")
    missing = run("trust", "add", "nobody.pub", "--role", "signer", cwd=keys)
    assert (missing.returncode, code_of(missing)) == (2, "PW001")
    assert not (keys / "trust.json").exists()


def test_trust_add_requires_a_known_role(keys: Path) -> None:
    result = run("trust", "add", "ci.pub", "--role", "owner", cwd=keys)
    assert result.returncode == 2
    assert not (keys / "trust.json").exists()
