"""Activation checks on what the bundle *is*: manifest, paths, closed world, bytes, report.

Each function is one step of `activation.VERIFICATION_ORDER`, takes bytes
and parsed documents, and raises a `Refusal` with the step's code; none
reads the file system or the store. The rules themselves are the kernel's
(`pactwright.bundle_check`, which `sign` runs too, at the same strength):
this module maps each `Rule` to activation's code (`ACTIVATION_CODES`) and
adds only the support checks a runtime alone can make (a compiler it knows,
a pact version it can order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pactwright import __version__
from pactwright import bundle_check as rules
from pactwright.bundle_check import Manifest
from pactwright.bundle_reader import BundleRuleError, Rule
from pactwright.manifest import COMPILER_NAME, MANIFEST_FORMAT, MANIFEST_PATH
from pactwright.runtime._refusal import Refusal, show
from pactwright.runtime._semver import parse_version

# What this runtime can activate. A new manifest format or compiler release
# is added here deliberately, after checking the runtime reads it correctly.
SUPPORTED_MANIFEST_FORMATS = frozenset({MANIFEST_FORMAT})
SUPPORTED_COMPILERS: Mapping[str, frozenset[str]] = {COMPILER_NAME: frozenset({"0.1.0", __version__})}
REPORT_FORMAT = rules.REPORT_FORMAT

# Every shared bundle rule, under the code docs/threat-model.md lists for it at activation.
ACTIVATION_CODES: Mapping[Rule, str] = {
    Rule.SYMLINK: "PW420",
    Rule.NOT_REGULAR: "PW421",
    Rule.FILE_TOO_LARGE: "PW422",
    Rule.TREE_LIMIT: "PW423",
    Rule.MANIFEST_MISSING: "PW424",
    Rule.MANIFEST_NOT_CANONICAL: "PW425",
    Rule.MANIFEST_FORMAT: "PW426",
    Rule.MANIFEST_PATH: "PW427",
    Rule.MANIFEST_MALFORMED: "PW428",
    Rule.LOOK_ALIKE: "PW430",
    Rule.RENAMED: "PW431",
    Rule.MISSING: "PW432",
    Rule.UNLISTED: "PW433",
    Rule.ARTIFACT_MISMATCH: "PW434",
    Rule.DOCUMENT_NOT_CANONICAL: "PW425",
    Rule.CANDIDATE_PACT: "PW435",
    Rule.REPORT_MISSING: "PW454",
    Rule.REPORT_MALFORMED: "PW455",
    Rule.REPORT_HASH: "PW456",
    Rule.REPORT_CANDIDATE: "PW457",
    Rule.REPORT_ARTIFACTS: "PW458",
    Rule.REPORT_VERDICT: "PW459",
    Rule.REPORT_INCOMPLETE: "PW462",
}


def as_refusal(error: BundleRuleError) -> Refusal:
    """The kernel's rule refusal under activation's code, with every detail kept."""
    return Refusal(
        ACTIVATION_CODES[error.rule],
        error.message,
        file=error.file,
        field=error.field,
        expected=error.expected,
        found=error.found,
        labels=error.labels,
        hint=error.hint,
    )


def load_document(files: Mapping[str, bytes], path: str) -> Any:
    """A bundle JSON document, refused (PW425) unless strict canonical JSON."""
    try:
        return rules.load_document(files, path)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None


def check_manifest(files: Mapping[str, bytes]) -> Manifest:
    """Present, canonical, a supported format, safe paths, well-formed, from a supported compiler.

    The kernel's checks (what `sign` runs) come first, in this order; the
    pact version's SemVer form and the compiler are the runtime's own.
    """
    try:
        manifest = rules.check_manifest(files)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None
    if parse_version(manifest.pact_version) is None:
        raise Refusal(
            "PW428",
            f"`manifest.json` pact version `{show(manifest.pact_version)}` is not a semantic version (1.2.3)",
            file=MANIFEST_PATH,
            field="pact/version",
        )
    name, version = manifest.compiler
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
    """Exactly the listed files plus the three documents (PW430-PW433)."""
    try:
        rules.check_closed_world(files, manifest)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None


def check_artifacts(files: Mapping[str, bytes], manifest: Manifest) -> None:
    """Every listed file has exactly the listed size and sha256 (PW434)."""
    try:
        rules.check_artifacts(files, manifest)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None


def check_json_artifacts(files: Mapping[str, bytes], manifest: Manifest) -> dict[str, Any]:
    """Every listed `.json` file is canonical JSON (PW425); returns them parsed, by path."""
    try:
        return rules.check_documents(files, manifest)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None


def check_candidate(manifest: Manifest, documents: Mapping[str, Any]) -> None:
    """`candidate.json` (whose hash the manifest names) is for the manifest's pact and version (PW435)."""
    try:
        rules.check_candidate(manifest, documents)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None


def check_report(files: Mapping[str, bytes], manifest: Manifest, documents: Mapping[str, Any]) -> str:
    """The kernel's report rules (PW454-PW459, PW462), exactly as `sign` runs them; returns the verdict."""
    try:
        report = rules.check_report_rules(files, manifest, documents)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None
    return str(report["verdict"])
