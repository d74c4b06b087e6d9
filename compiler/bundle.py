"""Compile a checked policy into a bundle: an ordered pipeline of pure stages.

candidate -> lower -> emit (transitions, events schema, ledger programs,
model, trace) -> manifest. Each stage takes the files emitted so far and
returns new ones; the manifest comes last and lists everything else. Writing
to disk is separate and atomic: a half-written bundle never exists.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pactwright import __version__
from pactwright.candidate import Candidate
from pactwright.canonical import canonical_bytes
from pactwright.compiler.emit_ledger import emit_ledger_programs
from pactwright.compiler.emit_model import build_model
from pactwright.compiler.emit_schema import build_event_schema
from pactwright.compiler.emit_trace import build_trace
from pactwright.compiler.lower import Json, lower
from pactwright.compiler.normalize import SourceMap
from pactwright.errors import CompileError, UsageError
from pactwright.manifest import MANIFEST_PATH, build_manifest, manifest_bytes


class BundleWriteError(CompileError):
    """The output directory cannot be written: an environment problem, exit 2."""

    code = "PW201"
    exit_code = 2


@dataclass
class CompileState:
    """What the stages share: inputs, the transition table, and emitted files."""

    candidate: Candidate
    source_map: SourceMap
    source_name: str
    candidate_hash: str = ""
    table: Json = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)


def _candidate(state: CompileState) -> None:
    state.candidate_hash = state.candidate.hash()
    state.files["candidate.json"] = state.candidate.canonical_bytes()


def _transitions(state: CompileState) -> None:
    state.table = lower(state.candidate, state.candidate_hash)
    state.files["transitions.json"] = canonical_bytes(state.table)


def _event_schema(state: CompileState) -> None:
    state.files["events.schema.json"] = canonical_bytes(build_event_schema(state.table))


def _ledger(state: CompileState) -> None:
    state.files.update(emit_ledger_programs(state.table))


def _model(state: CompileState) -> None:
    state.files["model.json"] = canonical_bytes(build_model(state.table))


def _trace(state: CompileState) -> None:
    programs = {path: data for path, data in state.files.items() if path.startswith("ledger/")}
    trace = build_trace(state.table, state.source_map, state.source_name, programs)
    state.files["trace.json"] = canonical_bytes(trace)


STAGES: tuple[Callable[[CompileState], None], ...] = (
    _candidate,
    _transitions,
    _event_schema,
    _ledger,
    _model,
    _trace,
)


def compile_candidate(candidate: Candidate, source_map: SourceMap, source_name: str) -> dict[str, bytes]:
    """Every artifact of the bundle, path -> bytes, including `manifest.json`."""
    state = CompileState(candidate, source_map, Path(source_name).name)
    for stage in STAGES:
        stage(state)
    return with_manifest(state.files, candidate, state.candidate_hash)


def with_manifest(
    files: Mapping[str, bytes], candidate: Candidate, candidate_hash: str, report: Mapping[str, str] | None = None
) -> dict[str, bytes]:
    """`files` plus a manifest over all of them."""
    artifacts = {path: data for path, data in files.items() if path != MANIFEST_PATH}
    manifest = build_manifest(
        pact_id=candidate.pact.id,
        pact_version=candidate.pact.version,
        compiler_version=__version__,
        candidate_hash=candidate_hash,
        files=artifacts,
        report=report,
    )
    return {**artifacts, MANIFEST_PATH: manifest_bytes(manifest)}


def write_bundle(files: Mapping[str, bytes], out_dir: str | os.PathLike[str]) -> Path:
    """Write a bundle atomically: into a sibling temp dir, then renamed into place.

    An existing bundle at `out_dir` is replaced only once the new one is
    complete; a non-bundle directory is never overwritten.
    """
    target = Path(out_dir)
    is_bundle = (target / MANIFEST_PATH).is_file()
    if target.exists() and not is_bundle and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"`{target}` exists and is not a bundle; refusing to overwrite it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as exc:
        raise BundleWriteError(f"cannot write bundle to `{target}`: {exc.strerror or exc}") from None
    try:
        for path, data in sorted(files.items()):
            dest = staging / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        os.chmod(staging, 0o755)  # noqa: S103 - mkdtemp's 0700 is wrong for a published bundle
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
            old.rmdir()
            target.rename(old)
            staging.rename(target)
            shutil.rmtree(old)
        else:
            staging.rename(target)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BundleWriteError(f"cannot write bundle to `{target}`: {exc.strerror or exc}") from None
    return target
