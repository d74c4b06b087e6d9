"""`pactwright check FILE...`: blockers with spans and hints, or the candidate hash."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pactwright.cli._render import FileReport, render_json, render_sarif, render_text
from pactwright.errors import UsageError


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="policy files (.pact)")
    parser.add_argument("--format", choices=("text", "json", "sarif"), default="text")
    parser.add_argument(
        "--emit-candidate", metavar="OUT.json", help="write the canonical candidate bytes (one FILE only)"
    )


def check_file(path: str) -> tuple[FileReport, bytes | None]:
    """Check one file (`-` is standard input); returns its report and, when it passes, the candidate bytes."""
    from pactwright.compiler.pipeline import check_bytes

    try:
        data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as exc:
        return FileReport(path, unreadable=f"cannot read `{path}`: {exc.strerror or exc}"), None
    result = check_bytes(data)
    source = data.decode("utf-8", errors="replace")
    report = FileReport(path, result.diagnostics, source=source)
    if result.ok and result.candidate is not None:
        report.candidate_hash = result.candidate.hash()
        return report, result.candidate.canonical_bytes()
    return report, None


def run(args: argparse.Namespace) -> int:
    if args.emit_candidate and len(args.files) != 1:
        raise UsageError("`--emit-candidate` takes exactly one FILE")
    reports: list[FileReport] = []
    candidate_bytes: bytes | None = None
    for path in args.files:
        report, candidate_bytes = check_file(path)
        reports.append(report)
    if args.format == "json":
        sys.stdout.write(json.dumps(render_json(reports), indent=2, ensure_ascii=False) + "\n")
    elif args.format == "sarif":
        sys.stdout.write(json.dumps(render_sarif(reports), indent=2, ensure_ascii=False) + "\n")
    else:
        for report in reports:
            if report.unreadable:
                sys.stderr.write(f"error[PW001]: {report.unreadable}\n")
            elif report.diagnostics:
                # Diagnostics, warnings included, go to stderr; stdout carries results.
                sys.stderr.write(render_text(report))
            if report.ok:
                sys.stdout.write(f"{report.file}: ok  candidate {report.candidate_hash}\n")
    if any(r.unreadable for r in reports):
        return 2
    if args.emit_candidate and candidate_bytes is not None:
        try:
            Path(args.emit_candidate).write_bytes(candidate_bytes)
        except OSError as exc:
            raise UsageError(f"cannot write `{args.emit_candidate}`: {exc.strerror or exc}") from None
    return 0 if all(r.ok for r in reports) else 1
