"""`pactwright ledger run|balances|postings`: run one program, or read the durable ledger.

- `ledger run PROGRAM.num --vars VARS.json [--balances BALANCES.json]`
- `ledger balances --ledger URL [--format text|json]`
- `ledger postings REFERENCE --ledger URL [--format text|json]`

The reading commands never create a ledger: a missing one is PW550.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pactwright.errors import LedgerError, UsageError


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    run_parser = sub.add_parser("run", help="execute one ledger program and print its postings")
    run_parser.add_argument("program", metavar="PROGRAM.num")
    run_parser.add_argument("--vars", required=True, metavar="VARS.json", help='e.g. {"price": "EUR/2 6490"}')
    run_parser.add_argument("--balances", metavar="BALANCES.json", help='[{"account", "asset", "amount"}]')
    balances = sub.add_parser("balances", help="print every non-zero balance of a durable ledger")
    postings = sub.add_parser("postings", help="print the postings applied under one reference")
    postings.add_argument("reference", metavar="REFERENCE")
    for reader in (balances, postings):
        reader.add_argument(
            "--ledger", required=True, metavar="URL", help="ledger file, sqlite:///PATH or postgresql://..."
        )
        reader.add_argument("--format", choices=("text", "json"), default="text")


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read `{path}`: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    if args.ledger_command == "run":
        return _run_program(args)
    from pactwright.runtime.ledger_db import open_ledger

    with open_ledger(args.ledger, None, create=False) as ledger:
        if args.ledger_command == "balances":
            rows = [
                {"account": account, "asset": asset, "amount": str(amount)}
                for (account, asset), amount in sorted(ledger.asset_balances().items())
            ]
            _print(args.format, {"balances": rows}, [f"{r['account']}  {r['asset']}  {r['amount']}" for r in rows])
            return 0
        found = ledger.postings(args.reference)
    if found is None:
        raise LedgerError(f"no transaction was applied under the reference `{args.reference:.128}`", code="PW555")
    rows = [
        {"source": p.source, "destination": p.destination, "amount": str(p.amount), "asset": p.asset} for p in found
    ]
    lines = [f"{r['source']} -> {r['destination']}  {r['asset']}  {r['amount']}" for r in rows]
    _print(args.format, {"reference": args.reference, "postings": rows}, lines)
    return 0


def _print(form: str, document: dict[str, object], lines: list[str]) -> None:
    if form == "json":
        sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write("".join(line + "\n" for line in lines))


def _run_program(args: argparse.Namespace) -> int:
    from pactwright.runtime.numscript.cli_support import run_from_json

    try:
        program = _read(args.program).decode("utf-8", errors="strict")
    except UnicodeDecodeError as exc:
        raise UsageError(f"`{args.program}` is not UTF-8 text (byte {exc.start})") from None
    balances = _read(args.balances) if args.balances else None
    result = run_from_json(program, _read(args.vars), balances)
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0
