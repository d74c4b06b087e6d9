"""`/healthz`, `/readyz` and `/metrics`: no token needed (probes and scrapers carry none).

`/healthz` answers while the process runs, without touching a database.
`/readyz` opens a new connection to the store and one to the ledger each
time (a probe must not be answered from a connection that died since) and
is ready only when both open and the store's schema is this release's
latest migration; otherwise it is a 503 problem with the reason's code
(PW700 store unreachable, PW550 ledger unreachable, PW686 anything else,
such as migrations not applied).
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from pactwright.errors import PactwrightError
from pactwright.service import _metrics
from pactwright.service import _models as m
from pactwright.service._context import service_of
from pactwright.service._http import json_response
from pactwright.service._pool import Resources, open_current
from pactwright.service._problems import ServiceError, status_of

__all__ = ["healthz", "metrics", "readyz"]

log = logging.getLogger("pactwright.service")


async def healthz(request: Request) -> Response:
    """GET /healthz: the process is up."""
    return json_response(m.dump(m.Health, {"status": "ok"}))


def _ready(res: Resources) -> dict[str, object]:
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.store._migrations import LATEST

    with open_current(res.store_url) as store:
        version = store.schema_version()
        backend = store.backend
    if version != LATEST:
        raise ServiceError(
            f"the store's schema is at migration {version}, not {LATEST}: it holds no active pact yet, or it was "
            "made by an older release and holds no agreements to migrate",
            code="PW686",
            expected=str(LATEST),
            found=str(version),
            hint="activate a bundle into it (`pactwright activate`), which applies every migration",
        )
    with open_ledger(res.ledger_url, res.store_url) as ledger:
        ledger.balances(["world"])
    return {"status": "ready", "store": backend, "schema_version": version, "ledger": "reachable"}


async def readyz(request: Request) -> Response:
    """GET /readyz: the store and the ledger are reachable and the store's migrations are current."""
    try:
        doc = await service_of(request).pool.run(_ready)
    except PactwrightError as exc:
        if status_of(exc) == 503:
            raise
        raise ServiceError(f"not ready: {exc.message}", code="PW686", hint=exc.hint) from None
    return json_response(m.dump(m.Readiness, doc))


async def metrics(request: Request) -> Response:
    """GET /metrics: Prometheus text; counters from this process, gauges from the store."""
    service = service_of(request)
    try:
        state = await service.pool.run(lambda res: _metrics.read_state(res.store))
    except PactwrightError as exc:
        log.warning("metrics could not read the store: %s %s", exc.code, exc.message)
        state = None
    return Response(_metrics.render(service.counters, state), media_type=_metrics.CONTENT_TYPE)
