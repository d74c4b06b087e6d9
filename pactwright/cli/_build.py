"""Build = check + compile + verify, shared by the `build` command and the demo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pactwright.canonical import hash_bytes
from pactwright.manifest import MANIFEST_PATH


@dataclass
class Built:
    report: dict[str, Any]
    files: dict[str, bytes]
    target: Path
    scale: int

    @property
    def manifest_hash(self) -> str:
        return hash_bytes(self.files[MANIFEST_PATH])


def build_bundle(policy: str, output: str, options: Any, extra_files: dict[str, bytes] | None = None) -> Built:
    """Check, compile, verify; write the bundle with its report atomically.

    The report files join the bundle and the manifest records the report's
    hash and verdict. `extra_files` (an approval) are written beside the
    manifest but not listed in it.
    """
    from pactwright.cli._inputs import read_policy
    from pactwright.compiler.bundle import compile_candidate, with_manifest, write_bundle
    from pactwright.verifier.render import report_files
    from pactwright.verifier.verify import verify_files

    result = read_policy(policy)
    files = compile_candidate(result.candidate, result.source_map, policy)
    report = verify_files(files, options)
    rendered = report_files(report)
    artifacts = {path: data for path, data in files.items() if path != MANIFEST_PATH} | rendered
    bundle = with_manifest(
        artifacts,
        result.candidate,
        result.candidate.hash(),
        report={"path": "report.json", "hash": hash_bytes(rendered["report.json"]), "verdict": report["verdict"]},
    )
    target = write_bundle({**bundle, **(extra_files or {})}, output)
    return Built(report=report, files=bundle, target=target, scale=result.candidate.currency.scale)
