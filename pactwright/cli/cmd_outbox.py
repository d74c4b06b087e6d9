"""`pactwright outbox list --store URL [--quarantined] [--format text|json]`: the outbox entries.

Every entry with its status, attempts and reference; a quarantined entry
shows both sides: the postings expected at commit and what the ledger
returned, with the reason. Reads only.
"""

from __future__ import annotations

import argparse
import json
import sys

from pactwright.cli._runtime_args import add_store


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    listing = sub.add_parser("list", help="list outbox entries", description="list outbox entries")
    add_store(listing)
    listing.add_argument("--quarantined", action="store_true", help="only the quarantined entries")
    listing.add_argument("--agreement", metavar="ID", help="only this agreement's entries")
    listing.add_argument("--format", choices=("text", "json"), default="text")


def _postings(value: object) -> str:
    if not isinstance(value, list):
        return "-" if value is None else str(value)
    return "; ".join(
        f"{p['source_address']} -> {p['destination_address']} {p['amount']} {p['asset']}" if isinstance(p, dict)
        else str(p)
        for p in value
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.outbox import list_entries
    from pactwright.runtime.store import open_store

    with open_store(args.store, migrate_schema=False) as store:
        entries = list_entries(store, quarantined=args.quarantined, agreement_id=args.agreement)
    if args.format == "json":
        sys.stdout.write(json.dumps([e.to_json() for e in entries], indent=2, sort_keys=True) + "\n")
        return 0
    out = []
    for e in entries:
        out.append(f"{e.reference:<24} {e.status:<11} attempts {e.attempts}  {e.program}")
        if e.status == "quarantined":
            out.append(f"  expected: {_postings(e.expected_postings)}")
            out.append(f"  ledger:   {_postings(e.ledger_postings)}")
        if e.last_error:
            out.append(f"  reason:   {e.last_error}")
    out.append(f"{len(entries)} entries")
    sys.stdout.write("\n".join(out) + "\n")
    return 0
