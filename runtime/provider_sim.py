"""A payment provider you can run: real HTTP on loopback, keyed writes, faults on demand.

It speaks the wire protocol of docs/effects.md for any path: `POST`/`PUT`
creates a write keyed by its `Idempotency-Key` (the same key returns the
original write, unless `ignore_keys` is on: the provider that makes `retry`
refund twice), `GET PATH/KEY` looks a key up. It counts the writes it really
performed, so a test asserts "exactly one refund happened" on the provider's
side, not from what the runtime believes.

Faults are queued first in, first out and each one is spent on the next write
request (lookups and control calls never consume one). Control endpoints
live under `/_sim/`. Standard library and kernel only: the simulator starts
as fast as the CLI does.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from pactwright.canonical import hash_bytes
from pactwright.errors import UsageError

FAULTS = (
    "lost_request",
    "lost_response",
    "error_5xx",
    "slow",
    "duplicate_ack",
    "wrong_amount",
    "wrong_key",
    "oversized",
    "not_utf8",
    "lookup_unknown",
)
# Spent by the next lookup instead of the next write: the provider cannot answer a lookup (503).
LOOKUP_FAULTS = frozenset({"lookup_unknown"})
DEFAULT_SLOW_SECONDS = 3.0
_MAX_REQUEST_BYTES = 1 << 20
_OVERSIZED_BYTES = 64 * 1024 + 1024


def _check_faults(faults: tuple[str, ...] | list[Any]) -> tuple[str, ...]:
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise UsageError(
            f"unknown provider simulator fault `{unknown[0]}`", code="PW626", expected=", ".join(FAULTS),
            found=str(unknown[0]),
        )  # fmt: skip
    return tuple(faults)


@dataclass
class _Ledger:
    """Everything the simulator knows, behind one lock."""

    ignore_keys: bool
    slow_seconds: float
    initial: tuple[bool, float] = (False, DEFAULT_SLOW_SECONDS)
    lock: threading.Lock = field(default_factory=threading.Lock)
    faults: deque[str] = field(default_factory=deque)
    lookup_faults: deque[str] = field(default_factory=deque)
    records: list[dict[str, Any]] = field(default_factory=list)
    by_key: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    lookups: int = 0
    reads: int = 0

    def add_faults(self, faults: tuple[str, ...] | list[str]) -> None:
        """Under the lock: each fault to the queue of the requests it is spent on."""
        for fault in faults:
            (self.lookup_faults if fault in LOOKUP_FAULTS else self.faults).append(fault)

    def state(self) -> dict[str, Any]:
        with self.lock:
            return {
                "writes": len(self.records),
                "by_key": dict(self.by_key),
                "requests": self.requests,
                "lookups": self.lookups,
                "reads": self.reads,
                "records": [dict(r) for r in self.records],
                "pending_faults": [*self.faults, *self.lookup_faults],
                "ignore_keys": self.ignore_keys,
            }

    def reset(self) -> None:
        with self.lock:
            self.faults.clear()
            self.lookup_faults.clear()
            self.records.clear()
            self.by_key.clear()
            self.requests = self.lookups = self.reads = 0
            self.ignore_keys, self.slow_seconds = self.initial


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the state endpoint is the log."""

    # Plumbing -----------------------------------------------------------------------

    def _body(self) -> bytes | None:
        try:
            length = int(self.headers.get("Content-Length") or "0")
        except ValueError:
            length = -1
        if not 0 <= length <= _MAX_REQUEST_BYTES:
            self._answer(400, {"error": "bad Content-Length"})
            return None
        return self.rfile.read(length)

    def _answer(self, status: int, document: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(document, sort_keys=True).encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the caller went away (a `slow` answer after its timeout)

    def _drop(self) -> None:
        """Close the connection without a byte of answer."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # Routing --------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()  # read whatever was sent, so a kept-alive connection stays in step
        if body is None:
            return
        key = self.headers.get("Idempotency-Key")
        last = unquote(path.rstrip("/").rsplit("/", 1)[-1])
        if path == "/_sim/state":
            self._answer(200, self.server.ledger.state())
        elif path.startswith("/_sim/"):
            self._answer(404, {"error": "unknown control endpoint"})
        elif key and last != key:
            self._read(key, body)  # a read effect (`egress GET`): answered, changes nothing
        else:
            self._lookup(last)

    def _read(self, key: str, body: bytes) -> None:
        ledger = self.server.ledger
        try:
            document = json.loads(body) if body else {}
        except ValueError:
            document = {}
        amount = document.get("amount") if isinstance(document, dict) else None
        with ledger.lock:
            ledger.requests += 1
            ledger.reads += 1
            number = ledger.reads
        self._answer(200, {"id": f"read_{number}", "idempotency_key": key, "amount": amount, "status": "succeeded"})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._body()
        if body is None:
            return
        if path.startswith("/_sim/"):
            self._control(path, body)
        else:
            self._write(path, body)

    do_PUT = do_POST  # noqa: N815 - the stdlib dispatches on this name

    def _control(self, path: str, body: bytes) -> None:
        ledger = self.server.ledger
        try:
            document = json.loads(body or b"{}")
        except ValueError:
            self._answer(400, {"error": "body is not JSON"})
            return
        if not isinstance(document, dict):
            self._answer(400, {"error": "body must be a JSON object"})
        elif path == "/_sim/faults":
            faults = document.get("faults")
            if not isinstance(faults, list) or not all(isinstance(f, str) for f in faults):
                self._answer(400, {"error": "`faults` must be a list of fault names", "known": list(FAULTS)})
                return
            try:
                _check_faults(faults)
            except UsageError as exc:
                self._answer(400, {"error": exc.message, "known": list(FAULTS)})
                return
            with ledger.lock:
                ledger.add_faults(faults)
            self._answer(200, {"queued": len(faults)})
        elif path == "/_sim/mode":
            ignore, slow = document.get("ignore_keys"), document.get("slow_seconds")
            if (ignore is not None and not isinstance(ignore, bool)) or (
                slow is not None and (isinstance(slow, bool) or not isinstance(slow, int | float) or slow < 0)
            ):
                self._answer(400, {"error": "`ignore_keys` is a boolean, `slow_seconds` a non-negative number"})
                return
            with ledger.lock:
                ledger.ignore_keys = ledger.ignore_keys if ignore is None else ignore
                ledger.slow_seconds = ledger.slow_seconds if slow is None else float(slow)
            self._answer(200, {"ignore_keys": ledger.ignore_keys, "slow_seconds": ledger.slow_seconds})
        elif path == "/_sim/reset":
            ledger.reset()
            self._answer(200, {"reset": True})
        else:
            self._answer(404, {"error": "unknown control endpoint"})

    # The provider -----------------------------------------------------------------------

    def _lookup(self, key: str) -> None:
        ledger = self.server.ledger
        with ledger.lock:
            ledger.requests += 1
            ledger.lookups += 1
            fault = ledger.lookup_faults.popleft() if ledger.lookup_faults else None
            found = next((r for r in ledger.records if r["idempotency_key"] == key), None)
        if fault == "lookup_unknown":
            self._answer(503, {"error": "lookups unavailable"})
            return
        if found is None:
            self._answer(404, {"error": "no write under this idempotency key"})
        else:
            self._answer(200, _ack(found))

    def _write(self, path: str, body: bytes) -> None:
        ledger = self.server.ledger
        key = self.headers.get("Idempotency-Key")
        try:
            document = json.loads(body)
        except ValueError:
            document = None
        with ledger.lock:
            ledger.requests += 1
            if not key or not isinstance(document, dict):
                fault = None
            else:
                fault = ledger.faults.popleft() if ledger.faults else None
            slow_seconds = ledger.slow_seconds
        if not key:
            self._answer(400, {"error": "missing Idempotency-Key"})
            return
        if not isinstance(document, dict):
            self._answer(400, {"error": "body is not a JSON object"})
            return
        if fault == "lost_request":
            self._drop()
            return
        if fault == "error_5xx":
            self._answer(503, {"applied": False, "error": "service unavailable"})
            return
        record, replayed = self._record(path, key, document, body)
        if fault == "lost_response":
            self._drop()
            return
        answer = _ack(record)
        if replayed or fault == "duplicate_ack":
            answer["duplicate"] = True
        if fault == "slow":
            time.sleep(slow_seconds)
        elif fault == "wrong_amount":
            amount = record["amount"]
            answer["amount"] = (int(amount) if isinstance(amount, int | str) and str(amount).isdigit() else 0) + 1
        elif fault == "wrong_key":
            answer["idempotency_key"] = f"{key}-other"
        elif fault == "oversized":
            answer["padding"] = "x" * _OVERSIZED_BYTES
        elif fault == "not_utf8":
            self._answer(201, None, raw=b'{"id": "\xff\xfe", "status": "succeeded"}')
            return
        self._answer(200 if replayed else 201, answer)

    def _record(self, path: str, key: str, document: dict[str, Any], body: bytes) -> tuple[dict[str, Any], bool]:
        """The write for this key: the existing one (replay) or a new one. Returns (record, replayed)."""
        ledger = self.server.ledger
        authorization = self.headers.get("Authorization")
        with ledger.lock:
            if not ledger.ignore_keys:
                for existing in ledger.records:
                    if existing["idempotency_key"] == key:
                        return existing, True
            record = {
                "id": f"sim_{len(ledger.records) + 1}",
                "idempotency_key": key,
                "amount": document.get("amount"),
                "method": self.command,
                "path": path,
                "body_digest": hash_bytes(body),
                # A digest, never the header itself: the state may end up in a report.
                "authorization": None if authorization is None else hash_bytes(authorization.encode("utf-8")),
            }
            ledger.records.append(record)
            ledger.by_key[key] = ledger.by_key.get(key, 0) + 1
            return record, False


def _ack(record: dict[str, Any]) -> dict[str, Any]:
    return {"id": record["id"], "idempotency_key": record["idempotency_key"], "amount": record["amount"],
            "status": "succeeded"}  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # the default 5 resets racing clients before they are served
    ledger: _Ledger

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A caller that hung up mid-answer is part of the game, not an error to print."""


class Simulator:
    """A running simulator (a server thread); `close()` stops it. Also a context manager."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="provider-sim", daemon=True)
        self._thread.start()
        host, port = server.server_address[:2]
        self.host = str(host)
        self.port = int(port)
        self.url = f"http://{self.host}:{self.port}"

    def __enter__(self) -> Simulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def state(self) -> dict[str, Any]:
        """`writes`, `by_key`, `requests`, `lookups`, `records` (as `GET /_sim/state`)."""
        return self._server.ledger.state()

    def queue(self, *faults: str) -> None:
        """Queue faults for the next write requests, one each, first in first out (PW626 for an unknown one)."""
        checked = _check_faults(faults)
        with self._server.ledger.lock:
            self._server.ledger.add_faults(checked)

    def set_mode(self, *, ignore_keys: bool | None = None, slow_seconds: float | None = None) -> None:
        ledger = self._server.ledger
        with ledger.lock:
            if ignore_keys is not None:
                ledger.ignore_keys = ignore_keys
            if slow_seconds is not None:
                ledger.slow_seconds = slow_seconds

    def reset(self) -> None:
        """Forget every write, count and queued fault; back to the start-up mode."""
        self._server.ledger.reset()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def start_simulator(
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    ignore_keys: bool = False,
    slow_seconds: float = DEFAULT_SLOW_SECONDS,
) -> Simulator:
    """Start a simulator on `host:port` (0: a free port) in a background thread; PW627 when it cannot listen."""
    try:
        server = _Server((host, port), _Handler)
    except (OSError, OverflowError) as exc:
        raise UsageError(f"provider simulator cannot listen on `{host}:{port}`: {exc}", code="PW627") from None
    server.ledger = _Ledger(ignore_keys=ignore_keys, slow_seconds=slow_seconds, initial=(ignore_keys, slow_seconds))
    return Simulator(server)
