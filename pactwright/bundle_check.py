"""What must hold of a bundle on disk before anyone vouches for it.

`sign` refuses a bundle unless every byte is the one the manifest names and
the report that passed is bound to exactly these bytes; these checks live in
the kernel, so activation can run the very same ones. The bundle is a closed
world (docs/signing.md): the files the manifest lists, plus `manifest.json`,
`approval.json` and `signatures.json`, and nothing else. A stray file is
refused rather than ignored, because whatever reads the bundle next may not
ignore it.

The report (`report.json`) binds the candidate hash and the hash of every
compiled artifact the verifier read. A listed file the report does not bind
would be signed unverified, so the only such files allowed are the report
and its renderings (which cannot hash themselves).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pactwright.canonical import hash_bytes, is_hash, load_json
from pactwright.errors import ActivationError, PactwrightError, UsageError
from pactwright.manifest import MANIFEST_FORMAT, MANIFEST_PATH
from pactwright.report_rules import report_is_complete
from pactwright.signing import APPROVAL_PATH, SIGNATURES_PATH

CANDIDATE_PATH = "candidate.json"
CONTROL_FILES = frozenset({MANIFEST_PATH, APPROVAL_PATH, SIGNATURES_PATH})
# The report and its Markdown and HTML renderings: listed, but bound by the manifest alone.
REPORT_RENDERINGS = frozenset({"report.json", "report.md", "report.html"})
PASSING_VERDICT = "pass"
_MANIFEST_FIELDS = {"format", "pact", "compiler", "candidate_hash", "artifacts", "report"}


@dataclass(frozen=True)
class Artifact:
    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class ReportRef:
    path: str
    hash: str
    verdict: str


@dataclass(frozen=True)
class Manifest:
    """A parsed `manifest.json` and its exact bytes (what signatures bind)."""

    data: bytes
    pact_id: str
    pact_version: str
    candidate_hash: str
    artifacts: tuple[Artifact, ...]
    report: ReportRef | None

    @property
    def hash(self) -> str:
        return hash_bytes(self.data)

    def hashes(self) -> dict[str, str]:
        return {a.path: a.sha256 for a in self.artifacts}


@dataclass(frozen=True)
class Bundle:
    """A bundle read from disk whose listed files all match the manifest."""

    root: Path
    manifest: Manifest
    files: dict[str, bytes]
    approval: bytes | None
    signatures: bytes | None


def _bad_manifest(message: str, field_name: str | None = None) -> ActivationError:
    return ActivationError(
        f"`{MANIFEST_PATH}` is not valid: {message}",
        code="PW412",
        file=MANIFEST_PATH,
        field=field_name,
        hint="rebuild the bundle with `pactwright build`",
    )


def safe_relative_path(path: str) -> bool:
    """A plain relative POSIX path with no `..`, no dot-file segment and no control characters."""
    if not path or path.startswith("/") or "\\" in path or not path.isprintable():
        return False
    return all(part and not part.startswith(".") for part in path.split("/"))


def _strings(value: Any, names: set[str]) -> bool:
    return isinstance(value, dict) and set(value) == names and all(isinstance(v, str) and v for v in value.values())


def _artifact(entry: Any, index: int) -> Artifact:
    where = f"artifacts/{index}"
    if not isinstance(entry, dict) or set(entry) != {"path", "sha256", "size"}:
        raise _bad_manifest(f"`{where}` must have exactly `path`, `sha256` and `size`", where)
    path, digest, size = entry["path"], entry["sha256"], entry["size"]
    if not isinstance(path, str) or not safe_relative_path(path) or path in CONTROL_FILES:
        raise _bad_manifest(f"`{where}/path` `{path}` is not a plain relative path", f"{where}/path")
    if not isinstance(digest, str) or not is_hash(digest):
        raise _bad_manifest(f"`{where}/sha256` is not a `sha256:` hash", f"{where}/sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _bad_manifest(f"`{where}/size` is not a size in bytes", f"{where}/size")
    return Artifact(path, digest, size)


def parse_manifest(data: bytes) -> Manifest:
    """Validate manifest bytes (PW412): canonical, known format, sorted safe paths, consistent candidate."""
    try:
        doc = load_json(data, require_canonical=True)
    except PactwrightError as exc:
        raise _bad_manifest(exc.message) from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise _bad_manifest(f"unknown format `{found}`; expected `{MANIFEST_FORMAT}`", "format")
    if set(doc) != _MANIFEST_FIELDS:
        raise _bad_manifest(f"the document must have exactly the fields {sorted(_MANIFEST_FIELDS)}")
    if not _strings(doc["pact"], {"id", "version"}):
        raise _bad_manifest("`pact` must be `{id, version}` strings", "pact")
    if not _strings(doc["compiler"], {"name", "version"}):
        raise _bad_manifest("`compiler` must be `{name, version}` strings", "compiler")
    candidate_hash = doc["candidate_hash"]
    if not isinstance(candidate_hash, str) or not is_hash(candidate_hash):
        raise _bad_manifest("`candidate_hash` is not a `sha256:` hash", "candidate_hash")
    if not isinstance(doc["artifacts"], list):
        raise _bad_manifest("`artifacts` must be a list", "artifacts")
    artifacts = tuple(_artifact(entry, i) for i, entry in enumerate(doc["artifacts"]))
    paths = [a.path for a in artifacts]
    if paths != sorted(set(paths)):
        raise _bad_manifest("`artifacts` must be sorted by path, each path once", "artifacts")
    report = doc["report"]
    ref = None
    if report is not None:
        if not _strings(report, {"path", "hash", "verdict"}) or not is_hash(report["hash"]):
            raise _bad_manifest("`report` must be null or `{path, hash, verdict}`", "report")
        ref = ReportRef(report["path"], report["hash"], report["verdict"])
    manifest = Manifest(data, doc["pact"]["id"], doc["pact"]["version"], candidate_hash, artifacts, ref)
    candidate = manifest.hashes().get(CANDIDATE_PATH)
    if candidate is None:
        raise _bad_manifest(f"`{CANDIDATE_PATH}` is not listed", "artifacts")
    if candidate != candidate_hash:
        error = _bad_manifest(f"`candidate_hash` is not the hash listed for `{CANDIDATE_PATH}`", "candidate_hash")
        error.expected, error.found = candidate_hash, candidate
        raise error
    return manifest


def _mismatch(path: str, message: str, expected: str | None = None, found: str | None = None) -> ActivationError:
    return ActivationError(
        message,
        code="PW413",
        file=path,
        expected=expected,
        found=found,
        hint="rebuild the bundle with `pactwright build`; never edit a bundle by hand",
    )


def _raise(error: OSError) -> None:
    # os.walk skips an unreadable directory by default; an unseen file is not a checked one.
    raise error


def _closed_world(root: Path, listed: set[str]) -> None:
    """Refuse any entry that is not a listed file, a control file, or a directory holding listed files."""
    allowed = listed | CONTROL_FILES
    directories = {"/".join(p.split("/")[:i]) for p in listed for i in range(1, p.count("/") + 1)}
    for current, dirnames, filenames in os.walk(root, onerror=_raise):
        for name in sorted(dirnames + filenames):
            full = Path(current) / name
            rel = full.relative_to(root).as_posix()
            mode = full.lstat().st_mode
            if stat.S_ISLNK(mode):
                raise _mismatch(rel, f"`{rel}` is a symlink; a bundle holds only regular files")
            if stat.S_ISDIR(mode) and rel not in directories:
                raise _mismatch(rel, f"directory `{rel}` is not part of the bundle")
            if stat.S_ISREG(mode) and rel not in allowed:
                raise _mismatch(rel, f"`{rel}` is in the bundle but not listed in the manifest")
            if not stat.S_ISDIR(mode) and not stat.S_ISREG(mode):
                raise _mismatch(rel, f"`{rel}` is not a regular file")


def read_artifact(root: Path, artifact: Artifact) -> bytes:
    """One listed file's bytes, refused (PW413) if missing, a symlink, or not the bytes the manifest names."""
    path = root / artifact.path
    if path.is_symlink() or not path.is_file():
        raise _mismatch(artifact.path, f"`{artifact.path}` is listed in the manifest but missing from the bundle")
    data = path.read_bytes()
    found = hash_bytes(data)
    if found != artifact.sha256 or len(data) != artifact.size:
        raise _mismatch(
            artifact.path,
            f"`{artifact.path}` does not match the manifest (size {artifact.size} listed, {len(data)} on disk)",
            expected=artifact.sha256,
            found=found,
        )
    return data


def read_manifest(directory: str | os.PathLike[str]) -> Manifest:
    """The manifest of a bundle directory (PW412 if absent or invalid; exit 2 if no directory)."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"`{root}` is not a bundle directory")
    path = root / MANIFEST_PATH
    if path.is_symlink() or not path.is_file():
        raise _bad_manifest(f"`{root}` has no `{MANIFEST_PATH}`")
    return parse_manifest(path.read_bytes())


def read_bundle(directory: str | os.PathLike[str]) -> Bundle:
    """Read a bundle, refusing (PW412, PW413) unless it is exactly what its manifest lists."""
    root = Path(directory)
    manifest = read_manifest(root)
    try:
        _closed_world(root, {a.path for a in manifest.artifacts})
        files = {a.path: read_artifact(root, a) for a in manifest.artifacts}
        extras = {name: _optional(root / name) for name in (APPROVAL_PATH, SIGNATURES_PATH)}
    except OSError as exc:
        raise UsageError(f"cannot read the bundle `{root}`: {exc.strerror or exc}") from None
    return Bundle(root, manifest, files, extras.get(APPROVAL_PATH), extras.get(SIGNATURES_PATH))


def _optional(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _report_error(code: str, message: str, **details: str | None) -> ActivationError:
    return ActivationError(message, code=code, file="report.json", **details)


def check_report(bundle: Bundle) -> dict[str, Any]:
    """Refuse unless the report passed, is complete or accepted so, and binds this candidate and these artifacts.

    PW414 to PW416, and PW419 for an incomplete run not built with `--allow-incomplete`.
    """
    manifest = bundle.manifest
    ref = manifest.report
    if ref is None or ref.path not in bundle.files:
        raise _report_error("PW414", "the bundle has no verifier report; build it with `pactwright build`")
    data = bundle.files[ref.path]
    if hash_bytes(data) != ref.hash:
        raise _report_error(
            "PW414",
            f"`{ref.path}` is not the report the manifest names",
            field="report/hash",
            expected=ref.hash,
            found=hash_bytes(data),
        )
    try:
        report = load_json(data, require_canonical=True)
    except PactwrightError as exc:
        raise _report_error("PW414", f"`{ref.path}` is not valid: {exc.message}") from None
    if not isinstance(report, dict) or not isinstance(report.get("artifacts"), dict):
        raise _report_error("PW414", f"`{ref.path}` has no `artifacts` map")
    for verdict, where in ((report.get("verdict"), ref.path), (ref.verdict, f"{MANIFEST_PATH} report")):
        if verdict != PASSING_VERDICT:
            raise _report_error(
                "PW415",
                f"the verifier's verdict in {where} is `{verdict}`; only a passing bundle is signed",
                field="verdict",
                expected=PASSING_VERDICT,
                found=str(verdict),
            )
    _check_complete(report, ref.path)
    if report.get("candidate_hash") != manifest.candidate_hash:
        raise _report_error(
            "PW416",
            "the report verified another candidate than the manifest's",
            field="candidate_hash",
            expected=manifest.candidate_hash,
            found=str(report.get("candidate_hash")),
        )
    _check_bound_artifacts(report["artifacts"], manifest)
    return report


def _check_complete(report: dict[str, Any], path: str) -> None:
    """Refuse a pass over an incomplete run unless the report records `--allow-incomplete` (PW419).

    The verifier never writes such a report without the flag, so one that
    says `pass` while `complete` is false (or missing) was not produced as
    it stands, and a signer must not vouch for a bounded result by accident.
    """
    complete, allowed = report.get("complete"), report.get("allow_incomplete")
    computed = report_is_complete(report)
    if complete is not computed:
        raise _report_error(
            "PW419",
            f"`{path}` says `complete: {_flag(complete)}`, but its own exploration and verdicts make it "
            f"{'complete' if computed else 'incomplete'}; a report's completeness is recomputed, not trusted",
            field="complete",
            expected=str(computed).lower(),
            found=_flag(complete),
            hint="rebuild the bundle; an edited report is not signed",
        )
    if computed or allowed is True:
        return
    raise _report_error(
        "PW419",
        f"`{path}` is incomplete (a bound stopped the search) and was not built with `--allow-incomplete`; "
        "only a complete or explicitly accepted report is signed",
        field="complete",
        expected="complete true, or allow_incomplete true",
        found=f"complete {_flag(complete)}, allow_incomplete {_flag(allowed)}",
        hint="rebuild with a larger `--max-depth` or `--max-states`, or with `--allow-incomplete` to accept it",
    )


def _flag(value: Any) -> str:
    return "missing" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)


def _check_bound_artifacts(bound: dict[str, Any], manifest: Manifest) -> None:
    listed = manifest.hashes()
    for path, digest in sorted(bound.items()):
        if listed.get(path) != digest:
            raise _report_error(
                "PW416",
                f"the report verified other bytes of `{path}` than the manifest lists",
                field=f"artifacts/{path}",
                expected=str(digest),
                found=listed.get(path, "not listed"),
            )
    unverified = sorted(set(listed) - set(bound) - REPORT_RENDERINGS)
    if unverified:
        raise _report_error(
            "PW416",
            f"`{unverified[0]}` is listed in the manifest but the report did not verify it",
            field="artifacts",
        )
