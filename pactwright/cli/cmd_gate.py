"""`pactwright gate [SCENARIOS...] [--format text|json|junit] [--output FILE]`: the safety gate.

Runs scenario files (default: every `*.toml` in policies/scenarios/) against a
real runtime on temporary stores, ledgers and a provider simulator
(gate/, docs/gate.md). Exit 0 when every expectation held, 1 when one did not
(each failure named on stderr), 2 for a malformed scenario file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pactwright.errors import UsageError

DEFAULT_DIR = Path("policies") / "scenarios"


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                        help=f"scenario files or directories of them (default: {DEFAULT_DIR}/*.toml)")  # fmt: skip
    parser.add_argument("--format", choices=("text", "json", "junit"), default="text")
    parser.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")


def _files(given: list[str]) -> list[Path]:
    found: list[Path] = []
    for item in given or [str(DEFAULT_DIR)]:
        path = Path(item)
        if path.is_dir():
            found += sorted(path.glob("*.toml"))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"no scenario file or directory `{item}`", code="PW664", file=item)
    if not found:
        raise UsageError("no scenario files to run", code="PW664", hint=f"put `*.toml` files in {DEFAULT_DIR}/")
    return found


def run(args: argparse.Namespace) -> int:
    from pactwright.gate import render, run_gate
    from pactwright.gate.report import failure_lines

    gate = run_gate(_files(args.scenarios))
    report = render(gate, args.format)
    if args.output:
        try:
            Path(args.output).write_text(report, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write the report to `{args.output}`: {exc.strerror}", file=args.output) from None
    else:
        sys.stdout.write(report)
    for line in failure_lines(gate):
        sys.stderr.write(line + "\n")
    return 0 if gate.ok else 1
