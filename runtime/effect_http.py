"""The HTTP effect adapter: one declared call to its routed endpoint, and an honest account of it.

What it guarantees, in order, before any connection is opened: the call's
`(method, url)` is a declared egress (PW620), the URL has a route (PW621), and
the route's credential slot is set (PW622). Then it sends the exact body bytes
with the idempotency key, never follows a redirect, never reads the proxy or
netrc settings of the environment (they could send the credential elsewhere),
and maps the answer by the wire protocol in docs/effects.md:

| answer | outcome |
| --- | --- |
| 200/201, JSON echoing the key and amount sent | acknowledged |
| 200/201 otherwise (other key or amount, > 64 KiB, not UTF-8, not JSON) | mismatch |
| 4xx; 5xx with `{"applied": false}` | failed |
| other 5xx; timeout, reset or cut-off answer after sending | uncertain |
| nothing sent (refused, unresolvable, connect timeout) | failed |
| any other status (3xx, 202...) | mismatch |

httpx2 is imported on first use so that CLI start-up never pays for it. Every
`detail` starts with its PW code and is scrubbed of every credential value
the adapter could send, whatever the provider echoes.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import quote

from pactwright import __version__
from pactwright.canonical import load_json
from pactwright.errors import CanonicalError
from pactwright.runtime._providers_file import (
    Credentials,
    ProviderConfigError,
    Providers,
    Route,
    env_name,
    load_providers,
)
from pactwright.runtime.effect_adapter import EffectRequest, Lookup, Outcome, check_egress

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "MAX_RESPONSE_BYTES",
    "Credentials",
    "HttpAdapter",
    "ProviderConfigError",
    "Providers",
    "Route",
    "env_name",
    "load_providers",
]

MAX_RESPONSE_BYTES = 64 * 1024
_REDACTED = "[redacted]"


class _NotSent(Exception):
    """The request never left: nothing can have happened."""


class _NoAnswer(Exception):
    """The request may have been received; no complete answer came back."""


def _show(value: object) -> str:
    """A provider-supplied value for a detail line: whole, or only its digest when it is long.

    Never a prefix: a cut value could end inside a credential the provider
    echoed, which the adapter's scrubbing (whole credential values) would
    then miss. A long value is shown by its SHA-256 and length instead.
    """
    text = value if isinstance(value, str) else repr(value)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    if len(text) > 60:
        return f"(a {len(text)}-character value, sha256 {hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]})"
    return f"`{text}`"


def _echoed_amount(value: object) -> str | bool | None:
    """The echoed amount as minor-unit text, None for null, False when it is not an amount."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and value.lstrip("-").isdigit() and value.isascii():
        return value
    return False


def _read_ack(request: EffectRequest, body: bytes, oversized: bool) -> tuple[str | None, str]:
    """(provider_ref, "") for an acknowledgement of exactly this request, else (None, detail)."""
    if oversized:
        return None, f"PW630: provider response is larger than {MAX_RESPONSE_BYTES // 1024} KiB"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None, "PW631: provider response is not UTF-8"
    try:
        document = load_json(text.encode("utf-8"))
    except CanonicalError as exc:
        return None, f"PW632: provider response is not acceptable JSON ({exc.code})"
    if not isinstance(document, dict):
        return None, "PW632: provider response is not a JSON object"
    ref, key, status = document.get("id"), document.get("idempotency_key"), document.get("status")
    if not isinstance(ref, str) or not ref or len(ref) > 200 or not ref.isprintable():
        return None, "PW632: provider response has no usable `id`"
    if key != request.idempotency_key:
        return None, f"PW633: provider echoed idempotency key {_show(key)}, not the one sent"
    if "amount" not in document or _echoed_amount(document["amount"]) is False:
        return None, f"PW634: provider echoed amount {_show(document.get('amount'))}, not an amount in minor units"
    if _echoed_amount(document["amount"]) != request.amount:
        return None, f"PW634: provider echoed amount {_show(document['amount'])}, sent {_show(request.amount)}"
    if status != "succeeded":
        return None, f"PW632: provider response has status {_show(status)}, not `succeeded`"
    return ref, ""


def _not_applied(body: bytes, oversized: bool) -> bool:
    """True when a 5xx body says, in protocol JSON, that nothing was applied."""
    if oversized:
        return False
    try:
        document = load_json(body)
    except CanonicalError:
        return False
    return isinstance(document, dict) and document.get("applied") is False


def dispatch_outcome(request: EffectRequest, status: int, body: bytes, oversized: bool = False) -> Outcome:
    """Map one complete HTTP answer to an outcome (the table in the module docstring)."""
    if status in {200, 201}:
        ref, problem = _read_ack(request, body, oversized)
        if ref is None:
            return Outcome("mismatch", detail=problem, status=status)
        return Outcome("acknowledged", provider_ref=ref, status=status)
    if 400 <= status <= 499:
        return Outcome("failed", detail=f"PW635: provider refused the call with status {status}", status=status)
    if 500 <= status <= 599:
        if _not_applied(body, oversized):
            return Outcome("failed", detail=f"PW635: provider answered {status} and applied nothing", status=status)
        return Outcome(
            "uncertain", detail=f"PW636: provider answered {status}; the write may have happened", status=status
        )
    return Outcome(
        "mismatch",
        detail=f"PW632: provider answered status {status}, outside the protocol (redirects are not followed)",
        status=status,
    )  # fmt: skip


def lookup_result(request: EffectRequest, status: int, body: bytes, oversized: bool = False) -> Lookup:
    """Map one complete answer to `GET endpoint/KEY`: 200 applied, 404 not applied, else unknown."""
    if status == 200:
        ref, problem = _read_ack(request, body, oversized)
        return Lookup("applied", provider_ref=ref) if ref is not None else Lookup("unknown", detail=problem)
    if status == 404:
        return Lookup("not_applied", detail="provider has no write under this idempotency key")
    return Lookup("unknown", detail=f"PW636: provider answered the lookup with status {status}")


class HttpAdapter:
    """The `EffectAdapter` over HTTP/1.1 with httpx2: one connection per call, a deadline on the whole
    exchange, no redirects, no proxy or netrc settings from the environment.

    A connection of the call's own is what lets the deadline close it without
    touching another call's (effect calls are few; correctness over pooling).
    Safe to share between threads; `close()` is kept for `with` blocks.
    """

    def __init__(
        self,
        providers: Providers,
        credentials: Credentials | None = None,
        *,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self._providers = providers
        self._credentials = credentials if credentials is not None else Credentials()
        self._max = max_response_bytes

    def __repr__(self) -> str:
        return f"HttpAdapter(destinations={sorted(self._providers.routes)})"

    def __enter__(self) -> HttpAdapter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Nothing stays open between calls; here for `with` blocks and symmetry with other adapters."""

    # The protocol ----------------------------------------------------------------

    def dispatch(self, request: EffectRequest, allowed: Sequence[tuple[str, str]]) -> Outcome:
        """Send the call once; refusals (PW620-PW622) raise before connecting, everything else is an Outcome."""
        route, headers = self._prepare(request, allowed)
        headers["Content-Type"] = "application/json"
        try:
            status, body, oversized = self._send(
                request.method, route.endpoint, headers, request.body, request.timeout_s
            )
        except _NotSent as exc:
            return self._scrub_outcome(Outcome("failed", detail=f"PW637: nothing was sent: {exc}"))
        except _NoAnswer as exc:
            return self._scrub_outcome(Outcome("uncertain", detail=f"PW636: no complete answer: {exc}"))
        return self._scrub_outcome(dispatch_outcome(request, status, body, oversized))

    def lookup(self, request: EffectRequest, allowed: Sequence[tuple[str, str]]) -> Lookup:
        """Ask the routed endpoint about the call's key with `GET endpoint/KEY`."""
        route, headers = self._prepare(request, allowed)
        url = route.endpoint.rstrip("/") + "/" + quote(request.idempotency_key, safe="")
        try:
            status, body, oversized = self._send("GET", url, headers, b"", request.timeout_s)
        except (_NotSent, _NoAnswer) as exc:
            return self._scrub_lookup(Lookup("unknown", detail=f"PW636: lookup got no answer: {exc}"))
        return self._scrub_lookup(lookup_result(request, status, body, oversized))

    # Internals -----------------------------------------------------------------------

    def _prepare(self, request: EffectRequest, allowed: Sequence[tuple[str, str]]) -> tuple[Route, dict[str, str]]:
        check_egress(request, allowed)
        route = self._providers.route(request.url)
        headers = {
            "Idempotency-Key": request.idempotency_key,
            "Accept": "application/json",
            "Accept-Encoding": "identity",
            "User-Agent": f"pactwright/{__version__}",
        }
        if route.credential is not None:
            # Only this route's own slot, only to this route's endpoint.
            headers["Authorization"] = f"Bearer {self._credentials.get(route.credential).reveal()}"
        return route, headers

    def _fresh(self) -> httpx2.Client:
        """A client of the call's own: its connection can be closed at the deadline without touching others."""
        import httpx2

        return httpx2.Client(follow_redirects=False, trust_env=False, http1=True, http2=False)

    def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes, timeout_s: float
    ) -> tuple[int, bytes, bool]:
        """(status, body up to the limit, whether it was over the limit); raises _NotSent or _NoAnswer.

        `timeout_s` bounds the whole exchange, not each read: a watchdog closes
        the call's own connection when it passes, so a provider that drips
        header lines or body bytes cannot hold the worker; the call is then
        `uncertain` (the request may have been received).
        """
        if not (math.isfinite(timeout_s) and timeout_s > 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout_s!r}")
        client = self._fresh()
        expired = threading.Event()

        def abort() -> None:
            expired.set()
            client.close()

        watchdog = threading.Timer(timeout_s, abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            return self._exchange(client, method, url, headers, body, timeout_s)
        except Exception as exc:  # whatever a closed connection raises, once past the deadline
            if expired.is_set():
                raise _NoAnswer(f"no complete answer within {timeout_s:g} s") from None
            if isinstance(exc, _NotSent | _NoAnswer):
                raise
            raise _NoAnswer(f"{type(exc).__name__}: {exc}") from None
        finally:
            watchdog.cancel()
            client.close()

    def _exchange(self, client: httpx2.Client, method: str, url: str, headers: dict[str, str], body: bytes,
                  timeout_s: float) -> tuple[int, bytes, bool]:  # fmt: skip
        import httpx2

        deadline = time.monotonic() + timeout_s
        try:
            with client.stream(
                method, url, headers=headers, content=body, timeout=httpx2.Timeout(timeout_s)
            ) as response:
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_raw():
                    chunks.append(chunk)
                    size += len(chunk)
                    if size > self._max:
                        return response.status_code, b"", True
                    if time.monotonic() > deadline:
                        raise _NoAnswer(f"the answer took longer than {timeout_s:g} s")
                return response.status_code, b"".join(chunks), False
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout, httpx2.UnsupportedProtocol) as exc:
            raise _NotSent(f"{type(exc).__name__}: {exc}") from None
        except httpx2.LocalProtocolError as exc:
            raise _NotSent(f"request refused by the HTTP client: {exc}") from None
        except httpx2.TimeoutException as exc:
            raise _NoAnswer(f"{type(exc).__name__} after {timeout_s:g} s") from None
        except httpx2.HTTPError as exc:
            raise _NoAnswer(f"{type(exc).__name__}: {exc}") from None

    def _scrub(self, text: str) -> str:
        for secret in self._credentials.secrets_in_use():
            text = text.replace(secret, _REDACTED)
        return text

    def _scrub_outcome(self, outcome: Outcome) -> Outcome:
        return Outcome(outcome.kind, outcome.provider_ref and self._scrub(outcome.provider_ref),
                       self._scrub(outcome.detail), outcome.status)  # fmt: skip

    def _scrub_lookup(self, lookup: Lookup) -> Lookup:
        return Lookup(lookup.kind, lookup.provider_ref and self._scrub(lookup.provider_ref), self._scrub(lookup.detail))
