"""`pactwright approvals list|show|grant|reject`: commands parked until an approver decides.

`list` and `show` only read; `show` prints the preview the approver decides
on (operation, targets, consequence, postings, each call's reversibility,
risk and payload digest, the manifest hash, the expiry). `grant ID --key
APPROVER.key --as PARTY` signs `{"approval": ID, "preview_digest": DIGEST,
"decision": "grant"}` with the approver's private key, here, and hands the
signature to the runtime, which checks it against the key registered for
the approval's role and commits the parked command; the signature is never
stored or printed, only its digest. `reject` records a refusal the same way.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pactwright.cli._runtime_args import add_clock, add_store, clock, upgraded
from pactwright.runtime.clock import utc_text

if TYPE_CHECKING:
    from pactwright.runtime.approvals import ApprovalRequest


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True, parser_class=type(parser))
    listing = sub.add_parser("list", help="list approval requests", description="list approval requests")
    add_store(listing)
    listing.add_argument("--status", choices=("pending", "consumed", "rejected"), help="only requests in this status")
    listing.add_argument("--agreement", metavar="ID", help="only this agreement's requests")
    add_clock(listing)
    listing.add_argument("--format", choices=("text", "json"), default="text")
    show = sub.add_parser("show", help="show one request's preview", description="show one request's preview")
    show.add_argument("id", metavar="ID")
    add_store(show)
    add_clock(show)
    show.add_argument("--format", choices=("text", "json"), default="text")
    for name, verb in (("grant", "grant a parked command and commit it"), ("reject", "reject a parked command")):
        decide = sub.add_parser(name, help=verb, description=verb)
        decide.add_argument("id", metavar="ID")
        decide.add_argument("--key", required=True, metavar="APPROVER.key", help="the approver's private key file")
        decide.add_argument("--as", dest="party", required=True, metavar="PARTY", help="the approving party")
        decide.add_argument("--digest", metavar="DIGEST", help="refuse unless the preview digest is this one")
        add_store(decide)
        add_clock(decide)
        decide.add_argument("--format", choices=("text", "json"), default="text")


def preview_lines(preview: Mapping[str, Any]) -> list[str]:
    """The preview for people: what runs, against what, with which consequence, until when."""
    op = preview["operation"]
    effects = ", ".join(op["effects"]) or "no effect"
    need = preview["approval"]
    slots = need.get("approvers") or [need["role"]]
    if len(slots) > 1:  # four eyes (new in 1.1): every required approval, from distinct parties
        kind = f"{len(slots)} x {slots[0]} (any registered party)" if need.get("registry") else ", ".join(slots)
        who = f"{kind}, distinct parties"
    else:
        who = f"{need['role']}"
    who += " (not the requester)" if need["not_requester"] else ""
    out = [
        f"  operation:   {op['transition']} ({op['from']} -> {op['to']}), calls {effects}",
        f"  requested:   by {preview['requested_by']['role']}:{preview['requested_by']['party']} at "
        f"{utc_text(int(preview['requested_at']))}; expires {utc_text(int(preview['expires_at']))}",
        f"  approval by: {who}",
    ]
    out += [f"  consequence: {text}" for text in preview["consequence"]]
    for p in preview["postings"]:
        out.append(f"  posting:     {p['source']} ({p['source_address']}) -> {p['destination']} "
                   f"({p['destination_address']})  {p['amount']}")  # fmt: skip
    for call in preview["calls"]:
        amount = f", carries {call['amount']}" if call["amount"] else ""
        out.append(f"  call {call['index']}:      {call['effect']} -> {call['destination']}{amount}")
        out.append(f"               reversibility {call['reversibility']}, risk {call['risk']}, "
                   f"strategy {call['strategy']}")  # fmt: skip
        out.append(f"               idempotency key {call['idempotency_key']}")
        out.append(f"               payload digest {call['payload_digest']}")
    out.append(f"  manifest:    {preview['manifest_hash']}")
    out.append(f"  command:     {preview['command_digest']}")
    return out


def request_text(request: ApprovalRequest, now: int) -> str:
    head = f"approval request {request.id} for agreement {request.agreement_id}: {request.state_at(now)}"
    lines = [head, *preview_lines(request.preview), f"  preview digest {request.preview_digest}"]
    if request.decided_by is not None:
        event = f"; event {request.event_id}" if request.event_id else ""
        lines.append(f"  decided by {request.decided_by} at {utc_text(request.decided_at or 0)}; proof digest "
                     f"{request.proof_digest}{event}")  # fmt: skip
    return "\n".join(lines) + "\n"


def _write(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _proof(args: argparse.Namespace, decision: str) -> str:
    """The approver's signature over the decision statement, made here with the private key file."""
    from pactwright.errors import EffectError
    from pactwright.keys import load_private_key, too_open
    from pactwright.runtime.approvals import get_request
    from pactwright.runtime.store import open_store
    from pactwright.signing import sign_statement

    private_key = load_private_key(args.key)
    if too_open(args.key):
        sys.stderr.write(f"warning: `{args.key}` is readable by other users; `chmod 600 {args.key}`\n")
    with open_store(args.store, migrate_schema=False) as store:
        request = get_request(store, args.id)
    if args.digest is not None and args.digest != request.preview_digest:
        raise EffectError(f"approval request `{request.id}` has another preview than the one given",
                          code="PW603", field="digest", expected=args.digest, found=request.preview_digest)  # fmt: skip
    return sign_statement(private_key, request.statement(decision))


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime import approvals
    from pactwright.runtime.clock import epoch_seconds
    from pactwright.runtime.store import open_store

    if args.action in ("grant", "reject"):
        proof = _proof(args, args.action)
        with upgraded(open_store(args.store, migrate_schema=False)) as store:
            if args.action == "grant":
                result = approvals.grant(store, args.id, args.party, proof, clock(args))
                decided = approvals.get_request(store, args.id)
            else:
                decided = approvals.reject(store, args.id, args.party, proof, clock(args))
        if args.format == "json":
            _write({"request": decided.to_json(), **({"result": result.to_json()} if args.action == "grant" else {})})
        elif args.action == "grant":
            sys.stdout.write(f"granted {decided.id} by {args.party}: committed {result.event_id} {result.transition} "
                             f"-> {result.state}  version {result.version}\n")  # fmt: skip
            for call in result.effects:
                sys.stdout.write(f"  effect {call['instance']} {call['effect']} prepared for {call['destination']}\n")
        else:
            sys.stdout.write(f"rejected {decided.id} by {args.party}: the command will not run\n")
        return 0
    now = epoch_seconds(clock(args))
    with open_store(args.store, migrate_schema=False) as store:
        if args.action == "show":
            request = approvals.get_request(store, args.id)
            if args.format == "json":
                _write(request.to_json())
            else:
                sys.stdout.write(request_text(request, now))
            return 0
        found = approvals.list_requests(store, status=args.status, agreement_id=args.agreement)
    if args.format == "json":
        _write([r.to_json() for r in found])
        return 0
    lines = []
    for r in found:
        state = "ALTERED" if r.problem else r.state_at(now)
        consequence = "; ".join(r.preview.get("consequence", [])) if not r.problem else r.problem
        lines.append(f"{r.id}  {state:<9} {r.agreement_id} {r.transition} by {r.requester_role}:{r.requester_party}"
                     f"  expires {utc_text(r.expires_at)}  {consequence}")  # fmt: skip
    sys.stdout.write("\n".join([*lines, f"{len(found)} requests"]) + "\n")
    return 0
