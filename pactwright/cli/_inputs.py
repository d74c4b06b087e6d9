"""Shared loading for commands that take a policy file or a bundle directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pactwright.canonical import load_json
from pactwright.errors import CheckError, PactwrightError, UsageError


def read_policy(path: str) -> Any:
    """Check a policy file; on blockers, print them and raise `CheckError` (exit 1)."""
    from pactwright.cli._render import FileReport, render_text
    from pactwright.compiler.pipeline import check_bytes

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read `{path}`: {exc.strerror or exc}") from None
    result = check_bytes(data)
    if not result.ok:
        report = FileReport(path, result.diagnostics, source=data.decode("utf-8", errors="replace"))
        sys.stderr.write(render_text(report))
        raise CheckError(f"`{path}` has blockers; nothing was produced", code="PW199")
    return result


def read_bundle_json(bundle: str, name: str) -> Any:
    """One canonical JSON artifact of a bundle directory."""
    path = Path(bundle) / name
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read `{path}`: {exc.strerror or exc}") from None
    try:
        return load_json(data)
    except PactwrightError as exc:
        raise UsageError(f"`{path}` is not valid: {exc.message}") from None


def load_candidate_json(path: str) -> dict[str, Any]:
    """Candidate JSON from a `.pact` file or from a bundle's `candidate.json`."""
    if Path(path).is_dir():
        from pydantic import ValidationError

        from pactwright.candidate import Candidate

        candidate: Any = read_bundle_json(path, "candidate.json")
        try:
            Candidate.model_validate(candidate)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(str(part) for part in first["loc"]) or "the document"
            raise UsageError(
                f"`{Path(path) / 'candidate.json'}` is not a pactwright candidate: {first['msg'].lower()} at `{where}`"
            ) from None
        checked: dict[str, Any] = candidate
        return checked
    result = read_policy(path)
    out: dict[str, Any] = result.candidate.to_json()
    return out
