"""Agreement endpoints: open, show, events, commands, evidence and its verification.

Each handler parses the request, then makes exactly the runtime calls the
matching CLI command makes, as the bearer token's party:

- opening needs the caller to be one of the parties it binds, under a role
  the token's party holds that is not the pact's clock role, or to hold
  `operator` (PW672 otherwise); nobody binds the clock role to a party
  (PW673: the scheduler acts as the role's own name);
- a command names only its role: the party is the token's, the role must be
  one it holds and never the pact's clock role (`tokens.authorize`, PW672,
  PW673), and the command path checks that the agreement binds that role to
  that party (PW508, checked before the idempotency key is looked up, so a
  caller the agreement does not bind learns nothing of its keys); the
  `Idempotency-Key` header is the command's key.

Reads (show, events, evidence, its verification) need the token's party to
be one of the agreement's parties, or `operator`; any other caller gets the
answer an unknown agreement gets (PW501, 404): see `_scope.py`.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pactwright.errors import PactwrightError
from pactwright.runtime.tokens import Principal, authorize, clock_bindings, require_readable, require_role
from pactwright.service import _models as m
from pactwright.service._context import as_principal, service_of
from pactwright.service._http import json_response, query_int, query_text, read_model
from pactwright.service._pool import Resources

__all__ = ["events", "evidence", "open_agreement", "show_agreement", "submit_command", "verification"]

OPERATOR = "operator"
MAX_EVENTS = 1000
log = logging.getLogger("pactwright.service")


def _may_open(principal: Principal, parties: dict[str, str], clock: frozenset[str]) -> None:
    """The caller binds itself under a role it holds, never a clock role, or is an operator (else PW672)."""
    if OPERATOR in principal.roles:
        return
    bound = sorted(role for role, party in parties.items() if party == principal.party and role not in clock)
    held = [role for role in bound if role in principal.roles]
    require_role(principal, (held or bound or [OPERATOR])[0])


async def open_agreement(request: Request) -> Response:
    """POST /v1/agreements: open an agreement on the pact's active version (201)."""
    body = await read_model(request, m.OpenAgreement)
    service = service_of(request)

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.agreements import open_agreement as open_

        _may_open(principal, body.parties, clock_bindings(res.store, body.pact_id, body.parties))
        return open_(res.store, body.pact_id, body.params, body.parties, agreement_id=body.id, clock=res.clock)

    agreement = await service.pool.run(as_principal(request, job))
    doc = {"id": agreement.id, "pact_id": agreement.pact_id, "manifest_hash": agreement.manifest_hash,
           "state": agreement.state, "version": agreement.version, "params": agreement.params,
           "parties": agreement.parties, "accounts": agreement.accounts}  # fmt: skip
    return json_response(m.dump(m.OpenedAgreement, doc), 201,
                         {"Location": f"/v1/agreements/{agreement.id}"})  # fmt: skip


def _ledger_or_none(res: Resources) -> Any:
    """The ledger for `ledger_balances`, or None (null in the response) when it cannot be opened."""
    try:
        return res.ledger
    except PactwrightError as exc:
        log.warning("ledger unavailable for show: %s %s", exc.code, exc.message)
        return None


async def show_agreement(request: Request) -> Response:
    """GET /v1/agreements/{id}: the agreement as committed, with its ledger balances."""
    agreement_id = request.path_params["id"]

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.agreements import show

        require_readable(res.store, principal, agreement_id)
        return show(res.store, agreement_id, ledger=_ledger_or_none(res)).to_json()

    doc = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.Agreement, doc))


async def events(request: Request) -> Response:
    """GET /v1/agreements/{id}/events?limit=N: the last N events, oldest first."""
    agreement_id = request.path_params["id"]
    limit = query_int(request, "limit", 100, 1, MAX_EVENTS)

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.agreements import show

        require_readable(res.store, principal, agreement_id)
        return show(res.store, agreement_id, last=limit).last_events

    found = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.EventList, {"data": found}))


async def submit_command(request: Request) -> Response:
    """POST /v1/agreements/{id}/commands: one command (201 committed, 200 replayed or dry run, 202 parked)."""
    agreement_id = request.path_params["id"]
    service = service_of(request)
    key = request.headers.get("idempotency-key", "")
    try:
        body = await read_model(request, m.SubmitCommand)

        def job(res: Resources, principal: Principal) -> tuple[Any, list[dict[str, Any]]]:
            from pactwright.runtime.approvals import dry_run
            from pactwright.runtime.commands import Command, submit

            authorize(res.store, principal, agreement_id, body.role)
            if body.dry_run:
                command = Command(body.transition, body.role, principal.party, key, body.params, body.expect_version)
                return dry_run(res.store, agreement_id, command, res.clock)
            result = submit(res.store, agreement_id, body.transition, body.role, principal.party, key,
                            expect_version=body.expect_version, params=body.params, clock=res.clock)  # fmt: skip
            return result, []

        result, requests = await service.pool.run(as_principal(request, job))
    except PactwrightError as exc:
        service.counters.command("refused", exc.code)
        raise
    doc = result.to_json()
    if result.dry_run:
        doc["would_send"] = requests
        outcome, status = "dry_run", 200
    elif result.status == "waiting_for_approval":
        outcome, status = "waiting_for_approval", 202
    else:
        outcome, status = ("replayed", 200) if result.replayed else ("committed", 201)
    service.counters.command(outcome)
    return json_response(m.dump(m.CommandResult, doc), status)


async def evidence(request: Request) -> Response:
    """GET /v1/agreements/{id}/evidence: the claim, what supports it and what it does not prove."""
    agreement_id = request.path_params["id"]

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.evidence import evidence as evidence_of

        require_readable(res.store, principal, agreement_id)
        return evidence_of(res.store, agreement_id).to_json()

    doc = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.Evidence, doc))


async def verification(request: Request) -> Response:
    """GET /v1/agreements/{id}/evidence/verification[?expect_head=H]: the hash chain re-walked."""
    agreement_id = request.path_params["id"]
    head = query_text(request, "expect_head")

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.evidence import verify_evidence

        require_readable(res.store, principal, agreement_id)
        return verify_evidence(res.store, agreement_id, head).to_json()

    doc = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.Verification, doc))
