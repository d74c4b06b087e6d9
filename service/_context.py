"""What every handler reaches through `request.app.state.service`: the runtime threads and the counters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from starlette.requests import Request
from starlette.responses import Response

from pactwright.runtime.clock import Clock
from pactwright.runtime.tokens import AuthenticationError, Principal, authenticate
from pactwright.service._metrics import Counters
from pactwright.service._pool import Pool, Resources

__all__ = ["Service", "as_principal", "authenticated", "service_of"]

T = TypeVar("T")
Handler = Callable[[Request], Awaitable[Response]]


@dataclass
class Service:
    store_url: str
    ledger_url: str | None
    clock: Clock
    pool: Pool
    counters: Counters


def service_of(request: Request) -> Service:
    service: Service = request.app.state.service
    return service


def _principal(resources: Resources, headers: list[str]) -> Principal:
    """The principal of a request's `Authorization` headers (PW670/PW671). Two headers are PW670 whatever
    they hold: a proxy in front and the service could each read a different one."""
    if len(headers) > 1:
        raise AuthenticationError(
            "the request has more than one `Authorization` header",
            code="PW670",
            field="authorization",
            hint="send exactly one `Authorization: Bearer TOKEN`",
        )
    return authenticate(resources.store, headers[0] if headers else None)


def authenticated(handler: Handler) -> Handler:
    """`handler` behind the request's authentication, done before anything else of the request is read, so
    that a caller without a valid token gets 401 whatever its body or query holds (and the body is never
    parsed for it). The principal is kept for `as_principal`."""

    async def wrapped(request: Request) -> Response:
        headers = request.headers.getlist("authorization")
        request.state.principal = await service_of(request).pool.run(lambda res: _principal(res, headers))
        return await handler(request)

    return wrapped


def as_principal(request: Request, job: Callable[[Resources, Principal], T]) -> Callable[[Resources], T]:
    """`job` run as the request's bearer token, on a runtime thread: the principal `authenticated` found, or
    (for a handler not behind it) authenticated here first (PW670/PW671)."""
    known: Principal | None = getattr(request.state, "principal", None)
    headers = request.headers.getlist("authorization")

    def run(resources: Resources) -> T:
        principal = known if known is not None else _principal(resources, headers)
        return job(resources, principal)

    return run
