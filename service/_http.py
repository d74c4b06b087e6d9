"""Reading requests and writing responses: body limit, content type, strict JSON, model validation.

Every way a request can be malformed ends here as a `PactwrightError` with
its own code, which the endpoint wrapper turns into a problem document: a
body over `MAX_BODY` bytes (PW683, 413), a body that is not
`application/json` (PW682, 415), JSON the kernel's strict parser would
refuse (not UTF-8 PW017, malformed PW018, a duplicate key PW015, NaN PW016,
an integer beyond 2**53 PW013: 400), a JSON number where the API takes a
decimal string, such as money (PW685, 422), and a body that does not match
its model (PW684, 422). No JSON number is ever read as a float.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from pactwright.canonical import MAX_SAFE_INT, reject_duplicate_keys, safe_int
from pactwright.errors import CanonicalError, PactwrightError
from pactwright.service._problems import ServiceError, internal, problem_response

__all__ = ["MAX_BODY", "endpoint", "json_response", "parse_json", "query_bool", "query_int", "query_text", "read_model"]

MAX_BODY = 64 * 1024  # bytes: a command, an open or a decision is a few hundred
M = TypeVar("M", bound=BaseModel)
Handler = Callable[[Request], Awaitable[Response]]
log = logging.getLogger("pactwright.service")
_DIGITS = re.compile(r"[0-9]{1,15}")


def endpoint(handler: Handler) -> Handler:
    """The handler with every failure answered as a problem: refusals with their code, bugs as PW003 (logged)."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except PactwrightError as exc:
            return problem_response(exc, instance=request.url.path)
        except Exception:  # the request's bug catcher: logged here, never shown
            log.exception("internal error on %s %s", request.method, request.url.path)
            return internal(request.url.path)

    wrapped.__name__ = handler.__name__
    wrapped.__doc__ = handler.__doc__
    return wrapped


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (_DIGITS.fullmatch(declared) is None or int(declared) > MAX_BODY):
        raise ServiceError(f"the request body is larger than {MAX_BODY} bytes", code="PW683",
                           expected=f"at most {MAX_BODY} bytes", found=declared[:20])  # fmt: skip
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY:
            raise ServiceError(f"the request body is larger than {MAX_BODY} bytes", code="PW683",
                               expected=f"at most {MAX_BODY} bytes")  # fmt: skip
        chunks.append(chunk)
    return b"".join(chunks)


def _number(text: str) -> int | Decimal:
    """A number written with a fraction or an exponent: the integer it is exactly (`2.0`, `2e1`), else the
    exact Decimal, which no model accepts (PW685 where a decimal string belongs, PW684 elsewhere). Never a float.
    """
    try:
        value = Decimal(text) if len(text) <= 40 else None
    except InvalidOperation:
        value = None
    if value is None:
        raise CanonicalError(f"number `{text[:20]}...` is too long", code="PW013")
    if abs(value) <= MAX_SAFE_INT and value == value.to_integral_value():
        return int(value)
    return value


def _constant(text: str) -> Any:
    raise CanonicalError(f"`{text}` is not JSON", code="PW016")


def parse_json(data: bytes) -> Any:
    """Strict JSON, as the kernel reads it (UTF-8, no duplicate keys, no NaN, integers within 2**53), except
    that a number written with a fraction or exponent is kept exact rather than refused outright, so that the
    models can say which field it is in (and `1.0` is the integer 1, as JSON Schema counts it)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalError(f"not valid utf-8 at byte {exc.start}", code="PW017") from None
    try:
        return json.loads(text, object_pairs_hook=reject_duplicate_keys, parse_int=safe_int, parse_float=_number,
                          parse_constant=_constant)  # fmt: skip
    except json.JSONDecodeError as exc:
        raise CanonicalError(f"malformed json at line {exc.lineno} column {exc.colno}: {exc.msg.lower()}",
                             code="PW018") from None  # fmt: skip
    except RecursionError:
        raise CanonicalError("json nested too deeply", code="PW018") from None


def _is_json(content_type: str | None) -> bool:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _validation(exc: ValidationError) -> PactwrightError:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "body"
    given = first.get("input")
    if first["type"] == "string_type" and isinstance(given, int | Decimal) and not isinstance(given, bool):
        return ServiceError(
            f'`{where}` is a JSON number; the API takes money, percents and params as decimal strings (`"64.90"`)',
            code="PW685",
            field=where,
            found=str(given)[:40],
        )
    return ServiceError(f"`{where}`: {first['msg'].lower()}", code="PW684", field=where)


async def read_model(request: Request, model: type[M]) -> M:
    """The request body as `model`: a JSON object of the model's shape, within the body limit."""
    if not _is_json(request.headers.get("content-type")):
        given = (request.headers.get("content-type") or "none")[:80]
        raise ServiceError("the request body must be `application/json`", code="PW682", field="content-type",
                           expected="application/json", found=given)  # fmt: skip
    doc = parse_json(await _body(request))
    if not isinstance(doc, dict):
        raise ServiceError("the request body must be a JSON object", code="PW684", field="body")
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise _validation(exc) from None


def json_response(doc: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    try:
        body = json.dumps(doc, ensure_ascii=False, sort_keys=True).encode("utf-8")
    except UnicodeEncodeError:  # text quoting a caller's lone surrogate: escaped, still JSON
        body = json.dumps(doc, ensure_ascii=True, sort_keys=True).encode("ascii")
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _bad_query(name: str, message: str, given: str) -> ServiceError:
    return ServiceError(f"query parameter `{name}` {message}", code="PW684", field=name, found=given[:40])


def query_text(request: Request, name: str, choices: tuple[str, ...] | None = None) -> str | None:
    given = request.query_params.get(name)
    if given is None:
        return None
    if choices is not None and given not in choices:
        raise _bad_query(name, f"is one of {', '.join(choices)}", given)
    if not given or len(given) > 200 or "\x00" in given:  # no stored id holds a NUL (PostgreSQL text cannot)
        raise _bad_query(name, "is 1-200 characters, without NUL", given)
    return given


def query_bool(request: Request, name: str) -> bool:
    return query_text(request, name, ("true", "false")) == "true"


def query_int(request: Request, name: str, default: int, low: int, high: int) -> int:
    given = request.query_params.get(name)
    if given is None:
        return default
    if _DIGITS.fullmatch(given) is None or not low <= int(given) <= high:
        raise _bad_query(name, f"is an integer from {low} to {high}", given)
    return int(given)
