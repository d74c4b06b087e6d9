"""Render diagnostics as compiler-style text, JSON, or SARIF 2.1.0."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from pactwright import __version__
from pactwright.codes import CODES
from pactwright.diagnostics import Diagnostic


@dataclass
class FileReport:
    """What `check` learned about one file."""

    file: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    candidate_hash: str | None = None
    source: str = ""
    unreadable: str | None = None  # why the file could not be read at all

    @property
    def ok(self) -> bool:
        return self.unreadable is None and self.candidate_hash is not None


_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # the parser's line ends, so carets land where spans point
_WINDOW = 160  # columns of a long source line shown around a span
_DETAILED = 500  # diagnostics rendered in full; the rest are counted


def _excerpt(text: str, column: int, width: int) -> tuple[str, int, int]:
    """A window of `text` around a span: (shown text, caret column, caret width)."""
    if len(text) <= _WINDOW:
        return text, column, width
    start = max(0, column - 1 - _WINDOW // 3)
    shown = text[start : start + _WINDOW]
    prefix = "…" if start else ""
    suffix = "…" if start + _WINDOW < len(text) else ""
    caret_column = column - start + len(prefix)
    return prefix + shown + suffix, caret_column, max(1, min(width, _WINDOW - (column - 1 - start)))


def render_text(report: FileReport) -> str:
    """`file:line:col: error[PWnnn]: message`, the source line, a caret, `help:`."""
    lines: list[str] = []
    source_lines = _LINE_BREAK.split(report.source)
    for diag in report.diagnostics[:_DETAILED]:
        span = diag.span
        lines.append(f"{report.file}:{span.line}:{span.column}: {diag.severity.value}[{diag.code}]: {diag.message}")
        if 1 <= span.line <= len(source_lines):
            text = source_lines[span.line - 1].expandtabs(1)
            gutter = " " * len(str(span.line))
            width = (span.end_column - span.column) if span.end_line == span.line else len(text) - span.column + 1
            width = max(1, min(width, max(1, len(text) - span.column + 1)))
            shown, column, width = _excerpt(text, span.column, width)
            caret = " " * (column - 1) + "^" * width
            lines.append(f"{gutter} |")
            lines.append(f"{span.line} | {shown}")
            lines.append(f"{gutter} | {caret}{' ' + diag.label if diag.label else ''}")
            lines.append(f"{gutter} |")
        if diag.hint:
            lines.append(f"help: {diag.hint}")
    if len(report.diagnostics) > _DETAILED:
        lines.append(f"... and {len(report.diagnostics) - _DETAILED} more (use --format json to see all)")
    errors = sum(1 for d in report.diagnostics if d.is_blocker)
    warnings = len(report.diagnostics) - errors
    plural = "" if errors == 1 else "s"
    wplural = "" if warnings == 1 else "s"
    lines.append(f"{report.file}: {errors} error{plural}, {warnings} warning{wplural}")
    return "\n".join(lines) + "\n"


def diagnostic_json(diag: Diagnostic) -> dict[str, object]:
    return {
        "code": diag.code,
        "severity": diag.severity.value,
        "line": diag.span.line,
        "column": diag.span.column,
        "end_line": diag.span.end_line,
        "end_column": diag.span.end_column,
        "message": diag.message,
        "hint": diag.hint,
    }


def _unreadable_json(report: FileReport) -> dict[str, object]:
    return {
        "code": "PW001",
        "severity": "error",
        "line": 0,
        "column": 0,
        "end_line": 0,
        "end_column": 0,
        "message": report.unreadable,
        "hint": "check the path and its permissions",
    }


def render_json(reports: Sequence[FileReport]) -> dict[str, object]:
    """`{"files": [...]}`; an unreadable file carries a PW001 diagnostic at line 0."""
    return {
        "files": [
            {
                "file": r.file,
                "ok": r.ok,
                "candidate_hash": r.candidate_hash,
                "diagnostics": [_unreadable_json(r)] if r.unreadable else [diagnostic_json(d) for d in r.diagnostics],
            }
            for r in reports
        ]
    }


def artifact_uri(path: str) -> str:
    """A repository-relative URI when the file is under the working directory.

    GitHub code scanning maps results to files by relative path; an absolute
    path outside the working directory becomes a `file://` URI.
    """
    from pathlib import Path

    if path == "-":
        return "stdin"
    resolved = Path(path).resolve()
    try:
        return resolved.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return resolved.as_uri()


def render_sarif(reports: Sequence[FileReport]) -> dict[str, object]:
    """A SARIF 2.1.0 log that GitHub code scanning accepts."""
    used = sorted({d.code for r in reports for d in r.diagnostics})
    rule_index = {code: i for i, code in enumerate(used)}
    results: list[dict[str, object]] = []
    for report in reports:
        for diag in report.diagnostics:
            results.append(
                {
                    "ruleId": diag.code,
                    "ruleIndex": rule_index[diag.code],
                    "level": "error" if diag.is_blocker else "warning",
                    "message": {"text": diag.message + (f" (help: {diag.hint})" if diag.hint else "")},
                    "locations": [
                        {
                            "physicalLocation": {
                                "artifactLocation": {"uri": artifact_uri(report.file)},
                                "region": {
                                    "startLine": diag.span.line,
                                    "startColumn": diag.span.column,
                                    "endLine": diag.span.end_line,
                                    "endColumn": max(diag.span.end_column, diag.span.column + 1)
                                    if diag.span.end_line == diag.span.line
                                    else diag.span.end_column,
                                },
                            }
                        }
                    ],
                }
            )
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "pactwright",
                        "version": __version__,
                        "rules": [
                            {
                                "id": code,
                                "name": code,
                                "shortDescription": {"text": CODES.get(code, code)},
                                "help": {"text": f"see docs/errors.md#{code.lower()}"},
                                "defaultConfiguration": {
                                    "level": "warning" if "(warning)" in CODES.get(code, "") else "error"
                                },
                            }
                            for code in used
                        ],
                    }
                },
                "columnKind": "unicodeCodePoints",
                "invocations": [
                    {
                        "executionSuccessful": not any(r.unreadable for r in reports),
                        "toolExecutionNotifications": [
                            {
                                "level": "error",
                                "message": {"text": r.unreadable},
                                "descriptor": {"id": "PW001"},
                            }
                            for r in reports
                            if r.unreadable
                        ],
                    }
                ],
                "results": results,
            }
        ],
    }
