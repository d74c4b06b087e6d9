"""The API's operations as data: one table gives both the Starlette routes and `/openapi.json`.

Each `Operation` names its handler, its request model, its parameters and
every status it can answer with; `routes()` mounts them and `openapi()`
writes the OpenAPI 3.1 document from the same rows and the same pydantic
models the handlers validate with, so what is published is what runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pactwright import __version__
from pactwright.service import _agreements as agreements
from pactwright.service import _models as m
from pactwright.service import _operations as ops
from pactwright.service import _probes as probes
from pactwright.service import _review_routes as review
from pactwright.service._context import authenticated, service_of
from pactwright.service._http import MAX_BODY, endpoint
from pactwright.service._problems import PROBLEM_TYPE, ServiceError

__all__ = ["OPERATIONS", "Operation", "Param", "openapi", "routes"]

Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True)
class Param:
    name: str
    where: str  # "path", "query" or "header"
    schema: dict[str, Any]
    description: str
    required: bool = False


@dataclass(frozen=True)
class Operation:
    method: str
    path: str  # as OpenAPI writes it
    handler: Handler
    operation_id: str
    summary: str
    ok: dict[int, type[BaseModel] | str]  # success status -> response model, or a media type
    errors: tuple[int, ...]
    body: type[BaseModel] | None = None
    params: tuple[Param, ...] = ()
    auth: bool = True
    tag: str = "agreements"
    route: str | None = None  # the Starlette path, when it differs (`{id:path}`)
    headers: dict[int, dict[str, str]] = field(default_factory=dict)  # status -> header -> description
    # status -> operationId -> the runtime expression of that operation's `id` path parameter (OpenAPI links)
    links: dict[int, dict[str, str]] = field(default_factory=dict)


_ID = {"type": "string", "minLength": 1, "maxLength": 200}


def _path(name: str, description: str) -> Param:
    return Param(name, "path", _ID, description, required=True)


AGREEMENT = _path("id", "the agreement id")
APPROVAL = _path("id", "the approval request id (`apr-...`)")
EFFECT = _path("id", "the effect call id, `AGREEMENT/SEQ/eINDEX` (slashes may be sent as `%2F`)")
_READ = (401, 404, 422, 500, 503)
_OF_AGREEMENT = ("showAgreement", "listEvents", "submitCommand", "showEvidence", "verifyEvidence", "reviewAgreement")


def _agreement_links(expression: str) -> dict[str, str]:
    """Links from a response naming an agreement to every operation on it: what a client does next."""
    return dict.fromkeys(_OF_AGREEMENT, expression)


_COMMAND_LINKS = _agreement_links("$response.body#/agreement")
_WRITE = (400, 401, 403, 404, 409, 413, 415, 422, 500, 503)

OPERATIONS: tuple[Operation, ...] = (
    Operation("GET", "/healthz", probes.healthz, "healthz", "the process is up", {200: m.Health}, (500,),
              auth=False, tag="operations"),
    Operation("GET", "/readyz", probes.readyz, "readyz", "the store and ledger are reachable, migrations current",
              {200: m.Readiness}, (500, 503), auth=False, tag="operations"),
    Operation("GET", "/metrics", probes.metrics, "metrics", "Prometheus text: commands, outbox, effects, latency",
              {200: "text/plain"}, (500,), auth=False, tag="operations"),
    Operation("POST", "/v1/agreements", agreements.open_agreement, "openAgreement",
              "open an agreement on the active version of a pact", {201: m.OpenedAgreement}, _WRITE,
              body=m.OpenAgreement, headers={201: {"Location": "the new agreement's URL"}},
              links={201: _agreement_links("$response.body#/id")}),
    Operation("GET", "/v1/agreements/{id}", agreements.show_agreement, "showAgreement",
              "the agreement as committed, its pending outbox, last events and ledger balances",
              {200: m.Agreement}, _READ, params=(AGREEMENT,)),
    Operation("GET", "/v1/agreements/{id}/events", agreements.events, "listEvents", "the agreement's last events",
              {200: m.EventList}, _READ,
              params=(AGREEMENT, Param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 1000},
                                       "how many of the last events (default 100)"))),
    Operation("POST", "/v1/agreements/{id}/commands", agreements.submit_command, "submitCommand",
              "run one command as the token's party: 201 committed, 200 replayed or dry run, 202 parked for approval",
              {201: m.CommandResult, 200: m.CommandResult, 202: m.CommandResult}, _WRITE, body=m.SubmitCommand,
              params=(AGREEMENT, Param("Idempotency-Key", "header", {"type": "string", "minLength": 1,
                                                                       "maxLength": 200},
                                       "the command's idempotency key: a retry sends the same one", True)),
              links={201: _COMMAND_LINKS, 200: _COMMAND_LINKS,
                     202: {**_COMMAND_LINKS, "showApproval": "$response.body#/approval/id"}}),
    Operation("GET", "/v1/agreements/{id}/evidence", agreements.evidence, "showEvidence",
              "the evidence: claim, what supports it, what it does not prove", {200: m.Evidence}, _READ,
              params=(AGREEMENT,)),
    Operation("GET", "/v1/agreements/{id}/evidence/verification", agreements.verification, "verifyEvidence",
              "the evidence hash chain re-walked", {200: m.Verification}, _READ,
              params=(AGREEMENT, Param("expect_head", "query", _ID, "refuse unless the chain's head is this hash"))),
    Operation("GET", "/v1/approvals", ops.list_approvals, "listApprovals", "approval requests, oldest first",
              {200: m.ApprovalList}, _READ, tag="approvals",
              params=(Param("status", "query", {"type": "string", "enum": list(ops.STATUSES)}, "only this status"),
                      Param("agreement", "query", _ID, "only this agreement's requests"))),
    Operation("GET", "/v1/approvals/{id}", ops.show_approval, "showApproval",
              "one approval request with the preview the approver decides on", {200: m.Approval}, _READ,
              params=(APPROVAL,), tag="approvals"),
    Operation("POST", "/v1/approvals/{id}/grant", ops.decide("grant"), "grantApproval",
              "grant a parked command with the approver's signed proof, and commit it", {200: m.GrantResult},
              _WRITE, body=m.Decision, params=(APPROVAL,), tag="approvals"),
    Operation("POST", "/v1/approvals/{id}/reject", ops.decide("reject"), "rejectApproval",
              "reject a parked command with the approver's signed proof", {200: m.Approval}, _WRITE,
              body=m.Decision, params=(APPROVAL,), tag="approvals"),
    Operation("GET", "/v1/effects", ops.list_effects, "listEffects", "effect calls in commit order",
              {200: m.EffectList}, _READ, tag="effects",
              params=(Param("parked", "query", {"type": "string", "enum": ["true", "false"]},
                            "only calls parked for an operator"),
                      Param("agreement", "query", _ID, "only this agreement's calls"))),
    Operation("POST", "/v1/effects/{id}/reconcile", ops.reconcile_effect, "reconcileEffect",
              "resolve a parked call as found at the provider, or not (operator)", {200: m.Effect}, _WRITE,
              body=m.Reconcile, params=(EFFECT,), tag="effects", route="/v1/effects/{id:path}/reconcile"),
    Operation("POST", "/v1/effects/{id}/abandon", ops.abandon_effect, "abandonEffect",
              "give a parked call up as `may have occurred` (operator)", {200: m.Effect}, _WRITE,
              body=m.Abandon, params=(EFFECT,), tag="effects", route="/v1/effects/{id:path}/abandon"),
    Operation("GET", "/v1/bundles", ops.active_bundles, "listActiveBundles", "the active version of every pact",
              {200: m.ActiveBundleList}, (401, 500, 503), tag="bundles"),
    Operation("GET", "/review/bundles/{manifest_hash}", review.bundle_page, "reviewBundle",
              "the review page of a stored bundle (HTML)", {200: "text/html"}, _READ, tag="review",
              params=(Param("manifest_hash", "path", {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                            "the bundle's manifest hash", True),)),
    Operation("GET", "/review/agreements/{id}", review.agreement_page, "reviewAgreement",
              "the review page of an agreement (HTML)", {200: "text/html"}, _READ, tag="review",
              params=(AGREEMENT,)),
)  # fmt: skip


def _known_query(operation: Operation) -> Handler:
    """The handler behind a refusal of query parameters the operation does not declare (PW684), as bodies
    refuse unknown fields: a misspelt filter (`?parkd=true`) must not quietly answer the unfiltered list."""
    known = sorted(p.name for p in operation.params if p.where == "query")

    async def handler(request: Request) -> Response:
        unknown = sorted(set(request.query_params) - set(known))
        if unknown:
            name = unknown[0][:40]
            raise ServiceError(f"unknown query parameter `{name}`", code="PW684", field=name,
                               expected=", ".join(known) or "no query parameters")  # fmt: skip
        return await operation.handler(request)

    return handler


def _counted(operation: Operation) -> Handler:
    checked = _known_query(operation)
    inner = endpoint(authenticated(checked) if operation.auth else checked)  # the token before anything else

    async def handler(request: Request) -> Response:
        response = await inner(request)
        service_of(request).counters.request(operation.method, operation.path, response.status_code)
        return response

    handler.__name__ = operation.operation_id
    return handler


async def openapi_json(request: Request) -> Response:
    from pactwright.service._http import json_response

    return json_response(request.app.state.openapi)


def routes() -> list[Route]:
    mounted = [Route(op.route or op.path, _counted(op), methods=[op.method]) for op in OPERATIONS]
    return [*mounted, Route("/openapi.json", openapi_json, methods=["GET"])]


# OpenAPI -------------------------------------------------------------------------------------------------

_REASONS = {
    200: "OK",
    201: "Created",
    202: "Accepted (parked for approval)",
    400: "malformed JSON",
    401: "no valid bearer token",
    403: "the token's party may not do this",
    404: "not found",
    409: "conflicts with what the store holds",
    413: f"body larger than {MAX_BODY} bytes",
    415: "body is not application/json",
    422: "does not match the schema or the pact",
    500: "internal error or a stored record that cannot be read",
    503: "store or ledger unavailable",
}


def _schema(model: type[BaseModel], components: dict[str, Any], mode: str) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}", mode=mode)  # type: ignore[arg-type]
    for name, sub in schema.pop("$defs", {}).items():
        components[name] = sub
    components[model.__name__] = schema
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _operation(op: Operation, components: dict[str, Any]) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, what in op.ok.items():
        if isinstance(what, str):
            content = {what: {"schema": {"type": "string"}}}
        else:
            content = {"application/json": {"schema": _schema(what, components, "serialization")}}
        entry: dict[str, Any] = {"description": _REASONS[status], "content": content}
        if status in op.headers:
            entry["headers"] = {name: {"description": text, "schema": {"type": "string"}}
                                for name, text in op.headers[status].items()}  # fmt: skip
        if status in op.links:
            entry["links"] = {target: {"operationId": target, "parameters": {"path.id": expression}}
                              for target, expression in op.links[status].items()}  # fmt: skip
        responses[str(status)] = entry
    problem = {PROBLEM_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for status in op.errors:
        responses[str(status)] = {"description": _REASONS[status], "content": problem}
    out: dict[str, Any] = {"operationId": op.operation_id, "summary": op.summary, "tags": [op.tag],
                           "responses": responses}  # fmt: skip
    if op.params:
        out["parameters"] = [{"name": p.name, "in": p.where, "required": p.required, "description": p.description,
                              "schema": p.schema} for p in op.params]  # fmt: skip
    if op.body is not None:
        schema = _schema(op.body, components, "validation")
        out["requestBody"] = {"required": True, "content": {"application/json": {"schema": schema}}}
    out["security"] = [{"bearer": []}] if op.auth else []
    return out


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of `OPERATIONS`."""
    components: dict[str, Any] = {}
    _schema(m.Problem, components, "serialization")
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, components)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "pactwright",
            "version": __version__,
            "description": "The runtime over HTTP: agreements, commands, approvals, effects, evidence. "
            "Every error is an RFC 9457 problem document with a stable PW code.",
        },
        "paths": paths,
        "components": {
            "schemas": dict(sorted(components.items())),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "a token from `pactwright parties token`"}
            },
        },
    }
