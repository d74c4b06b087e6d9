"""Every error as an RFC 9457 problem document, and the one table from PW codes to HTTP statuses.

A refusal keeps its PW code, message, field, expected/found and hint exactly
as the runtime raised it; the HTTP status says only what kind of refusal it
is. The table below is the single place a code gets its status: what the
caller sent is malformed (400) or does not fit the schema or the pact (422),
who is calling is unknown (401) or may not do this (403), the thing named
does not exist (404), the request conflicts with what the store holds now
(409), the store or ledger cannot be reached (503), or the server holds
something it cannot read (500). A code not in the table gets its error
class's status (`_BY_CLASS`), and anything else is an internal error
(PW003, 500) whose detail never names internals. A store or ledger
that cannot be opened or refused a write (`_INTERNALS`) keeps its code and
hint, but its detail, which names the database URL (a password, a file
path) and the driver's words, goes to the server's log; the client reads
only the code's title.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any

from starlette.responses import Response

from pactwright.codes import CODES
from pactwright.errors import (
    ActivationError,
    CanonicalError,
    CommandError,
    EffectError,
    LedgerError,
    MoneyError,
    PactwrightError,
    StoreError,
    UsageError,
)

__all__ = ["INTERNAL", "PROBLEM_TYPE", "STATUS", "ServiceError", "problem", "problem_response", "status_of"]

PROBLEM_TYPE = "application/problem+json"
INTERNAL = "PW003"
# Refusals whose message holds a database URL, a file path or a driver's error text: logged, never shown.
_INTERNALS = frozenset({"PW550", "PW551", "PW552", "PW700", "PW709"})
_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s]*@")  # the password of a URL's user info
log = logging.getLogger("pactwright.service")


class ServiceError(PactwrightError):
    """A request the HTTP layer itself refuses (PW68x): no such route, wrong method, body or content type."""

    code = "PW680"


def _codes(status: int, *codes: str) -> dict[str, int]:
    return dict.fromkeys(codes, status)


# The one table: PW code -> HTTP status.
# fmt: off
STATUS: dict[str, int] = {
    # 400: the request is not well-formed (JSON that does not parse, or that no JSON parser should accept).
    **_codes(400, "PW013", "PW015", "PW016", "PW017", "PW018"),
    # 401: who is calling is not known.
    **_codes(401, "PW670", "PW671"),
    # 403: the caller is known but may not do this (role, binding, approver, operator, clock).
    **_codes(403, "PW507", "PW508", "PW605", "PW606", "PW607", "PW608", "PW615", "PW641", "PW672", "PW673"),
    # 404: the thing named does not exist.
    **_codes(404, "PW501", "PW601", "PW640", "PW680", "PW702", "PW710"),
    # 405, 413, 415: the HTTP layer's own refusals.
    "PW681": 405,
    "PW683": 413,
    "PW682": 415,
    # 501: this host lacks what the feature needs (the review pages without jinja2).
    "PW687": 501,
    # 409: the request conflicts with what the store holds now (a retry with other inputs may pass).
    **_codes(409, "PW502", "PW509", "PW510", "PW511", "PW512", "PW514", "PW515", "PW523", "PW524", "PW525",
             "PW526", "PW527", "PW528", "PW602", "PW603", "PW604", "PW610", "PW612", "PW614", "PW642"),
    # 422: well-formed, but not what the schema or the pact accepts.
    **_codes(422, "PW001", "PW011", "PW019", "PW503", "PW504", "PW505", "PW506", "PW516", "PW517", "PW519",
             "PW521", "PW522", "PW611", "PW613", "PW643", "PW684", "PW685"),
    # 500: the server holds something it cannot read or trust (tampering, a corrupt row), or a bug.
    **_codes(500, "PW003", "PW518", "PW529", "PW609", "PW644", "PW703", "PW704", "PW705", "PW706", "PW707",
             "PW708", "PW554"),
    # 503: the store or the ledger cannot be used right now.
    **_codes(503, "PW550", "PW551", "PW552", "PW686", "PW700", "PW701", "PW709"),
}
# fmt: on

# A code missing from the table gets its error class's status (most specific class first).
_BY_CLASS: tuple[tuple[type[PactwrightError], int], ...] = (
    (CanonicalError, 400),
    (MoneyError, 422),
    (UsageError, 422),
    (CommandError, 422),
    (EffectError, 409),
    (ActivationError, 422),
    (LedgerError, 500),
    (StoreError, 500),
)


def status_of(exc: PactwrightError) -> int:
    """The HTTP status of a refusal: its code's row in `STATUS`, else its class's, else 500."""
    found = STATUS.get(exc.code)
    if found is not None:
        return found
    for kind, status in _BY_CLASS:
        if isinstance(exc, kind):
            return status
    return 500


def problem(exc: PactwrightError, *, instance: str | None = None) -> tuple[int, dict[str, Any]]:
    """(status, RFC 9457 document) for a refusal; the PW code and its details travel as extension members."""
    status = status_of(exc)
    title = CODES.get(exc.code, "error")
    hidden = exc.code in _INTERNALS
    if hidden:
        log.warning("%s on %s: %s", exc.code, instance, _PASSWORD.sub(r"\1***@", exc.message))
    doc: dict[str, Any] = {
        "type": f"urn:pactwright:error:{exc.code.lower()}",
        "title": title,
        "status": status,
        "detail": f"{title}: the server logged the details" if hidden else exc.message,
        "code": exc.code,
    }
    if instance is not None:
        doc["instance"] = instance
    for key in ("hint",) if hidden else ("field", "expected", "found", "hint"):
        value = getattr(exc, key)
        if value is not None:
            doc[key] = value
    return status, doc


def problem_response(exc: PactwrightError, *, instance: str | None = None,
                     headers: Mapping[str, str] | None = None) -> Response:  # fmt: skip
    status, doc = problem(exc, instance=instance)
    try:
        body = json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")
    except UnicodeEncodeError:  # a refusal quoting the caller's own lone surrogate: escaped, still JSON
        body = json.dumps(doc, ensure_ascii=True, sort_keys=True).encode("ascii")
    return Response(body, status_code=status, media_type=PROBLEM_TYPE, headers=dict(headers or {}))


def internal(instance: str | None = None) -> Response:
    """The 500 an unexpected exception becomes: a code and a sentence, never a traceback or a class name."""
    error = PactwrightError("internal error: the server logged the details", code=INTERNAL)
    return problem_response(error, instance=instance)
