"""`pactwright ledger run PROGRAM.num --vars VARS.json [--balances BALANCES.json]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pactwright.errors import UsageError


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    run_parser = sub.add_parser("run", help="execute one ledger program and print its postings")
    run_parser.add_argument("program", metavar="PROGRAM.num")
    run_parser.add_argument("--vars", required=True, metavar="VARS.json", help='e.g. {"price": "EUR/2 6490"}')
    run_parser.add_argument("--balances", metavar="BALANCES.json", help='[{"account", "asset", "amount"}]')


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read `{path}`: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.numscript.cli_support import run_from_json

    try:
        program = _read(args.program).decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise UsageError(f"`{args.program}` is not UTF-8 text (byte {exc.start})") from None
    balances = _read(args.balances) if args.balances else None
    result = run_from_json(program, _read(args.vars), balances)
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0
