"""`pactwright show AGREEMENT --store URL [--format text|json]`: an agreement as committed.

State, version, params, stamps, balances (minor units, as committed by the
command path), the same accounts as the ledger holds them (`--ledger URL`,
or the store's sibling ledger when it exists; null before any), pending
outbox entries and the last events. Reads only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import TYPE_CHECKING

from pactwright.cli._runtime_args import add_store, existing_store

if TYPE_CHECKING:
    from pactwright.runtime.ledger_db import DurableLedger


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agreement", metavar="AGREEMENT")
    add_store(parser)
    parser.add_argument(
        "--ledger", metavar="URL", help="the ledger to read balances from (default: the store's sibling)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _ledger(args: argparse.Namespace) -> contextlib.AbstractContextManager[DurableLedger | None]:
    """The named ledger (it must exist), else the store's sibling if it exists (no ledger yet: None)."""
    from pactwright.errors import PactwrightError
    from pactwright.runtime.ledger_db import open_ledger

    if args.ledger is not None:
        return open_ledger(args.ledger, args.store, create=False)
    try:
        return open_ledger(None, args.store, create=False)
    except PactwrightError:
        return contextlib.nullcontext()


def run(args: argparse.Namespace) -> int:
    from pactwright.money import format_money
    from pactwright.runtime.agreements import show

    with existing_store(args.store, args.agreement) as store, _ledger(args) as ledger:
        view = show(store, args.agreement, ledger=ledger)
    doc = view.to_json()
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return 0
    out = [f"agreement {doc['id']}  {doc['pact_id']}  state {doc['state']}  version {doc['version']}"]
    out.append("params:   " + ", ".join(f"{k}={v}" for k, v in sorted(doc["params"].items())))
    out.append("stamps:   " + (", ".join(f"{k}={v}" for k, v in sorted(doc["stamps"].items())) or "-"))
    out.append("balances:")
    out += [f"  {name:<12} {format_money(int(v), view.scale):>14}" for name, v in doc["balances"].items()]
    if doc["ledger_balances"] is not None:
        out.append("ledger balances:")
        out += [f"  {n:<12} {format_money(int(v), view.scale):>14}" for n, v in doc["ledger_balances"].items()]
    out.append(f"pending outbox: {len(doc['pending_outbox'])}")
    out += [f"  {e['reference']}  {e['program']}" for e in doc["pending_outbox"]]
    out.append("last events:")
    out += [
        f"  {e['event_id']}  {e['transition']}  by {e['actor']}  at {e['committed_at']}" for e in doc["last_events"]
    ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0
