"""`sign` and `activate` share one bundle reader and one closed-world check.

Each row tampers with a real signed bundle on disk one way, then runs it
through `sign`'s gate (`bundle_check.read_bundle` + `check_signable`, what
`pactwright sign` runs before it touches a key) and through activation's
(`activation.read_bundle` + `verify_bundle`, what `pactwright activate` runs
before it opens the store). Both must refuse, each with its own documented
code for the same rule: a bundle one of them refuses and the other accepts
is exactly the disagreement a single checker exists to prevent. Cases that
tamper with the manifest or the report re-sign the bundle, so activation
reaches the rule under test and does not stop at a signature.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.bundle_check import SIGN_CODES, read_bundle
from pactwright.bundle_reader import Limits, Rule
from pactwright.bundle_signing import check_signable
from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.errors import PactwrightError
from pactwright.manifest import MANIFEST_PATH
from pactwright.runtime import activation
from pactwright.runtime._checks_files import ACTIVATION_CODES
from tests.signed_bundles import NOW, built, default_trust, manifest_of, remanifest, sign, signed, write

Files = dict[str, bytes]
TRUSTED_NOW = datetime.fromisoformat(NOW.replace("Z", "+00:00"))


def _resigned(edit: Callable[[Files], Files]) -> Callable[[Path], None]:
    """Tamper with the bundle's bytes, give it a manifest over them (candidate hash too), and sign it again."""

    def tamper(bundle: Path) -> None:
        files = edit(built())
        candidate_hash = hash_bytes(files["candidate.json"])
        shutil.rmtree(bundle)
        write(sign(remanifest(files, lambda m: m.update(candidate_hash=candidate_hash))), bundle)

    return tamper


def _edited_manifest(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    def tamper(bundle: Path) -> None:
        shutil.rmtree(bundle)
        write(sign(remanifest(built(), edit)), bundle)

    return tamper


def _edited_report(edit: Callable[[dict[str, Any]], None], rebind: bool = True) -> Callable[[Path], None]:
    """Edit report.json; with `rebind`, the manifest names the edited report (a report build never wrote)."""

    def tamper(bundle: Path) -> None:
        files = built()
        report = load_json(files["report.json"])
        edit(report)
        files["report.json"] = canonical_bytes(report)
        ref = dict(manifest_of(files)["report"])
        if rebind:
            ref["hash"] = hash_bytes(files["report.json"])
        shutil.rmtree(bundle)
        write(sign(remanifest(files, lambda m: m.update(report=ref))), bundle)

    return tamper


def _symlink(bundle: Path) -> None:
    target = bundle.parent / "trace.json"
    shutil.move(bundle / "trace.json", target)
    (bundle / "trace.json").symlink_to(target)


def _fifo(bundle: Path) -> None:
    os.mkfifo(bundle / "pipe")


def _renamed(bundle: Path) -> None:
    (bundle / "ledger" / "release.num").rename(bundle / "ledger" / "release2.num")


def _edited_artifact(bundle: Path) -> None:
    path = bundle / "ledger" / "release.num"
    path.write_bytes(path.read_bytes() + b"\n")


def _pretty_manifest(bundle: Path) -> None:
    path = bundle / MANIFEST_PATH
    path.write_text(json.dumps(load_json(path.read_bytes()), indent=2))


def _pretty(path: str) -> Callable[[Files], Files]:
    def edit(files: Files) -> Files:
        return {**files, path: json.dumps(load_json(files[path]), indent=2).encode()}

    return edit


def _candidate_for_another_version(files: Files) -> Files:
    candidate = load_json(files["candidate.json"])
    candidate["pact"]["version"] = "9.9.9"
    return {**files, "candidate.json": canonical_bytes(candidate)}


def _bounded(report: dict[str, Any]) -> None:
    """A run a bound stopped, nothing proved, honestly flagged incomplete and not accepted."""
    report["exploration"].update(exhausted=False)
    for invariant in report["invariants"]:
        if invariant["verdict"] == "proved":
            invariant["verdict"] = "holds-to-bound"
    report.update(complete=False, allow_incomplete=False)


# (name, tamper, limits, rule): the rule both must refuse the bundle under.
CASES: list[tuple[str, Callable[[Path], None], Limits | None, Rule]] = [
    ("symlink", _symlink, None, Rule.SYMLINK),
    ("named pipe", _fifo, None, Rule.NOT_REGULAR),
    ("file over the size limit", lambda b: None, Limits(max_file_bytes=4096), Rule.FILE_TOO_LARGE),
    ("bundle over the total limit", lambda b: None, Limits(max_total_bytes=20_000), Rule.TREE_LIMIT),
    ("too many files", lambda b: None, Limits(max_files=3), Rule.TREE_LIMIT),
    ("empty directory", lambda b: (b / "empty").mkdir(), None, Rule.UNLISTED),
    ("no manifest", lambda b: (b / MANIFEST_PATH).unlink(), None, Rule.MANIFEST_MISSING),
    ("manifest not canonical", _pretty_manifest, None, Rule.MANIFEST_NOT_CANONICAL),
    ("unknown manifest format", _edited_manifest(lambda m: m.update(format="other/9")), None, Rule.MANIFEST_FORMAT),
    (
        "listed path starting with a dash",
        _resigned(lambda f: {**f, "ledger/-evil.num": b"x"}),
        None,
        Rule.MANIFEST_PATH,
    ),
    (
        "listed paths one on a case-insensitive disk",
        _resigned(lambda f: {**f, "Trace.json": f["trace.json"]}),
        None,
        Rule.MANIFEST_PATH,
    ),
    (
        "candidate hash not candidate.json's",
        _edited_manifest(lambda m: m.update(candidate_hash="sha256:" + "0" * 64)),
        None,
        Rule.MANIFEST_MALFORMED,
    ),
    ("look-alike of a listed file", lambda b: (b / "Model.json").write_bytes(b"{}"), None, Rule.LOOK_ALIKE),
    ("renamed file", _renamed, None, Rule.RENAMED),
    ("missing file", lambda b: (b / "trace.json").unlink(), None, Rule.MISSING),
    ("unlisted file", lambda b: (b / "notes.txt").write_text("hello"), None, Rule.UNLISTED),
    ("unlisted dot-file", lambda b: (b / "ledger" / ".fund.num.swp").write_text(""), None, Rule.UNLISTED),
    ("edited artifact", _edited_artifact, None, Rule.ARTIFACT_MISMATCH),
    ("listed JSON not canonical", _resigned(_pretty("trace.json")), None, Rule.DOCUMENT_NOT_CANONICAL),
    ("candidate for another version", _resigned(_candidate_for_another_version), None, Rule.CANDIDATE_PACT),
    ("no report", _edited_manifest(lambda m: m.update(report=None)), None, Rule.REPORT_MISSING),
    ("malformed report", _edited_report(lambda r: r.update(format="other/1")), None, Rule.REPORT_MALFORMED),
    ("report not the manifest's", _edited_report(lambda r: r.update(warnings=["x"]), False), None, Rule.REPORT_HASH),
    (
        "report for another pact version",
        _edited_report(lambda r: r["pact"].update(version="9.9.9")),
        None,
        Rule.REPORT_CANDIDATE,
    ),
    (
        "report bound to other bytes",
        _edited_report(lambda r: r["artifacts"].update({"trace.json": "sha256:" + "1" * 64})),
        None,
        Rule.REPORT_ARTIFACTS,
    ),
    (
        "listed file the report did not check",
        _edited_report(lambda r: r["artifacts"].pop("trace.json")),
        None,
        Rule.REPORT_ARTIFACTS,
    ),
    ("report verdict fail", _edited_report(lambda r: r.update(verdict="fail")), None, Rule.REPORT_VERDICT),
    (
        "report that says incomplete of a complete run",
        _edited_report(lambda r: r.update(complete=False)),
        None,
        Rule.REPORT_INCOMPLETE,
    ),
    ("report without `complete`", _edited_report(lambda r: r.pop("complete")), None, Rule.REPORT_INCOMPLETE),
    ("incomplete run not accepted", _edited_report(_bounded), None, Rule.REPORT_INCOMPLETE),
]


def _sign_code(bundle: Path, limits: Limits | None) -> str | None:
    try:
        check_signable(read_bundle(bundle, limits))
    except PactwrightError as exc:
        return exc.code
    return None


def _activate_code(bundle: Path, limits: Limits | None) -> str | None:
    try:
        activation.verify_bundle(activation.read_bundle(bundle, limits), default_trust(), now=TRUSTED_NOW)
    except PactwrightError as exc:
        return exc.code
    return None


def test_the_good_bundle_is_accepted_by_sign_and_activate(tmp_path: Path) -> None:
    bundle = write(signed(), tmp_path / "b")
    assert (_sign_code(bundle, None), _activate_code(bundle, None)) == (None, None)


@pytest.mark.parametrize(("tamper", "limits", "rule"), [pytest.param(t, lim, r, id=n) for n, t, lim, r in CASES])
def test_a_bundle_refused_by_one_is_refused_by_the_other(
    tmp_path: Path, tamper: Callable[[Path], None], limits: Limits | None, rule: Rule
) -> None:
    bundle = write(signed(), tmp_path / "b")
    tamper(bundle)
    codes = (_sign_code(bundle, limits), _activate_code(bundle, limits))
    assert codes == (SIGN_CODES[rule], ACTIVATION_CODES[rule])


def test_every_shared_rule_has_a_code_on_both_sides_and_a_row_here() -> None:
    assert set(SIGN_CODES) == set(Rule) == set(ACTIVATION_CODES)
    assert {rule for *_, rule in CASES} == set(Rule)
