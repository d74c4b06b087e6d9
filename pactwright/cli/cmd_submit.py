"""`pactwright submit AGREEMENT TRANSITION --as ROLE:PARTY --key KEY --store URL ...`: run one command.

One store transaction: every check of `pactwright.runtime.commands`, then
the event, the outbox rows and the new version. A refusal (PW5xx) exits 1
and writes nothing; `--dry-run` prints what would happen and writes nothing.
A repeated key with the same payload prints the original result.
"""

from __future__ import annotations

import argparse
import json
import sys

from pactwright.cli._runtime_args import add_clock, add_store, clock, existing_store, pairs


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agreement", metavar="AGREEMENT")
    parser.add_argument("transition", metavar="TRANSITION")
    parser.add_argument("--as", dest="actor", required=True, metavar="ROLE:PARTY", help="who submits the command")
    parser.add_argument("--key", required=True, metavar="KEY", help="idempotency key (a retry reuses it)")
    add_store(parser)
    parser.add_argument("--expect-version", type=int, metavar="N", help="refuse unless the agreement is at version N")
    parser.add_argument("--param", action="append", metavar="NAME=VALUE", help="a value the command states")
    parser.add_argument("--dry-run", action="store_true", help="compute the event and postings; write nothing")
    add_clock(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.errors import UsageError
    from pactwright.runtime.commands import submit

    role, found, party = str(args.actor).partition(":")
    if not found or not role or not party:
        raise UsageError(f"`--as {args.actor}` must be `--as ROLE:PARTY`")
    params, now = pairs(args.param, "--param"), clock(args)
    with existing_store(args.store, args.agreement) as store:
        result = submit(
            store,
            args.agreement,
            args.transition,
            role,
            party,
            args.key,
            expect_version=args.expect_version,
            params=params,
            dry_run=args.dry_run,
            clock=now,
        )
    if args.format == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n")
        return 0
    label = "would commit" if result.dry_run else ("already committed" if result.replayed else "committed")
    sys.stdout.write(f"{label} {result.event_id} {result.transition} -> {result.state}  version {result.version}\n")
    for p in result.postings:
        sys.stdout.write(f"  {p['source']} -> {p['destination']}  {p['amount']} {p['asset']}\n")
    for reference in result.outbox:
        sys.stdout.write(f"  outbox {reference}\n")
    return 0
