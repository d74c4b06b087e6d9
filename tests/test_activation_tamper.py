"""Tampered bundles on disk, activated against real SQLite and PostgreSQL stores.

Every case builds a real signed bundle (compiled, verified, approved and
signed as docs/signing.md says), tampers with it the way an attacker or an
accident would, runs `pactwright activate` on it, and asserts two things:
the refusal's code, and that the store is row for row what it was before
(python-tuf's client tests assert the same of their metadata directory
after every attack). Where a tampered manifest, approval or report would
otherwise be caught only because its signatures no longer match, the case
re-signs it: the check under test must hold even for a bundle a careless
or compromised signer vouched for.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.cli.main import main
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import open_store
from pactwright.signing import APPROVAL_PATH, SIGNATURES_FORMAT, SIGNATURES_PATH
from tests.signed_bundles import (
    BACKENDS,
    NOW,
    PACT_ID,
    Trusted,
    approval_bytes,
    built,
    default_trust,
    dump,
    key,
    manifest_of,
    remanifest,
    sign,
    signatures_bytes,
    signed,
    temporary_store,
    trust_bytes,
    write,
)

Files = dict[str, bytes]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as url:
        yield url


@dataclass
class Setup:
    """A tampered bundle and what to activate it with."""

    files: Files | None = None  # written to `bundle/` unless `prepare` wrote the directory itself
    trust: bytes = field(default_factory=default_trust)
    args: tuple[str, ...] = ()
    baseline: tuple[Files, ...] = ()  # activated first, so the store is not empty


def _activate(bundle: Path, trust: Path, url: str, *args: str) -> int:
    return main(["activate", str(bundle), "--trust", str(trust), "--store", url, "--now", NOW, *args])


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 0x01
    return bytes(out)


def _flip_b64(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[7] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def _json(files: Files, path: str) -> dict[str, Any]:
    doc: dict[str, Any] = load_json(files[path])
    return doc


def _edit_manifest(edit: Callable[[dict[str, Any]], None]) -> Files:
    return sign(remanifest(built(), edit))


# The cases ------------------------------------------------------------------------
# Each takes the bundle directory (not yet written) and returns its Setup.


def artifact_byte(_: Path) -> Setup:
    files = signed()
    files["ledger/release.num"] = _flip(files["ledger/release.num"], 10)
    return Setup(files)


def report_byte(_: Path) -> Setup:
    files = signed()
    files["report.json"] = _flip(files["report.json"], 100)
    return Setup(files)


def manifest_byte(_: Path) -> Setup:
    files = signed()
    listed = next(a["sha256"] for a in manifest_of(files)["artifacts"] if a["path"] == "ledger/fund.num")
    at = files["manifest.json"].index(listed.encode()) + 20
    digit = files["manifest.json"][at : at + 1]
    files["manifest.json"] = (
        files["manifest.json"][:at] + (b"0" if digit != b"0" else b"1") + files["manifest.json"][at + 1 :]
    )
    return Setup(files)


def manifest_rewritten_unsigned(_: Path) -> Setup:
    # A consistent new manifest over a changed artifact, with the old signatures.
    old = signed()
    files = remanifest({**built(), "ledger/release.num": b"send [EUR/2 *] ( source = @world destination = @me )\n"})
    return Setup({**files, APPROVAL_PATH: old[APPROVAL_PATH], SIGNATURES_PATH: old[SIGNATURES_PATH]})


def file_removed(_: Path) -> Setup:
    files = signed()
    del files["ledger/fund.num"]
    return Setup(files)


def file_added(_: Path) -> Setup:
    return Setup({**signed(), "notes.txt": b"not listed\n"})


def dotfile_added(_: Path) -> Setup:
    return Setup({**signed(), "ledger/.DS_Store": b"\x00\x01"})


def empty_directory(bundle: Path) -> Setup:
    write(signed(), bundle)
    (bundle / "extra").mkdir()
    return Setup()


def file_renamed(_: Path) -> Setup:
    files = signed()
    files["ledger/fund2.num"] = files.pop("ledger/fund.num")
    return Setup(files)


def case_lookalike(_: Path) -> Setup:
    files = signed()
    files["Model.json"] = files.pop("model.json")
    return Setup(files)


def unicode_lookalike(_: Path) -> Setup:
    files = signed()
    return Setup({**files, "\uff4dodel.json": files["model.json"]})  # full-width m: NFKC gives `model.json`


def document_lookalike(_: Path) -> Setup:
    files = signed()
    files["Signatures.json"] = files.pop(SIGNATURES_PATH)
    return Setup(files)


def symlink(bundle: Path) -> Setup:
    files = signed()
    write(files, bundle)
    outside = bundle.parent / "elsewhere.num"
    outside.write_bytes(files["ledger/fund.num"])
    (bundle / "ledger/fund.num").unlink()
    (bundle / "ledger/fund.num").symlink_to(outside)
    return Setup()


def fifo(bundle: Path) -> Setup:
    write(signed(), bundle)
    os.mkfifo(bundle / "pipe")
    return Setup()


def dotdot_path(_: Path) -> Setup:
    def edit(m: dict[str, Any]) -> None:
        m["artifacts"].insert(0, {"path": "../evil.num", "sha256": hash_bytes(b"x"), "size": 1})

    return Setup(_edit_manifest(edit))


def absolute_path(_: Path) -> Setup:
    def edit(m: dict[str, Any]) -> None:
        m["artifacts"].insert(0, {"path": "/etc/passwd", "sha256": hash_bytes(b"x"), "size": 1})

    return Setup(_edit_manifest(edit))


def manifest_reformatted(_: Path) -> Setup:
    files = signed()
    files["manifest.json"] = json.dumps(manifest_of(files), indent=2).encode()
    return Setup(files)


def manifest_reordered(_: Path) -> Setup:
    files = signed()
    doc = manifest_of(files)
    files["manifest.json"] = json.dumps(dict(reversed(doc.items())), separators=(",", ":")).encode()
    return Setup(files)


def manifest_duplicate_key(_: Path) -> Setup:
    files = signed()
    files["manifest.json"] = b'{"format":"pactwright.manifest/1",' + files["manifest.json"][1:]
    return Setup(files)


def approval_reformatted(_: Path) -> Setup:
    files = signed()
    files[APPROVAL_PATH] = json.dumps(_json(files, APPROVAL_PATH), indent=1).encode()
    return Setup(files)


def signatures_duplicate_key(_: Path) -> Setup:
    files = signed()
    files[SIGNATURES_PATH] = b'{"format":"x",' + files[SIGNATURES_PATH][1:]
    return Setup(files)


def report_reordered(_: Path) -> Setup:
    files = built()
    doc = _json(files, "report.json")
    files["report.json"] = json.dumps(dict(reversed(doc.items())), separators=(",", ":")).encode()
    return Setup(sign(remanifest(files)))


def manifest_missing(_: Path) -> Setup:
    files = signed()
    del files["manifest.json"]
    return Setup(files)


def unsupported_format(_: Path) -> Setup:
    return Setup(_edit_manifest(lambda m: m.update(format="pactwright.manifest/2")))


def not_semver(_: Path) -> Setup:
    return Setup(_edit_manifest(lambda m: m["pact"].update(version="one")))


def unsupported_compiler(_: Path) -> Setup:
    return Setup(_edit_manifest(lambda m: m["compiler"].update(version="9.9.9")))


def candidate_other_pact(_: Path) -> Setup:
    files = built()
    candidate = _json(files, "candidate.json")
    candidate["pact"]["version"] = "9.9.9"
    files["candidate.json"] = canonical_bytes(candidate)
    return Setup(sign(remanifest(files, lambda m: m.update(candidate_hash=hash_bytes(files["candidate.json"])))))


def signatures_missing(_: Path) -> Setup:
    files = signed()
    del files[SIGNATURES_PATH]
    return Setup(files)


def signatures_malformed(_: Path) -> Setup:
    files = signed()
    doc = _json(files, SIGNATURES_PATH)
    doc["format"] = "pactwright.signatures/0"
    files[SIGNATURES_PATH] = canonical_bytes(doc)
    return Setup(files)


def signatures_empty(_: Path) -> Setup:
    files = signed()
    files[SIGNATURES_PATH] = canonical_bytes({"format": SIGNATURES_FORMAT, "signatures": []})
    return Setup(files)


def signatures_same_key_twice(_: Path) -> Setup:
    return Setup(signed(signers=[key("signer"), key("signer")]))


def unknown_signer(_: Path) -> Setup:
    return Setup(signed(signers=[key("mallory")]))


def revoked_signer(_: Path) -> Setup:
    trust = trust_bytes([Trusted(key("alice"), ("approver",)), Trusted(key("signer"), revoked=True)])
    return Setup(signed(), trust=trust)


def signer_without_role(_: Path) -> Setup:
    return Setup(signed(signers=[key("alice")]))  # alice may approve, not sign


def signer_out_of_scope(_: Path) -> Setup:
    trust = trust_bytes([Trusted(key("alice"), ("approver",)), Trusted(key("signer"), scope=("support.refund",))])
    return Setup(signed(), trust=trust)


def signature_bytes_invalid(_: Path) -> Setup:
    files = signed()
    doc = _json(files, SIGNATURES_PATH)
    doc["signatures"][0]["signature"] = _flip_b64(doc["signatures"][0]["signature"])
    files[SIGNATURES_PATH] = canonical_bytes(doc)
    return Setup(files)


def signature_from_other_bundle(_: Path) -> Setup:
    # Mix and match: 1.1.0's valid signature in the 1.0.0 bundle.
    return Setup({**signed(), SIGNATURES_PATH: signed("1.1.0")[SIGNATURES_PATH]})


def signature_binds_other_approval(_: Path) -> Setup:
    files = signed()
    files[APPROVAL_PATH] = approval_bytes(manifest_of(files), key("alice"), name="alice (again)")
    return Setup(files)


def expired(_: Path) -> Setup:
    return Setup(signed(expires="2026-01-01T00:00:00Z"))  # NOW is 2026-06-01


def below_threshold(_: Path) -> Setup:
    return Setup(signed(), trust=default_trust(threshold=2, signers=("signer", "signer2", "signer3")))


def below_threshold_same_key_twice(_: Path) -> Setup:
    trust = default_trust(threshold=2, signers=("signer", "signer2", "signer3"))
    return Setup(signed(signers=[key("signer"), key("signer")]), trust=trust)


def approval_missing(_: Path) -> Setup:
    files = signed()
    del files[APPROVAL_PATH]
    return Setup(files)


def approval_malformed(_: Path) -> Setup:
    files = signed()
    doc = _json(files, APPROVAL_PATH)
    doc["format"] = "pactwright.approval/0"
    files[APPROVAL_PATH] = canonical_bytes(doc)
    return Setup(files)


def approval_by_non_approver(_: Path) -> Setup:
    return Setup(signed(approver=key("signer")))


def approval_by_unknown_key(_: Path) -> Setup:
    return Setup(signed(approver=key("eve")))


def approval_signature_invalid(_: Path) -> Setup:
    files = signed()
    doc = _json(files, APPROVAL_PATH)
    doc["signature"] = _flip_b64(doc["signature"])
    files[APPROVAL_PATH] = canonical_bytes(doc)
    files[SIGNATURES_PATH] = signatures_bytes(files["manifest.json"], files[APPROVAL_PATH], [key("signer")])
    return Setup(files)


def approval_stale(_: Path) -> Setup:
    files = built()
    files[APPROVAL_PATH] = approval_bytes(manifest_of(built("1.1.0")), key("alice"))
    files[SIGNATURES_PATH] = signatures_bytes(files["manifest.json"], files[APPROVAL_PATH], [key("signer")])
    return Setup(files)


def report_missing(_: Path) -> Setup:
    return Setup(_edit_manifest(lambda m: m.update(report=None)))


def report_failing(_: Path) -> Setup:
    files = built()
    report = _json(files, "report.json")
    report["verdict"] = "fail"
    files["report.json"] = canonical_bytes(report)
    fail = {"path": "report.json", "hash": hash_bytes(files["report.json"]), "verdict": "fail"}
    return Setup(sign(remanifest(files, lambda m: m.update(report=fail))))


def report_incomplete(_: Path) -> Setup:
    """A pass whose own exploration says a bound stopped it, flag edited to `complete`, signed anyway."""
    files = built()
    report = _json(files, "report.json")
    report["exploration"]["exhausted"] = False
    report["exploration"]["bound_hit"] = "max_depth"
    report["complete"] = True  # the edited flag: activation recomputes completeness instead
    report["allow_incomplete"] = False
    files["report.json"] = canonical_bytes(report)
    ref = {"path": "report.json", "hash": hash_bytes(files["report.json"]), "verdict": "pass"}
    return Setup(sign(remanifest(files, lambda m: m.update(report=ref))))


def report_malformed(_: Path) -> Setup:
    files = built()
    report = _json(files, "report.json")
    report["artifacts"] = sorted(report["artifacts"])  # a list of paths, not a map of hashes
    files["report.json"] = canonical_bytes(report)
    ref = {"path": "report.json", "hash": hash_bytes(files["report.json"]), "verdict": "pass"}
    return Setup(sign(remanifest(files, lambda m: m.update(report=ref))))


def report_from_other_build(_: Path) -> Setup:
    other = built("1.1.0")
    files = {**built(), **{p: other[p] for p in ("report.json", "report.md", "report.html")}}
    return Setup(sign(remanifest(files)))  # the manifest still names the old report's hash


def report_bound_to_other_candidate(_: Path) -> Setup:
    other = built("1.1.0")
    files = {**built(), **{p: other[p] for p in ("report.json", "report.md", "report.html")}}
    ref = {"path": "report.json", "hash": hash_bytes(other["report.json"]), "verdict": "pass"}
    return Setup(sign(remanifest(files, lambda m: m.update(report=ref))))


def report_bound_to_other_artifacts(_: Path) -> Setup:
    files = built()
    files["ledger/release.num"] += b"// unverified change\n"
    return Setup(sign(remanifest(files)))


def rollback(_: Path) -> Setup:
    return Setup(signed("1.0.0"), baseline=(signed("1.1.0"),))


def same_version_other_bytes(_: Path) -> Setup:
    return Setup(signed("1.0.0"), baseline=(sign(built("1.0.0", faults=0)),))


def oversized_file(_: Path) -> Setup:
    return Setup(signed(), args=("--max-file-bytes", "20000"))


def oversized_bundle(_: Path) -> Setup:
    return Setup(signed(), args=("--max-total-bytes", "60000"))


CASES: list[tuple[Callable[[Path], Setup], str]] = [
    (oversized_file, "PW422"),
    (oversized_bundle, "PW423"),
    (symlink, "PW420"),
    (fifo, "PW421"),
    (empty_directory, "PW433"),
    (manifest_missing, "PW424"),
    (manifest_reformatted, "PW425"),
    (manifest_reordered, "PW425"),
    (manifest_duplicate_key, "PW425"),
    (unsupported_format, "PW426"),
    (dotdot_path, "PW427"),
    (absolute_path, "PW427"),
    (not_semver, "PW428"),
    (unsupported_compiler, "PW429"),
    (case_lookalike, "PW430"),
    (unicode_lookalike, "PW430"),
    (document_lookalike, "PW430"),
    (file_renamed, "PW431"),
    (file_removed, "PW432"),
    (file_added, "PW433"),
    (dotfile_added, "PW433"),
    (artifact_byte, "PW434"),
    (report_byte, "PW434"),
    (manifest_byte, "PW434"),
    (report_reordered, "PW425"),
    (candidate_other_pact, "PW435"),
    (signatures_missing, "PW436"),
    (signatures_duplicate_key, "PW425"),
    (signatures_malformed, "PW437"),
    (signatures_empty, "PW438"),
    (approval_missing, "PW439"),
    (approval_reformatted, "PW425"),
    (approval_malformed, "PW440"),
    (unknown_signer, "PW441"),
    (revoked_signer, "PW442"),
    (signer_without_role, "PW443"),
    (signer_out_of_scope, "PW444"),
    (signature_bytes_invalid, "PW445"),
    (signature_from_other_bundle, "PW446"),
    (manifest_rewritten_unsigned, "PW446"),
    (signature_binds_other_approval, "PW447"),
    (expired, "PW448"),
    (below_threshold, "PW449"),
    (below_threshold_same_key_twice, "PW449"),
    (signatures_same_key_twice, "PW450"),
    (approval_by_non_approver, "PW451"),
    (approval_by_unknown_key, "PW451"),
    (approval_signature_invalid, "PW452"),
    (approval_stale, "PW453"),
    (report_missing, "PW454"),
    (report_malformed, "PW455"),
    (report_from_other_build, "PW456"),
    (report_bound_to_other_candidate, "PW457"),
    (report_bound_to_other_artifacts, "PW458"),
    (report_failing, "PW459"),
    (report_incomplete, "PW462"),
    (rollback, "PW460"),
    (same_version_other_bytes, "PW461"),
]


@pytest.mark.parametrize(("prepare", "code"), CASES, ids=[f"{c}-{p.__name__}" for p, c in CASES])
def test_tampered_bundle_is_refused_and_the_store_is_unchanged(
    prepare: Callable[[Path], Setup], code: str, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "bundle"
    setup = prepare(bundle)
    if setup.files is not None:
        write(setup.files, bundle)
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    for index, files in enumerate(setup.baseline or (signed("0.9.0"),)):
        assert _activate(write(files, tmp_path / f"baseline{index}"), trust, store_url) == 0
    trust.write_bytes(setup.trust)
    before = dump(store_url)
    capsys.readouterr()

    assert _activate(bundle, trust, store_url, *setup.args) == 1
    err = capsys.readouterr().err
    assert re.match(rf"error\[{code}\]: refused to activate ", err), err
    assert "nothing was changed in the store" in err
    assert dump(store_url) == before


def test_the_tamper_suite_covers_every_activation_code() -> None:
    from pactwright.runtime.activation import VERIFICATION_ORDER

    activation_codes = {c for _, codes in VERIFICATION_ORDER for c in codes if c >= "PW420"}
    assert activation_codes <= {code for _, code in CASES}
    assert len(CASES) >= 30


# What a refusal looks like (EXAMPLES.md: "A refusal at deploy") ----------------------


def test_a_refusal_names_the_file_both_values_and_the_active_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = str(tmp_path / "store.db")
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    assert _activate(write(signed("0.9.0"), tmp_path / "old"), trust, url) == 0
    files = signed()
    files["ledger/release.num"] = files["ledger/release.num"][:-1]
    capsys.readouterr()
    assert _activate(write(files, tmp_path / "new"), trust, url) == 1
    lines = capsys.readouterr().err.splitlines()
    listed = next(a for a in manifest_of(files)["artifacts"] if a["path"] == "ledger/release.num")
    assert lines[0] == (
        "error[PW434]: refused to activate marketplace.milestone 1.0.0: "
        "`ledger/release.num` does not match the manifest"
    )
    assert lines[1] == f"  manifest: {listed['sha256']}  size {listed['size']}"
    assert lines[2] == f"  on disk:  {hash_bytes(files['ledger/release.num'])}  size {listed['size'] - 1}"
    assert lines[-1] == "nothing was changed in the store (active version is still 0.9.0)"


def test_an_expired_signature_prints_expires_and_now(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    bundle = write(signed(), tmp_path / "b")
    assert _activate(bundle, trust, str(tmp_path / "s.db"), "--now", "2030-01-01T00:00:00Z") == 1
    err = capsys.readouterr().err
    assert "  expires: 2030-01-01T00:00:00Z" in err
    assert "  now:     2030-01-01T00:00:00Z" in err
    assert "(no version of marketplace.milestone is active)" in err


def test_a_refused_bundle_does_not_create_the_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    files = signed()
    del files[SIGNATURES_PATH]
    assert _activate(write(files, tmp_path / "b"), trust, str(tmp_path / "new.db")) == 1
    assert not (tmp_path / "new.db").exists()


def test_json_output_on_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    bundle = write(signed(signers=[key("mallory")]), tmp_path / "b")
    assert _activate(bundle, trust, str(tmp_path / "s.db"), "--format", "json") == 1
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "refused"
    assert out["error"]["code"] == "PW441"
    assert out["error"]["pact_id"] == PACT_ID


# What activation accepts -------------------------------------------------------------


def test_a_good_bundle_activates_and_is_stored_verbatim(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    files = signed()
    assert _activate(write(files, tmp_path / "b"), trust, store_url) == 0
    assert "activated marketplace.milestone 1.0.0 (first version)" in capsys.readouterr().out
    with open_store(store_url) as store:
        loaded = store.load_active(PACT_ID)
        assert dict(loaded.files) == files
        assert loaded.activation.activated_at == NOW
        assert not loaded.activation.forced
        assert loaded.activation.previous_version is None


def test_activating_the_active_bundle_again_changes_nothing(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    bundle = write(signed(), tmp_path / "b")
    assert _activate(bundle, trust, store_url) == 0
    before = dump(store_url)
    assert _activate(bundle, trust, store_url) == 0
    assert "already active" in capsys.readouterr().out
    assert dump(store_url) == before


def test_a_forced_rollback_with_a_reason_activates_and_is_recorded(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    assert _activate(write(signed("1.1.0"), tmp_path / "new"), trust, store_url) == 0
    old = write(signed("1.0.0"), tmp_path / "old")
    assert _activate(old, trust, store_url, "--force-rollback") == 2  # a reason is required
    reason = "incident 7: 1.1.0 double-charges disputes"
    assert _activate(old, trust, store_url, "--force-rollback", "--reason", reason) == 0
    assert "by forced rollback from 1.1.0" in capsys.readouterr().out
    with open_store(store_url) as store:
        assert store.active(PACT_ID).pact_version == "1.0.0"  # type: ignore[union-attr]
        record = store.history(PACT_ID)[-1]
    assert (record.forced, record.reason, record.previous_version) == (True, reason, "1.1.0")


def test_key_rotation(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new signer is added and the old one revoked: only bundles the new key signed activate."""
    rotated = trust_bytes(
        [Trusted(key("alice"), ("approver",)), Trusted(key("signer"), revoked=True), Trusted(key("signer-2026"))]
    )
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    assert _activate(write(signed("0.9.0"), tmp_path / "before"), trust, store_url) == 0
    trust.write_bytes(rotated)
    by_old = write(signed("1.0.0"), tmp_path / "old-key")
    before = dump(store_url)
    assert _activate(by_old, trust, store_url) == 1
    assert "error[PW442]" in capsys.readouterr().err
    assert dump(store_url) == before
    by_new = write(signed("1.0.0", signers=[key("signer-2026")]), tmp_path / "new-key")
    assert _activate(by_new, trust, store_url) == 0


def test_a_threshold_is_met_by_distinct_keys(tmp_path: Path) -> None:
    trust = default_trust(threshold=2, signers=("signer", "signer2", "signer3"))
    files = signed(signers=[key("signer3"), key("signer")])
    with open_store(str(tmp_path / "s.db")) as store:
        result = activate_files(store, files, trust, clock=FixedClock(datetime.fromisoformat(NOW)))
    assert set(result.bundle.signer_keyids) == {key("signer").keyid, key("signer3").keyid}


# Any single byte, anywhere -----------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_single_byte_change_in_any_file_is_refused(tmp_path: Path, data: st.DataObject) -> None:
    from pactwright.runtime.activation import Refusal

    files = signed()
    path = data.draw(st.sampled_from(sorted(files)), label="file")
    position = data.draw(st.integers(0, len(files[path]) - 1), label="position")
    delta = data.draw(st.integers(1, 255), label="xor")
    changed = bytearray(files[path])
    changed[position] ^= delta
    url = str(tmp_path / "property.db")
    with open_store(url) as store:
        before = store.dump()
        with pytest.raises(Refusal):
            activate_files(
                store,
                {**files, path: bytes(changed)},
                default_trust(),
                clock=FixedClock(datetime.fromisoformat(NOW)),
            )
        assert store.dump() == before


def test_the_threat_model_lists_the_refusal_codes_in_verification_order() -> None:
    from pactwright.runtime.activation import VERIFICATION_ORDER

    text = (Path(__file__).resolve().parents[1] / "docs" / "threat-model.md").read_text("utf-8")
    table = text.split("## Refusal codes in verification order", 1)[1].split("\n\n")[2]
    rows = [re.findall(r"PW\d{3}", line) for line in table.splitlines() if re.match(r"\| \d+ \|", line)]
    assert rows == [list(codes) for _, codes in VERIFICATION_ORDER]


def test_a_bundle_from_the_real_keygen_trust_approve_and_sign_commands_activates(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixtures above write the documented formats directly; this guards the real commands against drift."""
    from tests.signed_bundles import POLICY

    bundle, trust = tmp_path / "bundle", tmp_path / "trust.json"
    steps = [
        ["keygen", "--out", str(tmp_path / "alice")],
        ["keygen", "--out", str(tmp_path / "ci")],
        ["trust", "add", str(tmp_path / "alice.pub"), "--role", "approver", "--file", str(trust)],
        ["trust", "add", str(tmp_path / "ci.pub"), "--role", "signer", "--file", str(trust)],
        ["build", str(POLICY), "-o", str(bundle), "--no-mutants", "--no-proofs"],
        ["approve", str(bundle), "--key", str(tmp_path / "alice.key"), "--approver", "alice"],
        ["sign", str(bundle), "--key", str(tmp_path / "ci.key"), "--trust", str(trust), "--expires", "2030-01-01"],
    ]
    for step in steps:
        assert main(step) == 0, (step, capsys.readouterr())
    assert _activate(bundle, trust, store_url) == 0
    assert "activated marketplace.milestone 1.0.0" in capsys.readouterr().out
    (bundle / "ledger" / "fund.num").write_bytes(b"tampered\n")
    assert _activate(bundle, trust, store_url) == 1
    assert capsys.readouterr().err.startswith("error[PW434]")
