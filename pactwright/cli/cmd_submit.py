"""`pactwright submit AGREEMENT TRANSITION --as ROLE:PARTY --key KEY --store URL ...`: run one command.

One store transaction: every check of `pactwright.runtime.commands`, then
the event, the outbox rows and the new version. A refusal (PW5xx) exits 1
and writes nothing; `--dry-run` prints what would happen, and for each
effect call the request that would be sent (method, declared URL,
idempotency key, payload digest, body), and sends and writes nothing.
A repeated key with the same payload prints the original result. A
transition that needs an approval is parked: the approval request's preview
is printed, and `pactwright approvals grant` commits it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pactwright.cli._runtime_args import add_clock, add_store, clock, existing_store, pairs


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agreement", metavar="AGREEMENT")
    parser.add_argument("transition", metavar="TRANSITION")
    parser.add_argument("--as", dest="actor", required=True, metavar="ROLE:PARTY", help="who submits the command")
    parser.add_argument("--key", required=True, metavar="KEY", help="idempotency key (a retry reuses it)")
    add_store(parser)
    parser.add_argument("--expect-version", type=int, metavar="N", help="refuse unless the agreement is at version N")
    parser.add_argument("--param", action="append", metavar="NAME=VALUE", help="a value the command states")
    parser.add_argument(
        "--dry-run", action="store_true", help="compute the event, postings and the requests effects would send"
    )
    add_clock(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.errors import UsageError
    from pactwright.runtime.approvals import dry_run
    from pactwright.runtime.commands import Command, submit

    role, found, party = str(args.actor).partition(":")
    if not found or not role or not party:
        raise UsageError(f"`--as {args.actor}` must be `--as ROLE:PARTY`")
    params, now = pairs(args.param, "--param"), clock(args)
    requests: list[dict[str, Any]] = []
    with existing_store(args.store, args.agreement, write=True) as store:
        if args.dry_run:
            command = Command(args.transition, role, party, args.key, params, args.expect_version)
            result, requests = dry_run(store, args.agreement, command, now)
        else:
            result = submit(
                store,
                args.agreement,
                args.transition,
                role,
                party,
                args.key,
                expect_version=args.expect_version,
                params=params,
                clock=now,
            )
    if args.format == "json":
        doc = result.to_json()
        if result.dry_run:
            doc |= {"would_send": requests, "sent": False, "written": False}
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        return 0
    sys.stdout.write(_text(result, requests))
    return 0


def _text(result: Any, requests: list[dict[str, Any]]) -> str:
    from pactwright.cli.cmd_approvals import preview_lines

    out = []
    if result.status == "waiting_for_approval":
        request = result.approval
        label = "would wait" if result.dry_run else "waiting"
        out.append(f"{label} for approval {request['id']}: {result.transition} is parked at version "
                   f"{result.version}, nothing committed")  # fmt: skip
        out += preview_lines(request["preview"])
        out.append(f"  preview digest {request['preview_digest']}")
        if not result.dry_run:
            out.append(f"grant it with `pactwright approvals grant {request['id']} --key APPROVER.key --as PARTY "
                       "--store URL`")  # fmt: skip
    else:
        label = "would commit" if result.dry_run else ("already committed" if result.replayed else "committed")
        out.append(f"{label} {result.event_id} {result.transition} -> {result.state}  version {result.version}")
        out += [f"  {p['source']} -> {p['destination']}  {p['amount']} {p['asset']}" for p in result.postings]
        out += [f"  outbox {reference}" for reference in result.outbox]
        if not result.dry_run:
            out += [f"  effect {c['instance']} {c['effect']} prepared for {c['destination']}" for c in result.effects]
    for request in requests:
        out.append(f"would send (effect {request['effect']}, call {request['index']}):")
        out.append(f"  {request['method']} {request['url']}")
        out.append(f"  Idempotency-Key: {request['idempotency_key']}")
        out.append(f"  payload digest {request['payload_digest']}")
        out.append(f"  body {request['body']}")
    if result.dry_run:
        out.append("dry run: nothing was sent and nothing was written")
    return "\n".join(out) + "\n"
