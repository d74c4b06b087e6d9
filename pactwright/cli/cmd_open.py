"""`pactwright open PACT_ID --store URL --param k=v ... --party role=name ... [--id ID]`: open an agreement.

The agreement runs on the pact's active version (its manifest hash is
recorded); params are validated against the bundle's declared types and
bounds. A refusal (PW501-PW520, PW70x) writes no agreement.
"""

from __future__ import annotations

import argparse
import json
import sys

from pactwright.cli._runtime_args import add_clock, add_store, clock, pairs


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pact_id", metavar="PACT_ID")
    add_store(parser)
    parser.add_argument("--param", action="append", metavar="NAME=VALUE", help="a param value (money as `64.90`)")
    parser.add_argument("--party", action="append", metavar="ROLE=PARTY", help="bind a role to a party")
    parser.add_argument("--id", metavar="ID", help="the agreement id (default: a new random one)")
    add_clock(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.errors import StoreError
    from pactwright.runtime.agreements import check_open, open_agreement
    from pactwright.runtime.store import open_store

    params, parties, now = pairs(args.param, "--param"), pairs(args.party, "--party"), clock(args)
    with open_store(args.store, migrate_schema=False) as probe:  # never create a store here
        empty = probe.schema_version() == 0
        if not empty:  # every refusal before the store is migrated: an older store stays as it was
            check_open(probe, args.pact_id, params, parties, agreement_id=args.id)
    if empty:
        raise StoreError(f"no version of `{args.pact_id}` is active (the store is empty)", code="PW702")
    with open_store(args.store) as store:
        agreement = open_agreement(store, args.pact_id, params, parties, agreement_id=args.id, clock=now)
    if args.format == "json":
        out = {"id": agreement.id, "pact_id": agreement.pact_id, "manifest_hash": agreement.manifest_hash,
               "state": agreement.state, "version": agreement.version, "accounts": agreement.accounts}  # fmt: skip
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
        return 0
    sys.stdout.write(
        f"opened {agreement.id}  {agreement.pact_id} on {agreement.manifest_hash}  state {agreement.state}\n"
    )
    return 0
