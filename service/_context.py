"""What every handler reaches through `request.app.state.service`: the runtime threads and the counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from starlette.requests import Request

from pactwright.runtime.clock import Clock
from pactwright.runtime.tokens import AuthenticationError, Principal, authenticate
from pactwright.service._metrics import Counters
from pactwright.service._pool import Pool, Resources

__all__ = ["Service", "as_principal", "service_of"]

T = TypeVar("T")


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


def as_principal(request: Request, job: Callable[[Resources, Principal], T]) -> Callable[[Resources], T]:
    """`job` run as the request's bearer token: authenticated first, on the runtime thread (PW670/PW671).

    Two `Authorization` headers are PW670 whatever they hold: a proxy in
    front and the service could each read a different one.
    """
    headers = request.headers.getlist("authorization")
    header = headers[0] if headers else None

    def run(resources: Resources) -> T:
        if len(headers) > 1:
            raise AuthenticationError("the request has more than one `Authorization` header", code="PW670",
                                      field="authorization", hint="send exactly one `Authorization: Bearer TOKEN`")  # fmt: skip
        principal = authenticate(resources.store, header)
        return job(resources, principal)

    return run
