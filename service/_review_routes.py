"""The review pages over HTTP: `/review/bundles/{manifest_hash}` and `/review/agreements/{id}`.

The renderer (`pactwright.service.review`) uses jinja2 and the verifier's
report views, which a deploy host without the compiler stack does not
have; it is imported inside the handlers, on the first page asked for, so
the rest of the service starts and serves without it, and a host that
lacks it answers the pages with PW687 (501) instead of failing to start.
Pages need a bearer token like the `/v1` endpoints; an agreement's page is
shown only to its parties and operators, as its `/v1` reads are (PW501 for
anyone else, as for an unknown agreement).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from pactwright.errors import PactwrightError
from pactwright.runtime.tokens import Principal, require_readable
from pactwright.service._context import as_principal, service_of
from pactwright.service._pool import Resources
from pactwright.service._problems import ServiceError

__all__ = ["agreement_page", "bundle_page"]

log = logging.getLogger("pactwright.service")


def _renderer() -> Any:
    try:
        from pactwright.service import review
    except ImportError as exc:
        raise ServiceError(
            f"the review pages are not available on this host: {exc}",
            code="PW687",
            hint="install pactwright with its compiler dependencies (jinja2) to serve them",
        ) from None
    return review


async def _page(request: Request, render: Callable[[Any, Resources], str], agreement: str | None = None) -> Response:
    def job(res: Resources, principal: Principal) -> str:
        if agreement is not None:
            require_readable(res.store, principal, agreement)
        return render(_renderer(), res)  # after the token is checked: a 401 stays a 401 on any host

    html = await service_of(request).pool.run(as_principal(request, job))
    return HTMLResponse(html)


async def bundle_page(request: Request) -> Response:
    """GET /review/bundles/{manifest_hash}: a stored bundle's clauses, programs and verdicts."""
    manifest_hash = request.path_params["manifest_hash"]
    return await _page(request, lambda review, res: review.render_stored_bundle(res.store, manifest_hash))


async def agreement_page(request: Request) -> Response:
    """GET /review/agreements/{id}: an agreement's path, events, balances, effects, evidence and postings."""
    agreement_id = request.path_params["id"]

    def render(review: Any, res: Resources) -> str:
        try:
            ledger = res.ledger
        except PactwrightError as exc:
            log.warning("ledger unavailable for the review page: %s %s", exc.code, exc.message)
            ledger = None
        page: str = review.render_agreement_page(res.store, agreement_id, ledger)
        return page

    return await _page(request, render, agreement_id)
