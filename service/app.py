"""`create_app`: the Starlette application `pactwright serve` runs under uvicorn.

Routing misses (404, 405) and anything a handler did not answer become
problem documents here; handlers answer their own refusals
(`_http.endpoint`). The runtime threads start with the first request (or
at startup under a server) and stop, closing their connections, at
shutdown.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from pactwright.runtime.clock import Clock, SystemClock
from pactwright.service._context import Service, service_of
from pactwright.service._metrics import Counters
from pactwright.service._pool import Pool
from pactwright.service._problems import ServiceError, internal, problem_response
from pactwright.service._routes import openapi, routes

__all__ = ["create_app"]

log = logging.getLogger("pactwright.service")
# The methods `/metrics` labels by name; any other is counted as `other`, so a client sending made-up
# methods cannot grow the series without bound.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"})


async def _http_error(request: Request, exc: Exception) -> Response:
    """A request no route answers: 404 (PW680) or 405 (PW681, with `Allow`); any other status as PW684."""
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if exc.status_code == 404:
        error = ServiceError(f"there is no endpoint `{path[:120]}`", code="PW680", hint="see /openapi.json")
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        error = ServiceError(f"`{request.method[:20]}` is not allowed on `{path[:120]}`", code="PW681",
                             expected=allowed or None, found=request.method[:20])  # fmt: skip
    else:
        error = ServiceError(f"the request was refused: {exc.detail}", code="PW684")
    response = problem_response(error, instance=path, headers=exc.headers)
    method = request.method if request.method in _METHODS else "other"
    service_of(request).counters.request(method, "unmatched", response.status_code)
    return response


async def _bug(request: Request, exc: Exception) -> Response:
    log.error("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return internal(request.url.path)


def create_app(store_url: str, ledger_url: str | None = None, *, clock: Clock | None = None,
               threads: int = 8) -> Starlette:  # fmt: skip
    """The API over the store at `store_url` and the ledger at `ledger_url` (default: the store's sibling).

    `clock` is the trusted clock commands are judged by (the host's by
    default); `threads` bounds the runtime calls in flight and the database
    connections held.
    """
    clock = clock or SystemClock()
    service = Service(store_url, ledger_url, clock, Pool(store_url, ledger_url, clock, threads), Counters())

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        service.pool.start()
        try:
            yield
        finally:
            service.pool.stop()

    app = Starlette(routes=routes(), exception_handlers={HTTPException: _http_error, Exception: _bug},
                    lifespan=lifespan)  # fmt: skip
    app.router.redirect_slashes = False  # `/v1/agreements/` is a 404 problem, not a redirect to another URL
    app.state.service = service
    app.state.openapi = openapi()
    return app
