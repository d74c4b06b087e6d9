"""The HTTP service: the runtime's Python facade over ASGI, and the review page.

`pactwright serve` runs `create_app` under uvicorn. The application is
Starlette, not FastAPI, on purpose: the service is a thin layer whose every
answer we write ourselves. Every error, including a route that does not
exist, a wrong method, a body that is not JSON or is too large, and a bug,
is an RFC 9457 `application/problem+json` document carrying its stable PW
code, mapped to an HTTP status in one table (`_problems.STATUS`); FastAPI's
own validation and error responses (its `{"detail": [...]}` 422 bodies) would
have to be overridden piece by piece to say the same. The request and
response bodies are pydantic models the handlers validate with, and
`/openapi.json` is written from the same models (`_routes.openapi`), so the
published schema is the one enforced, without a framework generating a
second one. The service has no logic of its own: each handler authenticates
the bearer token (`pactwright.runtime.tokens`) and calls the runtime
functions the matching CLI command calls.

Importing this package needs neither lark, networkx, z3 nor jinja2; the
review pages (`service/review.py`, jinja2) are imported on first use only.
"""

from pactwright.service.app import create_app

__all__ = ["create_app"]
