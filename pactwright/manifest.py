"""The bundle manifest: what a bundle contains, byte for byte.

The manifest lists every artifact's relative path, SHA-256 and size, the
candidate hash it was compiled from, and (after verification) the report's
hash and verdict. It does not name the approval, so a reviewer may approve
before or after the build; signatures bind the two (DESIGN.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes

MANIFEST_FORMAT = "pactwright.manifest/1"
MANIFEST_PATH = "manifest.json"
COMPILER_NAME = "pactwright"


def build_manifest(
    *,
    pact_id: str,
    pact_version: str,
    compiler_version: str,
    candidate_hash: str,
    files: Mapping[str, bytes],
    report: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The manifest document over `files` (which must not include the manifest)."""
    if MANIFEST_PATH in files:
        raise ValueError("the manifest cannot list itself")
    return {
        "format": MANIFEST_FORMAT,
        "pact": {"id": pact_id, "version": pact_version},
        "compiler": {"name": COMPILER_NAME, "version": compiler_version},
        "candidate_hash": candidate_hash,
        "artifacts": [
            {"path": path, "sha256": hash_bytes(data), "size": len(data)} for path, data in sorted(files.items())
        ],
        "report": dict(report) if report is not None else None,
    }


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    return canonical_bytes(manifest)
