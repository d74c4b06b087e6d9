"""`pactwright parties add PARTY --role ROLE [--public-key FILE.pub] --store URL` and `parties list`.

The store's party registry (`pactwright.runtime.parties`): which party holds
which role beyond one agreement, with the ed25519 public key its approval
grants verify under, and the reserved role `operator` for whoever resolves
parked effects. Adding the same key again changes nothing; another key for
a registered (party, role) is refused (PW612).
"""

from __future__ import annotations

import argparse
import json
import sys

from pactwright.cli._runtime_args import add_clock, add_store, clock


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    add = sub.add_parser("add", help="register a party's role (and its key)", description="register a party's role")
    add.add_argument("party", metavar="PARTY")
    add.add_argument("--role", required=True, metavar="ROLE", help="a pact role name, or `operator`")
    add.add_argument("--public-key", metavar="FILE.pub", help="the party's ed25519 public key (from `keygen`)")
    add_store(add)
    add_clock(add)
    add.add_argument("--format", choices=("text", "json"), default="text")
    listing = sub.add_parser("list", help="list registered parties", description="list registered parties")
    add_store(listing)
    listing.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.clock import epoch_seconds
    from pactwright.runtime.parties import add_party, list_parties
    from pactwright.runtime.store import open_store
    from pactwright.runtime.store._migrations import EFFECT_TABLES

    with open_store(args.store, migrate_schema=False) as store:
        if args.action == "list":
            found = list_parties(store)
            if args.format == "json":
                sys.stdout.write(json.dumps([p.to_json() for p in found], indent=2, sort_keys=True) + "\n")
                return 0
            lines = [f"{p.party:<20} {p.role:<20} {p.keyid or '(no key)'}" for p in found]
            sys.stdout.write("\n".join([*lines, f"{len(found)} parties"]) + "\n")
            return 0
        raw = None
        if args.public_key:
            from pactwright.keys import load_public_key
            from pactwright.signing import raw_public_key

            raw = raw_public_key(load_public_key(args.public_key))
        now = epoch_seconds(clock(args))
        if store.schema_version() < EFFECT_TABLES:
            store.migrate()  # an existing store made by an earlier release gains the registry
        party = add_party(store, args.party, args.role, raw, now)
    if args.format == "json":
        sys.stdout.write(json.dumps(party.to_json(), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(f"{party.party} holds {party.role}  key {party.keyid or '(none)'}\n")
    return 0
