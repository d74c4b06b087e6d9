"""`approve`, `build` carrying an approval, and `sign`: real keys, real bundles, real tampering on disk.

The bundles are built once by the real `pactwright build` (without z3 proofs
and mutants, which do not change what is bound) and copied per test; every
tampered bundle is a real directory a signer could be handed. Each refusal
asserts its code and exit code and that nothing was written. Signatures and
approvals are checked with `cryptography` directly over RFC 8785 bytes, not
only through pactwright's own verifier.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pactwright.approval import parse_approval, verify_approval
from pactwright.bundle_signing import format_time, parse_signatures, parse_time
from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.errors import PactwrightError
from pactwright.keys import generate_key_files, load_public_key
from pactwright.trust import Trust, add_key, set_threshold, write_trust
from tests.test_keys_trust import code_of, raw_key_id, run

REPO = Path(__file__).resolve().parents[1]
FAST = ("--no-proofs", "--no-mutants")
NOW = "2026-11-30T12:00:00Z"
MILESTONE = "marketplace_milestone.pact"
UNSAFE = "unsafe_chargeback.pact"
OTHER = "support_refund.pact"
CONTROL = {"manifest.json", "approval.json", "signatures.json"}


@dataclass(frozen=True)
class World:
    """Keys, a trust file, the policies, and pristine bundles built once."""

    root: Path
    good: Path
    unsafe: Path

    def key(self, name: str) -> Path:
        return self.root / f"{name}.key"

    def pub(self, name: str) -> Path:
        return self.root / f"{name}.pub"

    @property
    def trust(self) -> Path:
        return self.root / "trust.json"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("world")
    for name in ("alice", "ci1", "ci2", "mallory"):
        generate_key_files(root / name)
    trust = add_key(Trust(), load_public_key(root / "alice.pub"), ["approver"])
    for name in ("ci1", "ci2"):
        trust = add_key(trust, load_public_key(root / f"{name}.pub"), ["signer"])
    write_trust(root / "trust.json", set_threshold(trust, 2))
    for name in (MILESTONE, UNSAFE, OTHER):
        shutil.copy(REPO / "policies" / name, root / name)
    good = run("build", MILESTONE, "-o", "good", *FAST, cwd=root)
    assert good.returncode == 0, good.stderr
    unsafe = run("build", UNSAFE, "-o", "unsafe", *FAST, cwd=root)
    assert unsafe.returncode == 1, unsafe.stderr
    return World(root, root / "good", root / "unsafe")


@pytest.fixture
def bundle(world: World, tmp_path: Path) -> Path:
    """A fresh copy of the passing bundle, no approval yet."""
    return Path(shutil.copytree(world.good, tmp_path / "bundle"))


@pytest.fixture
def approved(world: World, bundle: Path) -> Path:
    """The passing bundle, approved by alice."""
    result = approve(world, bundle)
    assert result.returncode == 0, result.stderr
    return bundle


def approve(world: World, target: Path, *extra: str, key: str = "alice") -> subprocess.CompletedProcess[str]:
    return run("approve", target, "--key", world.key(key), "--approver", key, *extra, cwd=world.root)


def sign(world: World, target: Path, key: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run("sign", target, "--key", world.key(key), "--now", NOW, "--trust", world.trust, *extra, cwd=world.root)


def manifest_of(bundle: Path) -> dict[str, Any]:
    doc: dict[str, Any] = load_json((bundle / "manifest.json").read_bytes())
    return doc


def write_listed(bundle: Path, path: str, data: bytes) -> None:
    """Replace a listed file and update its manifest entry (and the report hash): a consistent rebuild by hand."""
    (bundle / path).write_bytes(data)
    manifest = manifest_of(bundle)
    for entry in manifest["artifacts"]:
        if entry["path"] == path:
            entry["sha256"], entry["size"] = hash_bytes(data), len(data)
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))


def candidate_hash_of(policy: Path) -> str:
    from pactwright.compiler.pipeline import check_bytes

    result = check_bytes(policy.read_bytes())
    assert result.candidate is not None
    return result.candidate.hash()


def verify_independently(pub: Path, statement: dict[str, Any], signature: str) -> None:
    """Verify with `cryptography` over rfc8785 bytes, not through pactwright.signing."""
    key = load_public_key(pub)
    assert isinstance(key, Ed25519PublicKey)
    key.verify(base64.b64decode(signature, validate=True), rfc8785.dumps(statement))


def files_of(bundle: Path) -> set[str]:
    return {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}


# approve ----------------------------------------------------------------------------


def test_approve_a_policy_writes_a_signed_canonical_approval_beside_it(world: World, tmp_path: Path) -> None:
    policy = Path(shutil.copy(world.root / MILESTONE, tmp_path / MILESTONE))
    result = approve(world, policy)
    assert result.returncode == 0, result.stderr
    expected = candidate_hash_of(policy)
    # The human sees what they approve: pact id, version, candidate hash.
    assert "marketplace.milestone" in result.stdout
    assert "1.0.0" in result.stdout
    assert expected in result.stdout
    path = tmp_path / "marketplace_milestone.approval.json"
    data = path.read_bytes()
    assert canonical_bytes(load_json(data)) == data
    approval = parse_approval(data)
    assert approval.statement == {
        "type": "approval",
        "pact": {"id": "marketplace.milestone", "version": "1.0.0"},
        "candidate_hash": expected,
        "approver": "alice",
        "role": "approver",
        "keyid": raw_key_id(world.pub("alice")),
    }
    verify_independently(world.pub("alice"), approval.statement, approval.signature)
    verify_approval(approval, load_public_key(world.pub("alice")))


def test_approve_out_writes_where_asked(world: World, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere.json"
    result = approve(world, world.root / MILESTONE, "--out", str(out), "--format", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["candidate_hash"] == candidate_hash_of(world.root / MILESTONE)
    assert doc["approval_hash"] == hash_bytes(out.read_bytes())
    assert not (world.root / "marketplace_milestone.approval.json").exists()


def test_approve_refuses_a_policy_with_blockers(world: World, tmp_path: Path) -> None:
    policy = tmp_path / "blocked.pact"
    policy.write_text((world.root / MILESTONE).read_text().replace("state ", "stat ", 1))
    result = approve(world, policy)
    assert (result.returncode, code_of(result)) == (1, "PW199")
    assert not (tmp_path / "blocked.approval.json").exists()


def test_approve_a_bundle_writes_approval_json_and_leaves_the_manifest(world: World, bundle: Path) -> None:
    manifest_before = (bundle / "manifest.json").read_bytes()
    result = approve(world, bundle)
    assert result.returncode == 0, result.stderr
    assert (bundle / "manifest.json").read_bytes() == manifest_before
    approval = parse_approval((bundle / "approval.json").read_bytes())
    assert approval.candidate_hash == manifest_of(bundle)["candidate_hash"]
    assert approval.candidate_hash == hash_bytes((bundle / "candidate.json").read_bytes())
    assert approval.candidate_hash in result.stdout
    assert "approval.json" not in {a["path"] for a in manifest_of(bundle)["artifacts"]}


def test_approve_refuses_a_bundle_whose_candidate_is_not_the_manifests(world: World, bundle: Path) -> None:
    candidate = load_json((bundle / "candidate.json").read_bytes())
    candidate["pact"]["version"] = "9.9.9"
    (bundle / "candidate.json").write_bytes(canonical_bytes(candidate))
    result = approve(world, bundle)
    assert (result.returncode, code_of(result)) == (1, "PW413")
    assert not (bundle / "approval.json").exists()


def test_approve_refuses_a_manifest_whose_candidate_hash_is_not_candidate_json(world: World, bundle: Path) -> None:
    manifest = manifest_of(bundle)
    manifest["candidate_hash"] = "sha256:" + "0" * 64
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))
    result = approve(world, bundle)
    assert (result.returncode, code_of(result)) == (1, "PW412")
    assert not (bundle / "approval.json").exists()


def test_approve_refuses_a_bad_key_and_a_bad_approver_name(world: World, bundle: Path) -> None:
    public = run("approve", bundle, "--key", world.pub("alice"), "--approver", "alice", cwd=world.root)
    assert (public.returncode, code_of(public)) == (2, "PW402")
    control = run("approve", bundle, "--key", world.key("alice"), "--approver", "a\nb", cwd=world.root)
    assert (control.returncode, code_of(control)) == (1, "PW408")
    assert not (bundle / "approval.json").exists()


# build carries the approval ---------------------------------------------------------------


def test_build_carries_a_matching_approval_into_the_bundle(world: World, tmp_path: Path) -> None:
    policy = Path(shutil.copy(world.root / MILESTONE, tmp_path / MILESTONE))
    assert approve(world, policy).returncode == 0
    result = run("build", policy, "-o", tmp_path / "b", *FAST, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    carried = (tmp_path / "b" / "approval.json").read_bytes()
    assert carried == (tmp_path / "marketplace_milestone.approval.json").read_bytes()
    assert "approval.json" not in {a["path"] for a in manifest_of(tmp_path / "b")["artifacts"]}
    # The carried approval is good enough to sign with.
    signed = sign(world, tmp_path / "b", "ci1")
    assert signed.returncode == 0, signed.stderr


def test_build_warns_about_a_stale_approval_and_does_not_carry_it(world: World, tmp_path: Path) -> None:
    policy = Path(shutil.copy(world.root / MILESTONE, tmp_path / MILESTONE))
    assert approve(world, policy).returncode == 0
    policy.write_text(policy.read_text().replace('version "1.0.0"', 'version "1.0.1"', 1))
    result = run("build", policy, "-o", tmp_path / "b", *FAST, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "PW410" in result.stderr
    assert "stale" in result.stderr
    assert not (tmp_path / "b" / "approval.json").exists()
    assert (tmp_path / "b" / "manifest.json").is_file()


def test_build_warns_about_an_invalid_approval_and_does_not_carry_it(world: World, tmp_path: Path) -> None:
    policy = Path(shutil.copy(world.root / MILESTONE, tmp_path / MILESTONE))
    (tmp_path / "marketplace_milestone.approval.json").write_text('{"not": "an approval"}')
    result = run("build", policy, "-o", tmp_path / "b", *FAST, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "PW408" in result.stderr
    assert not (tmp_path / "b" / "approval.json").exists()


# sign: the happy path ---------------------------------------------------------------------


def test_two_signers_sign_one_by_one_and_each_key_counts_once(world: World, approved: Path) -> None:
    first = sign(world, approved, "ci1")
    assert first.returncode == 0, first.stderr
    assert "1 trusted of threshold 2" in first.stdout
    second = sign(world, approved, "ci2", "--format", "json")
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    ids = sorted([raw_key_id(world.pub("ci1")), raw_key_id(world.pub("ci2"))])
    assert report["signatures"] == ids
    assert report["trusted_signatures"] == ids

    data = (approved / "signatures.json").read_bytes()
    entries = parse_signatures(data)
    assert [e.keyid for e in entries] == ids
    manifest_hash = hash_bytes((approved / "manifest.json").read_bytes())
    approval_hash = hash_bytes((approved / "approval.json").read_bytes())
    names = {raw_key_id(world.pub(n)): n for n in ("ci1", "ci2")}
    for entry in entries:
        assert entry.statement == {
            "type": "bundle-signature",
            "manifest_hash": manifest_hash,
            "approval_hash": approval_hash,
            "expires": "2027-02-28T12:00:00Z",  # 90 days after --now
            "keyid": entry.keyid,
        }
        verify_independently(world.pub(names[entry.keyid]), entry.statement, entry.signature)

    # Signing again with the same key replaces its own entry; the other stays byte for byte.
    ci2_entry = next(e for e in entries if names[e.keyid] == "ci2")
    again = sign(world, approved, "ci1", "--expires", "2027-01-31")
    assert again.returncode == 0, again.stderr
    after = parse_signatures((approved / "signatures.json").read_bytes())
    assert [e.keyid for e in after] == ids
    assert next(e for e in after if names[e.keyid] == "ci1").statement["expires"] == "2027-01-31T00:00:00Z"
    assert next(e for e in after if names[e.keyid] == "ci2") == ci2_entry
    # The signed bundle is a closed world: listed files plus the three control files.
    assert files_of(approved) == {a["path"] for a in manifest_of(approved)["artifacts"]} | CONTROL


def test_statement_bytes_are_canonical(world: World, approved: Path) -> None:
    assert sign(world, approved, "ci1").returncode == 0
    for name in ("approval.json", "signatures.json"):
        data = (approved / name).read_bytes()
        assert rfc8785.dumps(json.loads(data)) == data, name
    approval = json.loads((approved / "approval.json").read_bytes())
    statement_bytes = canonical_bytes(approval["statement"])
    assert statement_bytes == rfc8785.dumps(approval["statement"])
    assert b" " not in statement_bytes
    assert statement_bytes.startswith(b'{"approver":"alice","candidate_hash":')


def test_sign_without_trust_verifies_the_approval_with_approver_key(world: World, approved: Path) -> None:
    args = ("sign", approved, "--key", world.key("ci1"), "--now", NOW)
    unknown = run(*args, cwd=world.root)
    assert (unknown.returncode, code_of(unknown)) == (1, "PW409")
    assert not (approved / "signatures.json").exists()
    wrong = run(*args, "--approver-key", world.pub("mallory"), cwd=world.root)
    assert (wrong.returncode, code_of(wrong)) == (1, "PW409")
    ok = run(*args, "--approver-key", world.pub("alice"), cwd=world.root)
    assert ok.returncode == 0, ok.stderr
    assert len(parse_signatures((approved / "signatures.json").read_bytes())) == 1


def test_sign_warns_but_signs_when_the_signer_is_not_trusted(world: World, approved: Path) -> None:
    result = sign(world, approved, "mallory", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert raw_key_id(world.pub("mallory")) in result.stderr
    assert "warning" in result.stderr
    assert json.loads(result.stdout)["trusted_signatures"] == []


def test_sign_drops_signatures_of_a_previous_approval(world: World, approved: Path) -> None:
    assert sign(world, approved, "ci1").returncode == 0
    reapproved = run("approve", approved, "--key", world.key("alice"), "--approver", "alice b", cwd=world.root)
    assert reapproved.returncode == 0
    assert "warning" in reapproved.stderr
    result = sign(world, approved, "ci2")
    assert result.returncode == 0, result.stderr
    assert raw_key_id(world.pub("ci1")) in result.stderr
    assert [e.keyid for e in parse_signatures((approved / "signatures.json").read_bytes())] == [
        raw_key_id(world.pub("ci2"))
    ]


# sign: refusals ---------------------------------------------------------------------------


def _stale(world: World, bundle: Path) -> None:
    """An approval of another candidate (another policy), put where the bundle's should be."""
    assert approve(world, world.root / OTHER, "--out", str(bundle / "approval.json")).returncode == 0


def _forged_approver(world: World, bundle: Path) -> None:
    doc = load_json((bundle / "approval.json").read_bytes())
    doc["statement"]["approver"] = "mallory"
    (bundle / "approval.json").write_bytes(canonical_bytes(doc))


def _flipped_signature(world: World, bundle: Path) -> None:
    doc = load_json((bundle / "approval.json").read_bytes())
    raw = bytearray(base64.b64decode(doc["signature"]))
    raw[0] ^= 1
    doc["signature"] = base64.b64encode(bytes(raw)).decode()
    (bundle / "approval.json").write_bytes(canonical_bytes(doc))


def _approved_by_untrusted_key(world: World, bundle: Path) -> None:
    assert approve(world, bundle, key="mallory").returncode == 0


def _edited_ledger(world: World, bundle: Path) -> None:
    with (bundle / "ledger" / "fund.num").open("a") as handle:
        handle.write("\n")


def _report_bound_to_other_artifacts(world: World, bundle: Path) -> None:
    """A manifest consistent with its files, but a ledger program the report never verified."""
    write_listed(bundle, "ledger/fund.num", (bundle / "ledger" / "fund.num").read_bytes() + b"\n")


def _report_bound_to_other_candidate(world: World, bundle: Path) -> None:
    report = load_json((bundle / "report.json").read_bytes())
    report["candidate_hash"] = "sha256:" + "1" * 64
    data = canonical_bytes(report)
    write_listed(bundle, "report.json", data)
    manifest = manifest_of(bundle)
    manifest["report"]["hash"] = hash_bytes(data)
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))


def _report_not_the_manifests(world: World, bundle: Path) -> None:
    report = load_json((bundle / "report.json").read_bytes())
    report["warnings"] = [*report["warnings"], "edited"]
    write_listed(bundle, "report.json", canonical_bytes(report))


def _manifest_says_fail(world: World, bundle: Path) -> None:
    manifest = manifest_of(bundle)
    manifest["report"]["verdict"] = "fail"
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))


def _rebound_report(bundle: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit report.json and rebind the manifest to it: a report `build` would not write, consistently listed."""
    report = load_json((bundle / "report.json").read_bytes())
    edit(report)
    data = canonical_bytes(report)
    write_listed(bundle, "report.json", data)
    manifest = manifest_of(bundle)
    manifest["report"]["hash"] = hash_bytes(data)
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))


def _incomplete_pass_without_the_flag(world: World, bundle: Path) -> None:
    _rebound_report(bundle, lambda r: r.update(complete=False, allow_incomplete=False))


def _report_without_completeness(world: World, bundle: Path) -> None:
    _rebound_report(bundle, lambda r: [r.pop("complete"), r.pop("allow_incomplete")])


def _unverified_artifact(world: World, bundle: Path) -> None:
    """A listed (and hashed) ledger program the verifier never saw."""
    data = b"send [EUR/2 $price] ( source = @world destination = @mallory )\n"
    (bundle / "ledger" / "extra.num").write_bytes(data)
    manifest = manifest_of(bundle)
    manifest["artifacts"].append({"path": "ledger/extra.num", "sha256": hash_bytes(data), "size": len(data)})
    manifest["artifacts"].sort(key=lambda a: a["path"])
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))


def _pretty_manifest(world: World, bundle: Path) -> None:
    (bundle / "manifest.json").write_text(json.dumps(manifest_of(bundle), indent=2))


def _extra_file(world: World, bundle: Path) -> None:
    (bundle / "notes.txt").write_text("hello")


def _dotfile(world: World, bundle: Path) -> None:
    (bundle / "ledger" / ".fund.num.swp").write_text("")


def _missing_file(world: World, bundle: Path) -> None:
    (bundle / "trace.json").unlink()


def _symlink(world: World, bundle: Path) -> None:
    target = bundle.parent / "trace.json"
    shutil.move(bundle / "trace.json", target)
    (bundle / "trace.json").symlink_to(target)


def _no_approval(world: World, bundle: Path) -> None:
    (bundle / "approval.json").unlink()


def _bad_signatures_file(world: World, bundle: Path) -> None:
    (bundle / "signatures.json").write_text('{"format":"pactwright.signatures/1","signatures":[{}]}')


REFUSALS: list[tuple[str, Callable[[World, Path], None], str]] = [
    ("missing approval", _no_approval, "PW411"),
    ("stale approval", _stale, "PW410"),
    ("forged approver name", _forged_approver, "PW409"),
    ("flipped approval signature", _flipped_signature, "PW409"),
    ("approver key not in trust", _approved_by_untrusted_key, "PW409"),
    ("modified artifact", _edited_ledger, "PW413"),
    ("missing artifact", _missing_file, "PW413"),
    ("unlisted file", _extra_file, "PW413"),
    ("dotfile", _dotfile, "PW413"),
    ("symlink", _symlink, "PW413"),
    ("non-canonical manifest", _pretty_manifest, "PW412"),
    ("report not the manifest's", _report_not_the_manifests, "PW414"),
    ("manifest verdict fail", _manifest_says_fail, "PW415"),
    ("report bound to other artifact hashes", _report_bound_to_other_artifacts, "PW416"),
    ("report bound to another candidate", _report_bound_to_other_candidate, "PW416"),
    ("artifact the report did not verify", _unverified_artifact, "PW416"),
    ("incomplete pass without --allow-incomplete", _incomplete_pass_without_the_flag, "PW419"),
    ("report that does not say it is complete", _report_without_completeness, "PW419"),
    ("invalid signatures.json", _bad_signatures_file, "PW417"),
]


@pytest.mark.parametrize(("tamper", "code"), [pytest.param(t, c, id=name) for name, t, c in REFUSALS])
def test_sign_refuses_and_writes_nothing(
    world: World, approved: Path, tamper: Callable[[World, Path], None], code: str
) -> None:
    tamper(world, approved)
    signatures = approved / "signatures.json"
    before = signatures.read_bytes() if signatures.exists() else None
    result = sign(world, approved, "ci1")
    assert (result.returncode, code_of(result)) == (1, code), result.stderr
    assert (signatures.read_bytes() if signatures.exists() else None) == before
    assert sorted(p.name for p in approved.iterdir() if p.name.endswith(".tmp")) == []


def test_a_stale_approval_refusal_names_both_hashes(world: World, approved: Path) -> None:
    _stale(world, approved)
    result = sign(world, approved, "ci1")
    assert code_of(result) == "PW410"
    assert manifest_of(approved)["candidate_hash"] in result.stderr
    assert candidate_hash_of(world.root / OTHER) in result.stderr


def test_sign_refuses_a_bundle_whose_report_fails(world: World, tmp_path: Path) -> None:
    unsafe = Path(shutil.copytree(world.unsafe, tmp_path / "unsafe"))
    approved = approve(world, unsafe)
    assert approved.returncode == 0, approved.stderr
    assert "warning" in approved.stderr
    result = sign(world, unsafe, "ci1")
    assert (result.returncode, code_of(result)) == (1, "PW415")
    assert not (unsafe / "signatures.json").exists()


@pytest.mark.parametrize(
    "args",
    [("--expires", "2026-11-01"), ("--expires", NOW), ("--expires", "next week"), ("--expires", "2027-01-31T00:00:00")],
)
def test_sign_refuses_a_bad_or_past_expiry(world: World, approved: Path, args: tuple[str, str]) -> None:
    result = sign(world, approved, "ci1", *args)
    assert (result.returncode, code_of(result)) == (2, "PW418")
    assert not (approved / "signatures.json").exists()


def test_sign_refuses_a_directory_that_is_not_a_bundle(world: World, tmp_path: Path) -> None:
    missing = sign(world, tmp_path / "nope", "ci1")
    assert missing.returncode == 2
    (tmp_path / "empty").mkdir()
    empty = sign(world, tmp_path / "empty", "ci1")
    assert (empty.returncode, code_of(empty)) == (1, "PW412")


# times --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2027-01-31", "2027-01-31T00:00:00Z"),
        ("2027-01-31T10:20:30Z", "2027-01-31T10:20:30Z"),
        ("2027-01-31t10:20:30z", "2027-01-31T10:20:30Z"),
        ("2027-01-31T10:20:30.999Z", "2027-01-31T10:20:30Z"),
        ("2027-01-31T01:00:00+02:00", "2027-01-30T23:00:00Z"),
        ("2027-01-31T22:00:00-05:00", "2027-02-01T03:00:00Z"),
    ],
)
def test_times_are_parsed_to_utc_seconds(text: str, expected: str) -> None:
    assert format_time(parse_time(text)) == expected


@pytest.mark.parametrize(
    "text", ["2027-01-31T10:20:30", "2027-02-30", "31/01/2027", "2027-01-31T25:00:00Z", "", "2027-1-3"]
)
def test_times_without_a_zone_or_malformed_are_refused(text: str) -> None:
    with pytest.raises(PactwrightError) as caught:
        parse_time(text)
    assert caught.value.code == "PW418"


def test_format_time_is_rfc3339_utc_with_z() -> None:
    assert format_time(datetime(2027, 1, 31, tzinfo=UTC)) == "2027-01-31T00:00:00Z"


# the kernel stays light -------------------------------------------------------------------


def test_signing_modules_import_only_the_kernel() -> None:
    """The runtime imports these on a deploy host without lark, jinja2, networkx or z3."""
    code = (
        "import sys\n"
        "import pactwright.keys, pactwright.trust, pactwright.approval\n"
        "import pactwright.bundle_check, pactwright.bundle_signing\n"
        "heavy = {'lark', 'jinja2', 'networkx', 'z3', 'pydantic'}\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & heavy)\n"
        "inner = sorted(m for m in sys.modules if m.startswith(('pactwright.compiler', 'pactwright.verifier')))\n"
        "assert not loaded and not inner, (loaded, inner)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
