"""The bundle rules `sign` and `activate` both enforce, checked once, here.

A bundle is a closed world (docs/signing.md): the files the manifest lists,
plus `manifest.json`, `approval.json` and `signatures.json`, and nothing
else. The functions below check that over bytes read by
`pactwright.bundle_reader.read_tree`, in the order activation documents
(docs/threat-model.md "Refusal codes in verification order"), and raise a
`BundleRuleError` naming the rule broken. `sign` and `activate` run the
very same functions at the same strength; each maps the rule to its own
stable code (`SIGN_CODES` below; `runtime/_checks_files.py` for
activation), as python-tuf's `TrustedMetadataSet` is the one place
metadata is verified whoever asks.

The report (`report.json`) binds the candidate hash and the hash of every
compiled artifact the verifier read. A listed file the report does not bind
would be signed unverified, so the only such files allowed are the report
and its renderings (which cannot hash themselves).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pactwright.bundle_reader import BundleRuleError, Limits, Rule, read_tree, show
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
REPORT_FORMAT = "pactwright.report/1"
_MANIFEST_FIELDS = {"format", "pact", "compiler", "candidate_hash", "artifacts", "report"}
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*", re.ASCII)
_MAX_PATH = 255


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
    compiler: tuple[str, str] = ("", "")  # (name, version)

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


# --- the rules ---------------------------------------------------------------------------------


def load_document(files: Mapping[str, bytes], path: str, rule: Rule = Rule.DOCUMENT_NOT_CANONICAL) -> Any:
    """A bundle JSON document, refused (`rule`) unless strict canonical JSON."""
    try:
        return load_json(files[path], require_canonical=True)
    except PactwrightError as exc:
        raise BundleRuleError(
            rule,
            f"`{show(path)}` is not canonical JSON: {exc.message} ({exc.code})",
            file=path,
            hint="bundle documents are written by pactwright in RFC 8785 form; do not re-format or edit them",
        ) from None


def fold(path: str) -> str:
    """The name a case-insensitive, normalizing file system would see (NFKC + casefold)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", path).casefold())


def _path_problem(path: str) -> str | None:
    if path.startswith("/"):
        return "is an absolute path"
    if "\\" in path:
        return "contains a backslash"
    segments = path.split("/")
    if any(s in ("", ".", "..") for s in segments):
        return "has an empty, `.` or `..` segment"
    if len(path) > _MAX_PATH:
        return f"is longer than {_MAX_PATH} characters"
    if not all(_SEGMENT.fullmatch(s) for s in segments):
        return "uses characters outside `A-Z a-z 0-9 . _ -` or starts a name with `.` or `-`"
    return None


def safe_relative_path(path: str) -> bool:
    """A relative POSIX path of portable segments (`A-Z a-z 0-9 . _ -`, none starting with `.` or `-`)."""
    return _path_problem(path) is None


def check_listed_paths(paths: list[Any]) -> None:
    """Every listed path is relative, portable, and unique even on a case-insensitive file system."""
    seen: dict[str, str] = {fold(doc): doc for doc in CONTROL_FILES}
    for index, path in enumerate(paths):
        if not isinstance(path, str):
            continue  # not a path at all: the shape check names it
        field = f"artifacts/{index}/path"
        problem = _path_problem(path)
        if problem is not None:
            raise BundleRuleError(
                Rule.MANIFEST_PATH,
                f"`manifest.json` lists `{show(path)}`, which {problem}",
                file=MANIFEST_PATH,
                field=field,
                hint="artifact paths are relative POSIX paths inside the bundle",
            )
        other = seen.get(fold(path))
        if other is not None:
            what = "twice" if other == path else f"and `{other}`: one file on a case-insensitive disk"
            raise BundleRuleError(
                Rule.MANIFEST_PATH, f"`manifest.json` lists `{path}` {what}", file=MANIFEST_PATH, field=field
            )
        seen[fold(path)] = path


def _bad_manifest(message: str, field_name: str | None = None) -> BundleRuleError:
    return BundleRuleError(
        Rule.MANIFEST_MALFORMED,
        f"`{MANIFEST_PATH}` is not valid: {message}",
        file=MANIFEST_PATH,
        field=field_name,
        hint="rebuild the bundle with `pactwright build`",
    )


def _strings(value: Any, names: set[str]) -> bool:
    return isinstance(value, dict) and set(value) == names and all(isinstance(v, str) and v for v in value.values())


def _artifact(entry: Any, index: int) -> Artifact:
    where = f"artifacts/{index}"
    if not isinstance(entry, dict) or set(entry) != {"path", "sha256", "size"}:
        raise _bad_manifest(f"`{where}` must have exactly `path`, `sha256` and `size`", where)
    path, digest, size = entry["path"], entry["sha256"], entry["size"]
    if not isinstance(path, str):
        raise _bad_manifest(f"`{where}/path` is not a path", f"{where}/path")
    if not isinstance(digest, str) or not is_hash(digest):
        raise _bad_manifest(f"`{where}/sha256` is not a `sha256:` hash", f"{where}/sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _bad_manifest(f"`{where}/size` is not a size in bytes", f"{where}/size")
    return Artifact(path, digest, size)


def check_manifest_bytes(data: bytes) -> Manifest:
    """Canonical, a known format, safe listed paths, then well-formed and consistent, in that order."""
    doc = load_document({MANIFEST_PATH: data}, MANIFEST_PATH, Rule.MANIFEST_NOT_CANONICAL)
    found = doc.get("format") if isinstance(doc, dict) else None
    if found != MANIFEST_FORMAT:
        raise BundleRuleError(
            Rule.MANIFEST_FORMAT,
            "`manifest.json` has a format this pactwright does not support",
            file=MANIFEST_PATH,
            field="format",
            expected=f"`{MANIFEST_FORMAT}`",
            found=f"`{show(str(found))}`",
            labels=("supported", "manifest"),
            hint="use the pactwright release that built it, or rebuild it with this one",
        )
    if isinstance(doc.get("artifacts"), list):
        check_listed_paths([entry.get("path") if isinstance(entry, dict) else None for entry in doc["artifacts"]])
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
    compiler = (doc["compiler"]["name"], doc["compiler"]["version"])
    manifest = Manifest(data, doc["pact"]["id"], doc["pact"]["version"], candidate_hash, artifacts, ref, compiler)
    candidate = manifest.hashes().get(CANDIDATE_PATH)
    if candidate is None:
        raise _bad_manifest(f"`{CANDIDATE_PATH}` is not listed", "artifacts")
    if candidate != candidate_hash:
        error = _bad_manifest(f"`candidate_hash` is not the hash listed for `{CANDIDATE_PATH}`", "candidate_hash")
        error.expected, error.found = candidate_hash, candidate
        raise error
    return manifest


def check_manifest(files: Mapping[str, bytes]) -> Manifest:
    """The bundle's manifest: present, then `check_manifest_bytes`."""
    if MANIFEST_PATH not in files:
        raise BundleRuleError(Rule.MANIFEST_MISSING, "the bundle has no `manifest.json`", file=MANIFEST_PATH)
    return check_manifest_bytes(files[MANIFEST_PATH])


def check_closed_world(files: Mapping[str, bytes], manifest: Manifest) -> None:
    """Exactly the listed files plus the three documents: no look-alike, renamed, missing or extra file."""
    listed = manifest.hashes()
    expected = set(listed) | CONTROL_FILES
    extras = sorted(set(files) - expected)
    missing = sorted(set(listed) - set(files))
    by_fold = {fold(path): path for path in expected}
    for name in extras:
        target = by_fold.get(fold(name))
        if target is not None:
            raise BundleRuleError(
                Rule.LOOK_ALIKE,
                f"`{show(name)}` differs from `{target}` only by case or Unicode normalization",
                file=name,
                expected=f"`{target}`",
                found=f"`{show(name)}`",
                labels=("listed", "on disk"),
                hint="a look-alike name can shadow a listed file on another file system; remove it",
            )
    if missing and extras:
        by_hash = {hash_bytes(files[name]): name for name in extras}
        for path in missing:
            renamed = by_hash.get(listed[path])
            if renamed is not None:
                raise BundleRuleError(
                    Rule.RENAMED,
                    f"`{path}` is missing and `{show(renamed)}` holds its bytes: the file was renamed",
                    file=path,
                    expected=f"`{path}`",
                    found=f"`{show(renamed)}`",
                    labels=("listed", "on disk"),
                )
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise BundleRuleError(
            Rule.MISSING, f"`{missing[0]}` is listed in the manifest but not in the bundle{more}", file=missing[0]
        )
    if extras:
        more = f" (and {len(extras) - 1} more)" if len(extras) > 1 else ""
        raise BundleRuleError(
            Rule.UNLISTED,
            f"`{show(extras[0])}` is in the bundle but not listed in the manifest{more}",
            file=extras[0],
            hint="a signed bundle holds only its listed files, `manifest.json`, `approval.json` and `signatures.json`",
        )


def check_artifact(data: bytes, artifact: Artifact, index: int | None = None) -> None:
    """One listed file has exactly the listed size and sha256."""
    found = hash_bytes(data)
    if found != artifact.sha256 or len(data) != artifact.size:
        raise BundleRuleError(
            Rule.ARTIFACT_MISMATCH,
            f"`{artifact.path}` does not match the manifest",
            file=artifact.path,
            field=None if index is None else f"artifacts/{index}",
            expected=f"{artifact.sha256}  size {artifact.size}",
            found=f"{found}  size {len(data)}",
            labels=("manifest", "on disk"),
        )


def check_artifacts(files: Mapping[str, bytes], manifest: Manifest) -> None:
    """Every listed file has exactly the listed size and sha256."""
    for index, artifact in enumerate(manifest.artifacts):
        check_artifact(files[artifact.path], artifact, index)


def check_documents(files: Mapping[str, bytes], manifest: Manifest) -> dict[str, Any]:
    """Every listed `.json` file is canonical JSON; returns them parsed, by path."""
    return {a.path: load_document(files, a.path) for a in manifest.artifacts if a.path.endswith(".json")}


def check_candidate(manifest: Manifest, documents: Mapping[str, Any]) -> None:
    """`candidate.json` (whose hash the manifest names) is for the manifest's pact and version."""
    candidate = documents.get(CANDIDATE_PATH)
    pact = candidate.get("pact") if isinstance(candidate, dict) else None
    if pact != {"id": manifest.pact_id, "version": manifest.pact_version}:
        raise BundleRuleError(
            Rule.CANDIDATE_PACT,
            "`candidate.json` is for another pact or version than the manifest",
            file=CANDIDATE_PATH,
            field="pact",
            expected=f"{manifest.pact_id} {manifest.pact_version}",
            found=show(str(pact)),
            labels=("manifest", "candidate"),
        )


def check_files(files: Mapping[str, bytes]) -> tuple[Manifest, dict[str, Any]]:
    """Manifest, closed world, listed bytes, canonical documents and candidate: every rule up to the report."""
    manifest = check_manifest(files)
    check_closed_world(files, manifest)
    check_artifacts(files, manifest)
    documents = check_documents(files, manifest)
    check_candidate(manifest, documents)
    return manifest, documents


def _report_document(doc: Any, path: str) -> dict[str, Any]:
    def bad(field: str, what: str) -> BundleRuleError:
        return BundleRuleError(Rule.REPORT_MALFORMED, f"`{path}` is malformed: {what}", file=path, field=field)

    if not isinstance(doc, dict):
        raise bad("", "the report must be a JSON object")
    if doc.get("format") != REPORT_FORMAT:
        raise bad("format", f"format is not `{REPORT_FORMAT}`")
    if not isinstance(doc.get("candidate_hash"), str) or not is_hash(doc["candidate_hash"]):
        raise bad("candidate_hash", "`candidate_hash` is not a hash")
    artifacts = doc.get("artifacts")
    if not isinstance(artifacts, dict) or not all(isinstance(h, str) and is_hash(h) for h in artifacts.values()):
        raise bad("artifacts", "`artifacts` must map paths to hashes")
    if not isinstance(doc.get("verdict"), str):
        raise bad("verdict", "`verdict` must be a string")
    pact = doc.get("pact")
    if not isinstance(pact, dict) or set(pact) != {"id", "version"}:
        raise bad("pact", "`pact` must be an object with `id` and `version`")
    return doc


def check_report_rules(files: Mapping[str, bytes], manifest: Manifest, documents: Mapping[str, Any]) -> dict[str, Any]:
    """The report is present, the manifest's, bound to this candidate and these bytes, passing and complete.

    Binding is checked before the verdict: first "is this the report of
    these bytes?", then "what does it say?". Every listed file but the
    report and its renderings must be one the report checked. Completeness
    is recomputed from the report's own exploration and verdicts
    (`report_rules.report_is_complete`), never taken from its `complete`
    field. Returns the parsed report.
    """
    ref = manifest.report
    if ref is None:
        raise BundleRuleError(
            Rule.REPORT_MISSING,
            "the manifest names no verification report",
            file=MANIFEST_PATH,
            field="report",
            hint="build the bundle with `pactwright build`, which verifies and records the report",
        )
    if ref.path not in documents:
        raise BundleRuleError(
            Rule.REPORT_MISSING,
            f"the manifest's report `{show(ref.path)}` is not a listed JSON file",
            file=MANIFEST_PATH,
            field="report/path",
        )
    found = hash_bytes(files[ref.path])
    if found != ref.hash:
        raise BundleRuleError(
            Rule.REPORT_HASH,
            f"`{ref.path}` is not the report the manifest names",
            file=ref.path,
            field="report/hash",
            expected=ref.hash,
            found=found,
            labels=("manifest", "report"),
        )
    report = _report_document(documents[ref.path], ref.path)
    pact = {"id": manifest.pact_id, "version": manifest.pact_version}
    if report["candidate_hash"] != manifest.candidate_hash or report["pact"] != pact:
        raise BundleRuleError(
            Rule.REPORT_CANDIDATE,
            f"`{ref.path}` verified another candidate than this bundle's",
            file=ref.path,
            field="candidate_hash",
            expected=f"{manifest.candidate_hash} ({manifest.pact_id} {manifest.pact_version})",
            found=f"{report['candidate_hash']} ({show(str(report['pact'].get('id')))} "
            f"{show(str(report['pact'].get('version')))})",
            labels=("manifest", "report"),
        )
    _check_bound_artifacts(report["artifacts"], manifest, ref.path)
    for where, verdict in ((MANIFEST_PATH, ref.verdict), (ref.path, report["verdict"])):
        if verdict != PASSING_VERDICT:
            raise BundleRuleError(
                Rule.REPORT_VERDICT,
                f"the verification report's verdict in {where} is `{show(verdict)}`, not `pass`; "
                "only a passing bundle is signed or activated",
                file=where,
                field="report/verdict" if where == MANIFEST_PATH else "verdict",
                expected=PASSING_VERDICT,
                found=show(verdict),
                hint=f"read `{ref.path}` (or report.html) for the counterexamples; fix the policy and rebuild",
            )
    _check_complete(report, ref.path)
    return report


def _check_bound_artifacts(checked: dict[str, str], manifest: Manifest, path: str) -> None:
    listed = manifest.hashes()
    for name, digest in sorted(checked.items()):
        if listed.get(name) != digest:
            raise BundleRuleError(
                Rule.REPORT_ARTIFACTS,
                f"`{path}` checked other bytes of `{show(name)}` than this bundle holds",
                file=path,
                field=f"artifacts/{name}",
                expected=listed.get(name, "(not in the bundle)"),
                found=digest,
                labels=("manifest", "report"),
            )
    unchecked = sorted(set(listed) - set(checked) - REPORT_RENDERINGS)
    if unchecked:
        raise BundleRuleError(
            Rule.REPORT_ARTIFACTS,
            f"`{path}` did not check `{unchecked[0]}`, which the bundle lists",
            file=path,
            field="artifacts",
            hint="every listed file but the report and its renderings must be one the verifier checked",
        )


def _check_complete(report: dict[str, Any], path: str) -> None:
    """Refuse a report whose `complete` contradicts its own run, or an incomplete one not accepted so.

    The verifier never writes a report whose `complete` disagrees with its
    exploration and verdicts, nor a passing incomplete one without
    `--allow-incomplete`, so either was not produced as it stands, and
    nobody vouches for a bounded result by accident.
    """
    complete, allowed = report.get("complete"), report.get("allow_incomplete")
    computed = report_is_complete(report)
    if complete is not computed:
        raise BundleRuleError(
            Rule.REPORT_INCOMPLETE,
            f"`{path}` says `complete: {_flag(complete)}`, but its own exploration and verdicts make it "
            f"{'complete' if computed else 'incomplete'}; a report's completeness is recomputed, not trusted",
            file=path,
            field="complete",
            expected=str(computed).lower(),
            found=_flag(complete),
            hint="rebuild the bundle; an edited report is neither signed nor activated",
        )
    if computed or allowed is True:
        return
    raise BundleRuleError(
        Rule.REPORT_INCOMPLETE,
        f"`{path}` is incomplete (a bound stopped the search, recomputed from its exploration and verdicts) "
        "and does not record `--allow-incomplete`; only a complete or explicitly accepted report is signed "
        "or activated",
        file=path,
        field="complete",
        expected="complete true, or allow_incomplete true",
        found=f"complete {_flag(complete)}, allow_incomplete {_flag(allowed)}",
        hint="rebuild with a larger `--max-depth` or `--max-states`, or with `--allow-incomplete` to accept it",
    )


def _flag(value: Any) -> str:
    return "missing" if value is None else str(value).lower() if isinstance(value, bool) else repr(value)


# --- `sign`: the same rules, under the PW41x codes ---------------------------------------------

_TREE_HINT = "rebuild the bundle with `pactwright build`; never edit a bundle by hand"
SIGN_CODES: Mapping[Rule, str] = {
    **dict.fromkeys(
        (Rule.MANIFEST_MISSING, Rule.MANIFEST_NOT_CANONICAL, Rule.MANIFEST_FORMAT, Rule.MANIFEST_PATH,
         Rule.MANIFEST_MALFORMED),
        "PW412",
    ),
    **dict.fromkeys(
        (Rule.SYMLINK, Rule.NOT_REGULAR, Rule.FILE_TOO_LARGE, Rule.TREE_LIMIT, Rule.LOOK_ALIKE, Rule.RENAMED,
         Rule.MISSING, Rule.UNLISTED, Rule.ARTIFACT_MISMATCH, Rule.DOCUMENT_NOT_CANONICAL, Rule.CANDIDATE_PACT),
        "PW413",
    ),
    **dict.fromkeys((Rule.REPORT_MISSING, Rule.REPORT_MALFORMED, Rule.REPORT_HASH), "PW414"),
    Rule.REPORT_VERDICT: "PW415",
    **dict.fromkeys((Rule.REPORT_CANDIDATE, Rule.REPORT_ARTIFACTS), "PW416"),
    Rule.REPORT_INCOMPLETE: "PW419",
}  # fmt: skip


def for_sign(error: BundleRuleError) -> ActivationError:
    """The rule `error` names, as the PW41x refusal `sign` (and `approve`) document."""
    code = SIGN_CODES[error.rule]
    default_hint = _TREE_HINT if code == "PW413" else None
    return ActivationError(
        error.message,
        code=code,
        file=error.file,
        field=error.field,
        expected=error.expected,
        found=error.found,
        hint=error.hint or default_hint,
    )


def parse_manifest(data: bytes) -> Manifest:
    """Validate manifest bytes (PW412): canonical, known format, safe sorted paths, consistent candidate."""
    try:
        return check_manifest_bytes(data)
    except BundleRuleError as exc:
        raise for_sign(exc) from None


def read_manifest(directory: str | os.PathLike[str]) -> Manifest:
    """The manifest of a bundle directory (PW412 if absent or invalid; exit 2 if no directory)."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"`{root}` is not a bundle directory")
    path = root / MANIFEST_PATH
    if path.is_symlink() or not path.is_file():
        raise for_sign(BundleRuleError(Rule.MANIFEST_MISSING, f"`{root}` has no `{MANIFEST_PATH}`"))
    return parse_manifest(path.read_bytes())


def read_artifact(root: Path, artifact: Artifact) -> bytes:
    """One listed file's bytes, refused (PW413) if missing, a symlink, or not the bytes the manifest names."""
    path = root / artifact.path
    if path.is_symlink() or not path.is_file():
        raise for_sign(
            BundleRuleError(Rule.MISSING, f"`{artifact.path}` is listed in the manifest but missing from the bundle")
        )
    data = path.read_bytes()
    try:
        check_artifact(data, artifact)
    except BundleRuleError as exc:
        raise for_sign(exc) from None
    return data


def read_bundle(directory: str | os.PathLike[str], limits: Limits | None = None) -> Bundle:
    """Read a bundle with the shared reader and every rule up to the report (PW412, PW413; exit 2 if no directory)."""
    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"`{root}` is not a bundle directory")
    try:
        files = read_tree(root, limits)
        manifest, _ = check_files(files)
    except BundleRuleError as exc:
        raise for_sign(exc) from None
    listed = {a.path: files[a.path] for a in manifest.artifacts}
    return Bundle(root, manifest, listed, files.get(APPROVAL_PATH), files.get(SIGNATURES_PATH))


def check_report(bundle: Bundle) -> dict[str, Any]:
    """Refuse unless the report is the manifest's, binds this candidate and these bytes, passed, and is complete.

    PW414 to PW416, and PW419 for an incomplete run not built with
    `--allow-incomplete` or a report whose `complete` contradicts its own
    exploration; the same rules, in the same order, as activation.
    """
    try:
        documents = check_documents(bundle.files, bundle.manifest)
        return check_report_rules(bundle.files, bundle.manifest, documents)
    except BundleRuleError as exc:
        raise for_sign(exc) from None
