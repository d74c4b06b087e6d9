"""Activation checks on what the bundle *is*: manifest, paths, closed world, bytes, report.

Each function is one step of `activation.VERIFICATION_ORDER`, takes bytes
and parsed documents, and raises a `Refusal` with the step's code; none
reads the file system or the store. The manifest's shape is the kernel's
(`pactwright.bundle_check.parse_manifest`, which `sign` uses too); what
activation adds are finer codes in a fixed order, stricter paths, and the
support checks only a runtime can make.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from pactwright import __version__
from pactwright.bundle_check import CANDIDATE_PATH, CONTROL_FILES, REPORT_RENDERINGS, Manifest, parse_manifest
from pactwright.canonical import hash_bytes, is_hash, load_json
from pactwright.errors import ActivationError, PactwrightError
from pactwright.manifest import COMPILER_NAME, MANIFEST_FORMAT, MANIFEST_PATH
from pactwright.report_rules import report_is_complete
from pactwright.runtime._refusal import Refusal, show
from pactwright.runtime._semver import parse_version

# What this runtime can activate. A new manifest format or compiler release
# is added here deliberately, after checking the runtime reads it correctly.
SUPPORTED_MANIFEST_FORMATS = frozenset({MANIFEST_FORMAT})
SUPPORTED_COMPILERS: Mapping[str, frozenset[str]] = {COMPILER_NAME: frozenset({"0.1.0", __version__})}
REPORT_FORMAT = "pactwright.report/1"
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*", re.ASCII)
_MAX_PATH = 255


def load_document(files: Mapping[str, bytes], path: str) -> Any:
    """A bundle JSON document, refused (PW425) unless strict canonical JSON."""
    try:
        return load_json(files[path], require_canonical=True)
    except PactwrightError as exc:
        raise Refusal(
            "PW425",
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


def _check_listed_paths(paths: list[Any]) -> None:
    """Every listed path is relative, portable, and unique even on a case-insensitive file system."""
    seen: dict[str, str] = {fold(doc): doc for doc in CONTROL_FILES}
    for index, path in enumerate(paths):
        if not isinstance(path, str):
            continue  # not a path at all: the shape check names it
        field = f"artifacts/{index}/path"
        problem = _path_problem(path)
        if problem is not None:
            raise Refusal(
                "PW427",
                f"`manifest.json` lists `{show(path)}`, which {problem}",
                file=MANIFEST_PATH,
                field=field,
                hint="artifact paths are relative POSIX paths inside the bundle",
            )
        other = seen.get(fold(path))
        if other is not None:
            what = "twice" if other == path else f"and `{other}`: one file on a case-insensitive disk"
            raise Refusal("PW427", f"`manifest.json` lists `{path}` {what}", file=MANIFEST_PATH, field=field)
        seen[fold(path)] = path


def _diagnose(files: Mapping[str, bytes], kernel_error: ActivationError) -> Refusal:
    """The first documented manifest problem, once the kernel's parser refused the manifest."""
    doc = load_document(files, MANIFEST_PATH)  # PW425
    found = doc.get("format") if isinstance(doc, dict) else None
    if found not in SUPPORTED_MANIFEST_FORMATS:
        return Refusal(
            "PW426",
            "`manifest.json` has a format this runtime does not support",
            file=MANIFEST_PATH,
            field="format",
            expected=", ".join(f"`{f}`" for f in sorted(SUPPORTED_MANIFEST_FORMATS)),
            found=f"`{show(str(found))}`",
            labels=("supported", "manifest"),
            hint="activate it with the pactwright release that built it, or rebuild it with this one",
        )
    if isinstance(doc.get("artifacts"), list):
        _check_listed_paths([entry.get("path") if isinstance(entry, dict) else None for entry in doc["artifacts"]])
    return Refusal("PW428", kernel_error.message, file=MANIFEST_PATH, field=kernel_error.field)


def check_manifest(files: Mapping[str, bytes]) -> Manifest:
    """Present, canonical, a supported format, safe paths, well-formed, from a supported compiler.

    The kernel's `parse_manifest` (what `sign` uses) runs first; only when it
    refuses are the finer activation codes worked out, in their documented
    order, so a good manifest is parsed once.
    """
    if MANIFEST_PATH not in files:
        raise Refusal("PW424", "the bundle has no `manifest.json`", file=MANIFEST_PATH)
    try:
        manifest = parse_manifest(files[MANIFEST_PATH])
    except ActivationError as exc:
        raise _diagnose(files, exc) from None
    _check_listed_paths([a.path for a in manifest.artifacts])
    if parse_version(manifest.pact_version) is None:
        raise Refusal(
            "PW428",
            f"`manifest.json` pact version `{show(manifest.pact_version)}` is not a semantic version (1.2.3)",
            file=MANIFEST_PATH,
            field="pact/version",
        )
    # Canonical and well-formed by now, so the standard parser is safe here.
    compiler = json.loads(files[MANIFEST_PATH])["compiler"]
    name, version = compiler["name"], compiler["version"]
    if version not in SUPPORTED_COMPILERS.get(name, frozenset()):
        raise Refusal(
            "PW429",
            "`manifest.json` was written by a compiler this runtime does not support",
            file=MANIFEST_PATH,
            field="compiler",
            expected=", ".join(f"`{n} {v}`" for n, vs in SUPPORTED_COMPILERS.items() for v in sorted(vs)),
            found=f"`{show(name)} {show(version)}`",
            labels=("supported", "manifest"),
            hint="rebuild the bundle with a supported pactwright, or upgrade the runtime",
        )
    return manifest


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
            raise Refusal(
                "PW430",
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
                raise Refusal(
                    "PW431",
                    f"`{path}` is missing and `{show(renamed)}` holds its bytes: the file was renamed",
                    file=path,
                    expected=f"`{path}`",
                    found=f"`{show(renamed)}`",
                    labels=("listed", "on disk"),
                )
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise Refusal("PW432", f"`{missing[0]}` is listed in the manifest but not in the bundle{more}", file=missing[0])
    if extras:
        more = f" (and {len(extras) - 1} more)" if len(extras) > 1 else ""
        raise Refusal(
            "PW433",
            f"`{show(extras[0])}` is in the bundle but not listed in the manifest{more}",
            file=extras[0],
            hint="a signed bundle holds only its listed files, `manifest.json`, `approval.json` and `signatures.json`",
        )


def check_artifacts(files: Mapping[str, bytes], manifest: Manifest) -> None:
    """Every listed file has exactly the listed size and sha256."""
    for index, artifact in enumerate(manifest.artifacts):
        data = files[artifact.path]
        found = hash_bytes(data)
        if found != artifact.sha256 or len(data) != artifact.size:
            raise Refusal(
                "PW434",
                f"`{artifact.path}` does not match the manifest",
                file=artifact.path,
                field=f"artifacts/{index}",
                expected=f"{artifact.sha256}  size {artifact.size}",
                found=f"{found}  size {len(data)}",
                labels=("manifest", "on disk"),
            )


def check_json_artifacts(files: Mapping[str, bytes], manifest: Manifest) -> dict[str, Any]:
    """Every listed `.json` file is canonical JSON (PW425); returns them parsed, by path."""
    return {a.path: load_document(files, a.path) for a in manifest.artifacts if a.path.endswith(".json")}


def check_candidate(manifest: Manifest, documents: Mapping[str, Any]) -> None:
    """`candidate.json` (whose hash the manifest names) is for the manifest's pact and version."""
    candidate = documents.get(CANDIDATE_PATH)
    pact = candidate.get("pact") if isinstance(candidate, dict) else None
    if pact != {"id": manifest.pact_id, "version": manifest.pact_version}:
        raise Refusal(
            "PW435",
            "`candidate.json` is for another pact or version than the manifest",
            file=CANDIDATE_PATH,
            field="pact",
            expected=f"{manifest.pact_id} {manifest.pact_version}",
            found=show(str(pact)),
            labels=("manifest", "candidate"),
        )


def _report_document(doc: Any, path: str) -> dict[str, Any]:
    def bad(field: str, what: str) -> Refusal:
        return Refusal("PW455", f"`{path}` is malformed: {what}", file=path, field=field)

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


def check_report(files: Mapping[str, bytes], manifest: Manifest, documents: Mapping[str, Any]) -> str:
    """The report is present, the manifest's, bound to this candidate and these bytes, and passing.

    Binding is checked before the verdict: first "is this the report of
    these bytes?", then "what does it say?". Like `sign`, every listed file
    but the report and its renderings must be one the report checked.
    """
    ref = manifest.report
    if ref is None:
        raise Refusal(
            "PW454",
            "the manifest names no verification report",
            file=MANIFEST_PATH,
            field="report",
            hint="build the bundle with `pactwright build`, which verifies and records the report",
        )
    if ref.path not in documents:
        raise Refusal(
            "PW454",
            f"the manifest's report `{show(ref.path)}` is not a listed JSON file",
            file=MANIFEST_PATH,
            field="report/path",
        )
    found = hash_bytes(files[ref.path])
    if found != ref.hash:
        raise Refusal(
            "PW456",
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
        raise Refusal(
            "PW457",
            f"`{ref.path}` verified another candidate than this bundle's",
            file=ref.path,
            field="candidate_hash",
            expected=f"{manifest.candidate_hash} ({manifest.pact_id} {manifest.pact_version})",
            found=f"{report['candidate_hash']} ({show(str(report['pact'].get('id')))} "
            f"{show(str(report['pact'].get('version')))})",
            labels=("manifest", "report"),
        )
    checked: dict[str, str] = report["artifacts"]
    listed = manifest.hashes()
    for path, digest in sorted(checked.items()):
        if listed.get(path) != digest:
            raise Refusal(
                "PW458",
                f"`{ref.path}` checked other bytes of `{show(path)}` than this bundle holds",
                file=ref.path,
                field=f"artifacts/{path}",
                expected=listed.get(path, "(not in the bundle)"),
                found=digest,
                labels=("manifest", "report"),
            )
    unchecked = sorted(set(listed) - set(checked) - REPORT_RENDERINGS)
    if unchecked:
        raise Refusal(
            "PW458",
            f"`{ref.path}` did not check `{unchecked[0]}`, which the bundle lists",
            file=ref.path,
            field="artifacts",
            hint="every listed file but the report and its renderings must be one the verifier checked",
        )
    for where, verdict in ((MANIFEST_PATH, ref.verdict), (ref.path, report["verdict"])):
        if verdict != "pass":
            raise Refusal(
                "PW459",
                f"the verification report's verdict is `{show(verdict)}`, not `pass`",
                file=where,
                field="report/verdict" if where == MANIFEST_PATH else "verdict",
                hint=f"read `{ref.path}` (or report.html) for the counterexamples; fix the policy and rebuild",
            )
    if not report_is_complete(report) and report.get("allow_incomplete") is not True:
        raise Refusal(
            "PW462",
            f"`{ref.path}` is incomplete (a bound stopped the search, recomputed from its exploration and "
            "verdicts) and does not record `--allow-incomplete`",
            file=ref.path,
            field="complete",
            hint="rebuild with a larger bound, or with `--allow-incomplete` to accept a bounded result, and sign again",
        )
    return str(report["verdict"])
