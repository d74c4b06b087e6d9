"""`pactwright parties add|list|token|revoke|tokens`: the party registry and the bearer tokens bound to it.

The store's party registry (`pactwright.runtime.parties`): which party holds
which role beyond one agreement, with the ed25519 public key its approval
grants verify under, and the reserved role `operator` for whoever resolves
parked effects. Adding the same key again changes nothing; another key for
a registered (party, role) is refused (PW612).

A bearer token (`pactwright.runtime.tokens`) lets a caller of the service act
as one registered party: `add ... --token` or `token NAME` prints it once;
the store keeps only its hash. `revoke` ends one for good; `tokens` lists
them without secrets.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from pactwright.cli._runtime_args import add_clock, add_store, clock

if TYPE_CHECKING:
    from pactwright.runtime.store import Store
    from pactwright.runtime.tokens import IssuedToken

_SHOWN_ONCE = "this token is shown once: store it now (the store keeps only its hash)"


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    add = sub.add_parser("add", help="register a party's role (and its key)", description="register a party's role")
    add.add_argument("party", metavar="PARTY")
    add.add_argument("--role", required=True, metavar="ROLE", help="a pact role name, or `operator`")
    add.add_argument("--public-key", metavar="FILE.pub", help="the party's ed25519 public key (from `keygen`)")
    add.add_argument("--token", action="store_true", help="also issue a bearer token for the party (shown once)")
    listing = sub.add_parser("list", help="list registered parties", description="list registered parties")
    token = sub.add_parser("token", help="issue a bearer token for a registered party (shown once)",
                           description="issue a bearer token for a registered party")  # fmt: skip
    token.add_argument("party", metavar="PARTY")
    revoke = sub.add_parser("revoke", help="revoke a bearer token", description="revoke a bearer token for good")
    revoke.add_argument("token_id", metavar="TOKEN_ID")
    tokens = sub.add_parser("tokens", help="list bearer tokens (never their secrets)",
                            description="list bearer tokens")  # fmt: skip
    for command in (add, listing, token, revoke, tokens):
        add_store(command)
    for command in (add, token, revoke):
        add_clock(command)
    for command in (add, listing, token, revoke, tokens):
        command.add_argument("--format", choices=("text", "json"), default="text")


def _write_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _token_text(issued: IssuedToken) -> str:
    return f"token {issued.token_id} for {issued.party}\n  {issued.token}\n{_SHOWN_ONCE}\n"


def _add(args: argparse.Namespace, store: Store, now: int) -> int:
    from pactwright.runtime.parties import add_party
    from pactwright.runtime.store._migrations import EFFECT_TABLES
    from pactwright.runtime.tokens import issue_token

    raw = None
    if args.public_key:
        from pactwright.keys import load_public_key
        from pactwright.signing import raw_public_key

        raw = raw_public_key(load_public_key(args.public_key))
    if store.schema_version() < EFFECT_TABLES:
        store.migrate()  # an existing store made by an earlier release gains the registry
    party = add_party(store, args.party, args.role, raw, now)
    issued = issue_token(store, party.party, now) if args.token else None
    if args.format == "json":
        doc = party.to_json()
        if issued is not None:
            doc["token"] = issued.to_json()
        _write_json(doc)
        return 0
    sys.stdout.write(f"{party.party} holds {party.role}  key {party.keyid or '(none)'}\n")
    if issued is not None:
        sys.stdout.write(_token_text(issued))
    return 0


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.clock import epoch_seconds
    from pactwright.runtime.parties import list_parties
    from pactwright.runtime.store import open_store
    from pactwright.runtime.tokens import issue_token, list_tokens, revoke_token

    with open_store(args.store, migrate_schema=False) as store:
        if args.action == "list":
            found = list_parties(store)
            if args.format == "json":
                _write_json([p.to_json() for p in found])
                return 0
            lines = [f"{p.party:<20} {p.role:<20} {p.keyid or '(no key)'}" for p in found]
            sys.stdout.write("\n".join([*lines, f"{len(found)} parties"]) + "\n")
            return 0
        if args.action == "tokens":
            listed = list_tokens(store)
            if args.format == "json":
                _write_json([t.to_json() for t in listed])
                return 0
            rows = [f"{t.token_id}  {t.party:<20} {'revoked' if t.revoked_at is not None else 'active'}"
                    for t in listed]  # fmt: skip
            sys.stdout.write("\n".join([*rows, f"{len(listed)} tokens"]) + "\n")
            return 0
        now = epoch_seconds(clock(args))
        if args.action == "add":
            return _add(args, store, now)
        if args.action == "token":
            issued = issue_token(store, args.party, now)
            if args.format == "json":
                _write_json(issued.to_json())
            else:
                sys.stdout.write(_token_text(issued))
            return 0
        revoke_token(store, args.token_id, now)
    if args.format == "json":
        _write_json({"token_id": args.token_id, "revoked": True})
    else:
        sys.stdout.write(f"revoked {args.token_id}\n")
    return 0
