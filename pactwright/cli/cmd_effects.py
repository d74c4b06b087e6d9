"""`pactwright effects list|reconcile|abandon`: effect calls, and resolving the parked ones.

`list [--parked] [--agreement ID]` shows every call with its phase,
destination, idempotency key and provider reference. `reconcile AGREEMENT
EFFECT --resolution recovered_acknowledgement --provider-ref REF |
not_occurred --as PARTY` and `abandon AGREEMENT EFFECT --reason TEXT --as
PARTY` resolve a parked call; PARTY must hold `operator` in the store's
party registry (runtime/effect_ops.py). EFFECT is a call's id or, when the
agreement has one parked call of it, the effect's name.
"""

from __future__ import annotations

import argparse
import json
import sys

from pactwright.cli._runtime_args import add_clock, add_store, clock, upgraded


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    listing = sub.add_parser("list", help="list effect calls", description="list effect calls")
    add_store(listing)
    listing.add_argument("--parked", action="store_true", help="only calls parked for an operator")
    listing.add_argument("--agreement", metavar="ID", help="only this agreement's calls")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    reconcile = sub.add_parser("reconcile", help="resolve a parked call as found at the provider, or not")
    abandon = sub.add_parser("abandon", help="give a parked call up as `may have occurred`")
    for action in (reconcile, abandon):
        action.add_argument("agreement", metavar="AGREEMENT")
        action.add_argument("effect", metavar="EFFECT", help="the call's id, or its effect's name")
        add_store(action)
        action.add_argument("--as", dest="party", required=True, metavar="PARTY", help="an operator party")
        add_clock(action)
        action.add_argument("--format", choices=("text", "json"), default="text")
    reconcile.add_argument("--resolution", required=True, choices=("recovered_acknowledgement", "not_occurred"))
    reconcile.add_argument("--provider-ref", metavar="REF", help="the provider's reference for the write found")
    abandon.add_argument("--reason", required=True, metavar="TEXT")


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.effect_ops import abandon, list_effects, reconcile
    from pactwright.runtime.store import open_store

    with open_store(args.store, migrate_schema=False) as opened:
        store = opened if args.action == "list" else upgraded(opened)
        if args.action == "list":
            records = list_effects(store, parked=args.parked, agreement_id=args.agreement)
            if args.format == "json":
                sys.stdout.write(json.dumps([r.to_json() for r in records], indent=2, sort_keys=True) + "\n")
                return 0
            out = []
            for r in records:
                flag = "  QUARANTINED" if r.quarantined else ""
                ref = f"  ref {r.provider_ref}" if r.provider_ref else ""
                out.append(f"{r.id:<24} {r.effect:<18} {r.phase:<24} attempts {r.attempts}{ref}{flag}")
                out.append(f"  {r.destination}  key {r.idempotency_key}")
                if r.last_error:
                    out.append(f"  last: {r.last_error}")
                if r.resolution:
                    out.append(f"  resolved: {r.resolution} by {r.resolved_by}" + (f": {r.reason}" if r.reason else ""))
            out.append(f"{len(records)} calls")
            sys.stdout.write("\n".join(out) + "\n")
            return 0
        if args.action == "reconcile":
            record = reconcile(store, args.agreement, args.effect, args.resolution, args.party,
                               provider_ref=args.provider_ref, clock=clock(args))  # fmt: skip
        else:
            record = abandon(store, args.agreement, args.effect, args.reason, args.party, clock=clock(args))
    if args.format == "json":
        sys.stdout.write(json.dumps(record.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(f"{record.id} {record.effect}: {record.phase} ({record.resolution} by {record.resolved_by})\n")
    return 0
