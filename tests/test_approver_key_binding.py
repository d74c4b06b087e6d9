"""An approval names the person whose key signs it: `approve` and `approvals grant` refuse anyone else's key.

`approve --approver alice` with a key the trust file records under another
name, or with a key other than the ones it records under `alice`, is
refused (PW480) and writes no approval. A grant for party `rita` signed
with the key the party registry lists for another party is refused (PW615)
and changes nothing in the store (real SQLite file and PostgreSQL schema);
a proof under no registered key stays PW608.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from pactwright.cli.main import main
from pactwright.errors import PactwrightError
from pactwright.keys import generate_key_files, load_public_key
from pactwright.runtime import TestClock, approvals, submit
from pactwright.runtime.activation import Refusal, verify_bundle
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import open_store
from pactwright.signing import raw_public_key, sign_statement
from pactwright.trust import Trust, add_key, load_trust, parse_trust, write_trust
from tests.signed_bundles import BACKENDS, NOW, Trusted, dump, key, signed, trust_bytes
from tests.test_runtime_approvals import T0, _assessed, _store

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "policies" / "marketplace_milestone.pact"


# approve and the trust file's names ---------------------------------------------------


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    for name in ("alice", "bob", "carol"):
        generate_key_files(tmp_path / name)
    trust = add_key(Trust(), load_public_key(tmp_path / "alice.pub"), ["approver"], name="alice")
    trust = add_key(trust, load_public_key(tmp_path / "bob.pub"), ["approver"], name="bob")
    trust = add_key(trust, load_public_key(tmp_path / "carol.pub"), ["approver"])  # listed without a name
    write_trust(tmp_path / "trust.json", trust)
    return tmp_path


def _approve(keys: Path, key_name: str, approver: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    out = keys / "out.approval.json"
    args = ["approve", str(POLICY), "--key", str(keys / f"{key_name}.key"), "--approver", approver]
    code = main([*args, "--trust", str(keys / "trust.json"), "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert out.exists() == (code == 0)
    return code, err


def test_approve_with_your_own_key_and_name(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _approve(keys, "alice", "alice", capsys)[0] == 0


@pytest.mark.parametrize(
    ("key_name", "approver"),
    [("bob", "alice"), ("carol", "alice"), ("alice", "bob")],
    ids=["named-key-other-name", "unnamed-key-claims-a-taken-name", "own-key-other-persons-name"],
)
def test_approve_with_another_persons_name_or_key_is_pw480(
    keys: Path, key_name: str, approver: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _approve(keys, key_name, approver, capsys)
    assert code == 1
    assert err.startswith("error[PW480]")
    assert f"`{approver}`" in err


def test_an_unnamed_key_binds_no_name(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A key listed without a name (trust files written before names) approves as a name nobody holds."""
    code, err = _approve(keys, "carol", "carol", capsys)
    assert code == 0
    assert "records no name" in err


def test_trust_names_round_trip_and_a_named_key_keeps_its_name(keys: Path) -> None:
    trust = load_trust(keys / "trust.json")
    assert parse_trust(trust.to_bytes()) == trust
    assert {k.name for k in trust.keys} == {"alice", "bob", None}
    unnamed = next(k for k in trust.keys if k.name is None)
    assert "name" not in unnamed.to_json()  # files without names keep their bytes
    with pytest.raises(PactwrightError) as caught:
        add_key(trust, load_public_key(keys / "alice.pub"), ["approver"], name="mallory")
    assert caught.value.code == "PW480"
    named = add_key(trust, load_public_key(keys / "carol.pub"), ["approver"], name="carol")
    assert {k.name for k in named.keys} == {"alice", "bob", "carol"}


def test_trust_add_name_on_the_command_line(keys: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(keys / "trust.json")
    assert main(["trust", "add", str(keys / "carol.pub"), "--role", "approver", "--name", "carol", "--file", path]) == 0
    assert "carol" in {k.name for k in load_trust(path).keys}
    capsys.readouterr()
    assert main(["trust", "list", "--file", path, "--format", "json"]) == 0
    assert {k.get("name") for k in json.loads(capsys.readouterr().out)["keys"]} == {"alice", "bob", "carol"}


# approvals grant and the party registry ------------------------------------------------


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _store(request.param, tmp_path)


def _parked(url: str) -> dict[str, str]:
    with open_store(url) as store:
        for party in ("rita", "bob"):
            add_party(store, party, "refund_approver", raw_public_key(key(party).private.public_key()), T0)
        _assessed(store)
        parked = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 20))
    assert parked.approval is not None
    return {"id": str(parked.approval["id"]), "preview_digest": str(parked.approval["preview_digest"])}


@pytest.mark.parametrize(("signer", "code"), [("bob", "PW615"), ("mallory", "PW608")], ids=["registered", "unknown"])
@pytest.mark.parametrize("decision", ["grant", "reject"])
def test_a_decision_signed_with_another_partys_key_is_refused(url: str, signer: str, code: str, decision: str) -> None:
    request = _parked(url)
    statement = approvals.decision_statement(request["id"], request["preview_digest"], decision)
    proof = sign_statement(key(signer).private, statement)
    before = dump(url)
    with open_store(url) as store, pytest.raises(PactwrightError) as caught:
        getattr(approvals, decision)(store, request["id"], "rita", proof, TestClock(T0 + 30))
    assert caught.value.code == code
    if code == "PW615":
        assert "`bob`" in caught.value.message
    assert dump(url) == before
    with open_store(url) as store:  # rita's own key still decides it
        statement = approvals.decision_statement(request["id"], request["preview_digest"], decision)
        mine = sign_statement(key("rita").private, statement)
        getattr(approvals, decision)(store, request["id"], "rita", mine, TestClock(T0 + 30))


# activation checks the name again ----------------------------------------------------


def _activation_code(trusted_name: str | None, approval_name: str, others: tuple[Trusted, ...] = ()) -> str | None:
    trust = trust_bytes([Trusted(key("alice"), ("approver",), name=trusted_name), Trusted(key("signer")), *others])
    files = signed(approver_name=approval_name)
    try:
        verify_bundle(files, trust, now=datetime.fromisoformat(NOW))
    except Refusal as refusal:
        return refusal.code
    return None


def test_activation_accepts_an_approval_in_its_keys_own_name() -> None:
    assert _activation_code("alice", "alice") is None
    assert _activation_code(None, "alice") is None  # a key with no recorded name binds no name


def test_activation_refuses_an_approval_naming_another_person_than_its_key_records() -> None:
    # An approval made without a trust file at hand (or written by other means) puts `mallory` on alice's key.
    assert _activation_code("alice", "mallory") == "PW480"
    # An unnamed key claiming a name the trust file records for another key.
    assert _activation_code(None, "bob", (Trusted(key("bob"), ("approver",), name="bob"),)) == "PW480"
