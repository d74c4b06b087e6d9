"""`pactwright trust add|revoke|threshold|list`: the only writer of `trust.json`.

Every subcommand reads and validates the whole file first (a hand-edited or
damaged file is refused, never silently rewritten) and writes it back in one
rename, so activation never reads a half-written trust file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pactwright.trust import DEFAULT_TRUST_PATH, Trust


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"`{text}` is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"threshold `{value}` must be at least 1")
    return value


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="trust_command", metavar="SUBCOMMAND", required=True)
    add = sub.add_parser("add", help="trust a public key for roles (and optionally only some pacts)")
    add.add_argument("public_key", metavar="PUBKEY", help="the key's `.pub` file (PEM)")
    add.add_argument("--role", action="append", required=True, choices=("approver", "signer"), dest="roles")
    add.add_argument("--scope", action="append", metavar="ID", help="a pact id the key may act on (repeatable)")
    add.add_argument("--name", metavar="NAME", help="whose key it is: `approve --approver` must give this name")
    revoke = sub.add_parser("revoke", help="revoke a key (it stays listed as revoked)")
    revoke.add_argument("keyid", metavar="KEYID")
    threshold = sub.add_parser("threshold", help="how many distinct trusted signers activation requires")
    threshold.add_argument("threshold", metavar="N", type=_at_least_one)
    show = sub.add_parser("list", help="show the trusted keys and the threshold")
    show.add_argument("--format", choices=("text", "json"), default="text")
    for command in (add, revoke, threshold, show):
        command.add_argument("--file", default=DEFAULT_TRUST_PATH, metavar="TRUST", help="default: trust.json")


def _load_or_new(path: str) -> Trust:
    from pactwright.trust import load_trust

    return load_trust(path) if Path(path).exists() else Trust()


def _describe(trust: Trust, keyid: str) -> str:
    key = trust.get(keyid)
    assert key is not None
    scope = ", ".join(key.scope) if key.scope is not None else "any pact"
    state = "  REVOKED" if key.revoked else ""
    name = f"  name: {key.name}" if key.name is not None else ""
    return f"{key.keyid}  {','.join(key.roles)}  scope: {scope}{name}{state}"


def _warn_threshold(trust: Trust, path: str) -> None:
    signers = trust.active_signers()
    if signers < trust.threshold:
        sys.stderr.write(
            f"warning: `{path}` requires {trust.threshold} signer(s) but trusts {signers} unrevoked signer key(s); "
            "activation will refuse every bundle until enough signers are added\n"
        )


def run(args: argparse.Namespace) -> int:
    from pactwright.keys import load_public_key
    from pactwright.signing import key_id
    from pactwright.trust import add_key, load_trust, revoke_key, set_threshold, write_trust

    path: str = args.file
    if args.trust_command == "list":
        trust = load_trust(path)
        if args.format == "json":
            sys.stdout.write(json.dumps(trust.to_json(), indent=2) + "\n")
            return 0
        sys.stdout.write(f"{path}: threshold {trust.threshold}, {len(trust.keys)} key(s)\n")
        for key in trust.keys:
            sys.stdout.write(_describe(trust, key.keyid) + "\n")
        return 0
    if args.trust_command == "add":
        public_key = load_public_key(args.public_key)
        before = _load_or_new(path)
        keyid = key_id(public_key)
        trust = add_key(before, public_key, args.roles, args.scope, args.name)
        write_trust(path, trust)
        verb = "updated" if before.get(keyid) is not None else "added"
        sys.stdout.write(f"{verb} {_describe(trust, keyid)}\n")
    elif args.trust_command == "revoke":
        trust = revoke_key(load_trust(path), args.keyid)
        write_trust(path, trust)
        sys.stdout.write(f"revoked {_describe(trust, args.keyid)}\n")
    else:
        trust = set_threshold(_load_or_new(path), args.threshold)
        write_trust(path, trust)
        sys.stdout.write(f"{path}: threshold {trust.threshold}\n")
    _warn_threshold(trust, path)
    return 0
