"""Approvals, effect calls and active bundles: the endpoints an approver or an operator uses.

- Granting or rejecting needs the approver's ed25519 signature in the body
  (`proof`, as `pactwright approvals grant` makes it): the token's party is
  the approver, and the runtime checks that it holds the approval role in
  the agreement and that the proof verifies under the key the party
  registry holds for it (PW605-PW608). A token alone never approves.
- Reconciling or abandoning an effect call needs a token whose party holds
  `operator` (PW672), which the runtime checks again in the registry
  (PW641). A call's id is `AGREEMENT/SEQ/eINDEX` (`GET /v1/effects`), so
  its agreement is the id's first segment.

Lists show only the requests and calls the token may see, and a request it
may not see is answered, shown or decided, as an unknown one (`_scope.py`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from pactwright.errors import CommandError
from pactwright.runtime.tokens import Principal, require_role
from pactwright.service import _models as m
from pactwright.service._context import as_principal, service_of
from pactwright.service._http import json_response, query_bool, query_text, read_model
from pactwright.service._pool import Resources
from pactwright.service._scope import require_approval_visible, visible_approvals, visible_effects

__all__ = ["abandon_effect", "active_bundles", "decide", "list_approvals", "list_effects", "reconcile_effect",
           "show_approval"]  # fmt: skip

OPERATOR = "operator"
STATUSES = ("pending", "consumed", "rejected")


def _effect_agreement(effect_id: str) -> str:
    """The agreement of an effect call id; an id holding a NUL names no call (PostgreSQL text cannot hold one),
    answered as the runtime answers an unknown call (PW640) rather than as a database error."""
    agreement = effect_id.partition("/")[0]
    if "\x00" in effect_id:
        raise CommandError(f"agreement `{agreement}` has no effect call `{effect_id}`", code="PW640",
                           field="effect", hint="list them with `pactwright effects list --agreement ID`")  # fmt: skip
    return agreement


async def list_approvals(request: Request) -> Response:
    """GET /v1/approvals[?status=S][&agreement=ID]: approval requests, oldest first."""
    status = query_text(request, "status", STATUSES)
    agreement = query_text(request, "agreement")

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.approvals import list_requests

        found = [r.to_json() for r in list_requests(res.store, status=status, agreement_id=agreement)]
        return visible_approvals(res.store, principal, found)

    found = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.ApprovalList, {"data": found}))


async def show_approval(request: Request) -> Response:
    """GET /v1/approvals/{id}: one request with the preview an approver decides on."""
    request_id = request.path_params["id"]

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.approvals import get_request

        require_approval_visible(res.store, principal, request_id)
        return get_request(res.store, request_id).to_json()

    doc = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.Approval, doc))


def decide(decision: str) -> Any:
    """The handler of POST /v1/approvals/{id}/grant or /reject."""

    async def handler(request: Request) -> Response:
        request_id = request.path_params["id"]
        body = await read_model(request, m.Decision)

        def job(res: Resources, principal: Principal) -> Any:
            from pactwright.runtime import approvals

            require_approval_visible(res.store, principal, request_id)
            if decision == "grant":
                result = approvals.grant(res.store, request_id, principal.party, body.proof, res.clock)
                decided = approvals.get_request(res.store, request_id)
                return {"request": decided.to_json(), "result": result.to_json()}
            return approvals.reject(res.store, request_id, principal.party, body.proof, res.clock).to_json()

        doc = await service_of(request).pool.run(as_principal(request, job))
        return json_response(m.dump(m.GrantResult if decision == "grant" else m.Approval, doc))

    handler.__name__ = f"{decision}_approval"
    return handler


async def list_effects(request: Request) -> Response:
    """GET /v1/effects[?parked=true][&agreement=ID]: effect calls in commit order."""
    parked = query_bool(request, "parked")
    agreement = query_text(request, "agreement")

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.effect_ops import list_effects as listed

        found = [r.to_json() for r in listed(res.store, parked=parked, agreement_id=agreement)]
        return visible_effects(res.store, principal, found)

    found = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.EffectList, {"data": found}))


async def reconcile_effect(request: Request) -> Response:
    """POST /v1/effects/{id}/reconcile: resolve a parked call as found at the provider, or not."""
    effect_id = request.path_params["id"]
    body = await read_model(request, m.Reconcile)

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.effect_ops import reconcile

        require_role(principal, OPERATOR)
        agreement = _effect_agreement(effect_id)
        return reconcile(res.store, agreement, effect_id, body.resolution, principal.party,
                         provider_ref=body.provider_ref, clock=res.clock).to_json()  # fmt: skip

    doc = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.Effect, doc))


async def abandon_effect(request: Request) -> Response:
    """POST /v1/effects/{id}/abandon: give a parked call up as `may have occurred`."""
    effect_id = request.path_params["id"]
    body = await read_model(request, m.Abandon)

    def job(res: Resources, principal: Principal) -> Any:
        from pactwright.runtime.effect_ops import abandon

        require_role(principal, OPERATOR)
        agreement = _effect_agreement(effect_id)
        return abandon(res.store, agreement, effect_id, body.reason, principal.party, clock=res.clock).to_json()

    doc = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.Effect, doc))


async def active_bundles(request: Request) -> Response:
    """GET /v1/bundles: the active version of every pact."""

    def job(res: Resources, principal: Principal) -> Any:
        return [{"pact_id": a.pact_id, "pact_version": a.pact_version, "manifest_hash": a.manifest_hash,
                 "activation_id": a.activation_id} for a in res.store.actives()]  # fmt: skip

    found = await service_of(request).pool.run(as_principal(request, job))
    return json_response(m.dump(m.ActiveBundleList, {"data": found}))
