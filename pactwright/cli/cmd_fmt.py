"""`pactwright fmt FILE... [--check]`: rewrite policies in their canonical layout.

Formatting never changes a policy's candidate, so it is safe in a pre-commit
hook; `--check` is for CI, where nothing may be written. A file that does not
parse is reported like `check` reports it and left alone: fmt never guesses.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile
from pathlib import Path

from pactwright.cli._render import FileReport, render_text
from pactwright.diagnostics import Diagnostic

STDIN = "-"


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="policy files (.pact); `-` reads stdin")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; print a diff and exit 1 if any file would change"
    )


def run(args: argparse.Namespace) -> int:
    """0: nothing (more) to do; 1: a file would change (--check) or does not parse; 2: unreadable."""
    return max(_format_one(path, check=args.check) for path in args.files)


def _format_one(path: str, *, check: bool) -> int:
    from pactwright.compiler.formatter import format_policy
    from pactwright.compiler.parser import ParseFailure
    from pactwright.compiler.pipeline import CheckResult, decode_policy

    name = "<stdin>" if path == STDIN else path
    try:
        data = sys.stdin.buffer.read() if path == STDIN else Path(path).read_bytes()
    except OSError as exc:
        sys.stderr.write(f"error[PW001]: cannot read `{name}`: {exc.strerror or exc}\n")
        return 2
    decoded = decode_policy(data)
    if isinstance(decoded, CheckResult):
        return _refuse(name, decoded.diagnostics, data.decode("utf-8", errors="replace"))
    try:
        formatted = format_policy(decoded)
    except ParseFailure as failure:
        return _refuse(name, failure.diagnostics, decoded)
    changed = formatted.encode("utf-8") != data
    if check:
        if changed:
            sys.stdout.writelines(_diff(decoded, formatted, name))
        return 1 if changed else 0
    if path == STDIN:
        sys.stdout.write(formatted)
    elif changed:
        try:
            _replace(Path(path), formatted)
        except OSError as exc:
            sys.stderr.write(f"error[PW001]: cannot write `{path}`: {exc.strerror or exc}\n")
            return 2
        sys.stdout.write(f"reformatted {path}\n")
    return 0


def _refuse(name: str, diagnostics: list[Diagnostic], source: str) -> int:
    sys.stderr.write(render_text(FileReport(name, diagnostics, source=source)))
    return 1


def _diff(before: str, after: str, name: str) -> list[str]:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=name, tofile=f"{name} (formatted)"
    )
    # A last line without a newline would run into the next diff line.
    return [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]


def _replace(path: Path, text: str) -> None:
    """Write `text` over `path` atomically: a reader sees the old file or the new one.

    A symlink is followed, so the link stays a link and its target is rewritten.
    """
    path = path.resolve()
    mode = path.stat().st_mode & 0o7777
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".fmt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
