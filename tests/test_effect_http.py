"""The HTTP adapter against real servers on loopback: outcomes, the allowlist, credentials, hostile answers.

No mocks: the simulator (runtime/provider_sim.py) or a tiny hand-written
server answers over real sockets, and the provider's own counts decide
whether a write happened.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.errors import PactwrightError
from pactwright.runtime.effect_adapter import EffectAdapter, EffectRequest, Outcome, check_egress
from pactwright.runtime.effect_http import (
    Credentials,
    HttpAdapter,
    Providers,
    dispatch_outcome,
    env_name,
    load_providers,
    lookup_result,
)
from pactwright.runtime.provider_sim import Simulator, start_simulator

PAYMENTS = "https://api.payments.example.com"
ORDERS = "https://orders.internal.example.com"
ALLOWED = (("POST", PAYMENTS),)
SECRET = "sk_live_7d1f0c2e9b4a"  # noqa: S105 - a test credential
BODY = canonical_bytes({"agreement": "a1", "amount": 6490, "currency": "EUR", "effect": "refund_payment",
                        "params": {"amount": "64.90"}})  # fmt: skip


def _request(**changes: Any) -> EffectRequest:
    base = EffectRequest(
        instance_id="a1/3/e0", effect="refund_payment", method="POST", url=PAYMENTS,
        idempotency_key="pw-0123456789abcdef0123456789abcdef01234567", body=BODY, amount="6490", timeout_s=2.0,
    )  # fmt: skip
    return replace(base, **changes)


def _providers(payments: str, orders: str | None = None, credential: str | None = "payments") -> Providers:
    tables: dict[str, Any] = {PAYMENTS: {"endpoint": payments}}
    if credential:
        tables[PAYMENTS]["credential"] = credential
    if orders:
        tables[ORDERS] = {"endpoint": orders}
    return Providers.from_mapping({"destination": tables})


@pytest.fixture(scope="module")
def shared() -> Iterator[Simulator]:
    with start_simulator(slow_seconds=1.0) as simulator:
        yield simulator


@pytest.fixture
def sim(shared: Simulator) -> Simulator:
    shared.reset()
    return shared


@pytest.fixture
def adapter(sim: Simulator) -> Iterator[HttpAdapter]:
    credentials = Credentials(environ={env_name("payments"): SECRET})
    with HttpAdapter(_providers(f"{sim.url}/refunds", f"{sim.url}/orders"), credentials) as http:
        yield http


def test_the_adapter_is_an_effect_adapter(adapter: HttpAdapter) -> None:
    typed: EffectAdapter = adapter
    assert typed is adapter


# Outcomes -----------------------------------------------------------------------------------


def test_an_acknowledged_write(sim: Simulator, adapter: HttpAdapter) -> None:
    outcome = adapter.dispatch(_request(), ALLOWED)
    assert outcome == Outcome("acknowledged", provider_ref="sim_1", status=201)
    record = sim.state()["records"][0]
    assert record["body_digest"] == hash_bytes(BODY), "the exact body bytes were sent"
    assert record["idempotency_key"] == _request().idempotency_key


def test_an_idempotent_replay_is_the_original_write(sim: Simulator, adapter: HttpAdapter) -> None:
    first, second = adapter.dispatch(_request(), ALLOWED), adapter.dispatch(_request(), ALLOWED)
    assert first.kind == second.kind == "acknowledged" and first.provider_ref == second.provider_ref
    assert sim.state()["writes"] == 1


def test_a_provider_ignoring_keys_writes_twice(sim: Simulator, adapter: HttpAdapter) -> None:
    sim.set_mode(ignore_keys=True)
    refs = {adapter.dispatch(_request(), ALLOWED).provider_ref for _ in range(2)}
    assert refs == {"sim_1", "sim_2"}
    assert sim.state()["writes"] == 2


@pytest.mark.parametrize(
    ("fault", "kind", "code", "writes"),
    [
        ("lost_request", "uncertain", "PW636", 0),
        ("lost_response", "uncertain", "PW636", 1),
        ("error_5xx", "failed", "PW635", 0),
        ("slow", "uncertain", "PW636", 1),
        ("duplicate_ack", "acknowledged", "", 1),
        ("wrong_amount", "mismatch", "PW634", 1),
        ("wrong_key", "mismatch", "PW633", 1),
        ("oversized", "mismatch", "PW630", 1),
        ("not_utf8", "mismatch", "PW631", 1),
    ],
)
def test_every_fault_maps_to_its_outcome(
    sim: Simulator, adapter: HttpAdapter, fault: str, kind: str, code: str, writes: int
) -> None:
    sim.queue(fault)
    started = time.monotonic()
    outcome = adapter.dispatch(_request(timeout_s=0.3), ALLOWED)
    assert outcome.kind == kind, outcome
    assert outcome.detail.startswith(code), outcome
    assert outcome.provider_ref is None or kind == "acknowledged"
    assert time.monotonic() - started < 0.9, "the effect's timeout bounds the call"
    assert sim.state()["writes"] == writes, "the provider's own count"


def test_after_an_uncertain_outcome_the_same_key_recovers_the_write(sim: Simulator, adapter: HttpAdapter) -> None:
    sim.queue("lost_response")
    assert adapter.dispatch(_request(), ALLOWED).kind == "uncertain"
    assert adapter.dispatch(_request(), ALLOWED).kind == "acknowledged"
    assert sim.state()["writes"] == 1


def test_a_4xx_did_not_happen(sim: Simulator, adapter: HttpAdapter) -> None:
    outcome = adapter.dispatch(_request(body=b"[]"), ALLOWED)
    assert (outcome.kind, outcome.status) == ("failed", 400) and outcome.detail.startswith("PW635")
    assert sim.state()["writes"] == 0


def test_a_refused_connection_sent_nothing() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with HttpAdapter(_providers(f"http://127.0.0.1:{port}/refunds", credential=None)) as http:
        outcome = http.dispatch(_request(timeout_s=0.3), ALLOWED)
    assert outcome.kind == "failed" and outcome.detail.startswith("PW637"), outcome


# Lookups ------------------------------------------------------------------------------------


def test_lookup_applied_and_not_applied(sim: Simulator, adapter: HttpAdapter) -> None:
    assert adapter.lookup(_request(), ALLOWED).kind == "not_applied"
    sim.queue("lost_response")
    adapter.dispatch(_request(), ALLOWED)
    found = adapter.lookup(_request(), ALLOWED)
    assert (found.kind, found.provider_ref) == ("applied", "sim_1")
    assert sim.state()["lookups"] == 2 and sim.state()["writes"] == 1


def test_lookup_with_another_amount_is_unknown(sim: Simulator, adapter: HttpAdapter) -> None:
    adapter.dispatch(_request(), ALLOWED)
    found = adapter.lookup(_request(amount="9999"), ALLOWED)
    assert found.kind == "unknown" and found.detail.startswith("PW634")


def test_lookup_without_an_answer_is_unknown(adapter: HttpAdapter) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with HttpAdapter(_providers(f"http://127.0.0.1:{port}/refunds", credential=None)) as http:
        assert http.lookup(_request(timeout_s=0.3), ALLOWED).kind == "unknown"


# The allowlist: refused before any connection -----------------------------------------------


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.3)
        yield server


def _no_connection(server: socket.socket) -> bool:
    try:
        connection, _ = server.accept()
    except TimeoutError:
        return True
    connection.close()
    return False


@pytest.mark.parametrize(
    "request_",
    [_request(method="GET"), _request(method="post"), _request(url="https://evil.example.com"),
     _request(url=PAYMENTS + "/")],
    ids=["other-method", "lower-case-method", "other-url", "trailing-slash"],
)  # fmt: skip
@pytest.mark.parametrize("operation", ["dispatch", "lookup"])
def test_undeclared_egress_is_refused_before_connecting(
    listener: socket.socket, request_: EffectRequest, operation: str
) -> None:
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}/refunds"
    everything = {"destination": {url: {"endpoint": endpoint} for url in
                                  (PAYMENTS, PAYMENTS + "/", "https://evil.example.com")}}  # fmt: skip
    with HttpAdapter(Providers.from_mapping(everything)) as http, pytest.raises(PactwrightError) as caught:
        getattr(http, operation)(request_, ALLOWED)
    assert caught.value.code == "PW620"
    assert _no_connection(listener), "a connection was opened for an undeclared egress"


def test_check_egress_alone() -> None:
    check_egress(_request(), [("GET", ORDERS), *ALLOWED])
    with pytest.raises(PactwrightError) as caught:
        check_egress(_request(), [])
    assert caught.value.code == "PW620" and caught.value.expected == "none"


def test_a_declared_url_without_a_route_is_refused_before_connecting(sim: Simulator) -> None:
    with HttpAdapter(Providers()) as http, pytest.raises(PactwrightError) as caught:
        http.dispatch(_request(), ALLOWED)
    assert caught.value.code == "PW621"
    assert sim.state()["requests"] == 0


def test_a_missing_credential_is_refused_before_connecting(sim: Simulator) -> None:
    with HttpAdapter(_providers(f"{sim.url}/refunds"), Credentials(environ={})) as http:
        with pytest.raises(PactwrightError) as caught:
            http.dispatch(_request(), ALLOWED)
        assert caught.value.code == "PW622" and env_name("payments") in (caught.value.hint or "")
        with pytest.raises(PactwrightError):
            http.lookup(_request(), ALLOWED)
    assert sim.state()["requests"] == 0


# Credentials --------------------------------------------------------------------------------


def _everything_said(adapter: HttpAdapter, sim: Simulator, credentials: Credentials) -> list[str]:
    """Every outcome, lookup and error the adapter produces over a run of faults, as text."""
    said: list[str] = [repr(adapter), repr(credentials), str(credentials)]
    for fault in ("", "lost_request", "lost_response", "error_5xx", "slow", "duplicate_ack", "wrong_amount",
                  "wrong_key", "oversized", "not_utf8"):  # fmt: skip
        if fault:
            sim.queue(fault)
        said.append(repr(adapter.dispatch(_request(timeout_s=0.3), ALLOWED)))
        said.append(repr(adapter.lookup(_request(timeout_s=0.3), ALLOWED)))
    for bad in (_request(url="https://evil.example.com"), _request(method="PUT")):
        try:
            adapter.dispatch(bad, ALLOWED)
        except PactwrightError as exc:
            said += [str(exc), repr(exc), json.dumps(exc.to_json())]
    return said


def test_a_credential_never_appears_in_what_the_adapter_returns(sim: Simulator, tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'payments = "{SECRET}"\n')
    secrets.chmod(0o600)
    credentials = Credentials.load(secrets, environ={})
    with HttpAdapter(_providers(f"{sim.url}/refunds"), credentials) as http:
        said = _everything_said(http, sim, credentials)
    assert len(said) > 20
    leaked = [text for text in said if SECRET in text]
    assert not leaked, leaked
    records = sim.state()["records"]
    assert records and all(r["authorization"] == hash_bytes(f"Bearer {SECRET}".encode()) for r in records)


def test_the_credential_goes_only_to_its_own_destination(sim: Simulator, adapter: HttpAdapter) -> None:
    allowed = [*ALLOWED, ("POST", ORDERS)]
    assert adapter.dispatch(_request(), allowed).kind == "acknowledged"
    assert adapter.dispatch(_request(url=ORDERS, idempotency_key="pw-orders"), allowed).kind == "acknowledged"
    by_path = {r["path"]: r["authorization"] for r in sim.state()["records"]}
    assert by_path == {"/refunds": hash_bytes(f"Bearer {SECRET}".encode()), "/orders": None}


class _Scripted(BaseHTTPRequestHandler):
    """Answers every request with whatever the test's `answer(handler)` writes."""

    protocol_version = "HTTP/1.1"
    answer: Callable[[BaseHTTPRequestHandler], None]
    hits: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).hits.append(self.path)
        type(self).answer(self)

    do_GET = do_POST  # noqa: N815


@pytest.fixture
def scripted() -> Iterator[tuple[str, type[_Scripted]]]:
    handler = type("Handler", (_Scripted,), {"hits": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/pay", handler
    server.shutdown()
    server.server_close()


def _send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def test_a_provider_echoing_the_credential_is_scrubbed(scripted: tuple[str, type[_Scripted]]) -> None:
    url, handler = scripted

    def echo(h: BaseHTTPRequestHandler) -> None:
        body = {"id": "r1", "idempotency_key": h.headers["Authorization"], "amount": 6490, "status": "succeeded"}
        _send(h, 200, json.dumps(body).encode())

    handler.answer = staticmethod(echo)  # type: ignore[assignment]
    credentials = Credentials(environ={env_name("payments"): SECRET})
    with HttpAdapter(_providers(url), credentials) as http:
        outcome = http.dispatch(_request(), ALLOWED)
    assert outcome.kind == "mismatch" and outcome.detail.startswith("PW633")
    assert SECRET not in repr(outcome) and "[redacted]" in outcome.detail


def test_a_redirect_is_not_followed(scripted: tuple[str, type[_Scripted]], sim: Simulator) -> None:
    url, handler = scripted
    handler.answer = staticmethod(lambda h: _send(h, 307, b"", {"Location": f"{sim.url}/refunds"}))  # type: ignore[assignment]
    with HttpAdapter(_providers(url), Credentials(environ={env_name("payments"): SECRET})) as http:
        outcome = http.dispatch(_request(), ALLOWED)
    assert (outcome.kind, outcome.status) == ("mismatch", 307)
    assert sim.state()["requests"] == 0, "the redirect target was never called"


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [(500, b"<html>oops</html>", "uncertain"), (502, b'{"applied": false}', "failed"),
     (503, b'{"applied": true}', "uncertain"), (202, b"{}", "mismatch"), (429, b"", "failed")],
)  # fmt: skip
def test_status_mapping_over_the_wire(
    scripted: tuple[str, type[_Scripted]], status: int, body: bytes, kind: str
) -> None:
    url, handler = scripted
    handler.answer = staticmethod(lambda h: _send(h, status, body))  # type: ignore[assignment]
    with HttpAdapter(_providers(url, credential=None)) as http:
        outcome = http.dispatch(_request(), ALLOWED)
    assert (outcome.kind, outcome.status) == (kind, status)


def test_a_dripping_answer_is_cut_off_at_the_timeout(scripted: tuple[str, type[_Scripted]]) -> None:
    url, handler = scripted

    def drip(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "100")
        h.end_headers()
        for _ in range(100):
            try:
                h.wfile.write(b" ")
                h.wfile.flush()
            except OSError:
                return
            time.sleep(0.05)

    handler.answer = staticmethod(drip)  # type: ignore[assignment]
    started = time.monotonic()
    with HttpAdapter(_providers(url, credential=None)) as http:
        outcome = http.dispatch(_request(timeout_s=0.4), ALLOWED)
    assert outcome.kind == "uncertain" and time.monotonic() - started < 1.5


# The answer table, without a network ------------------------------------------------------------

_ACK = {"id": "r1", "idempotency_key": _request().idempotency_key, "amount": 6490, "status": "succeeded"}


@pytest.mark.parametrize(
    ("status", "body", "kind", "code"),
    [
        (201, _ACK, "acknowledged", ""),
        (200, {**_ACK, "amount": "6490"}, "acknowledged", ""),
        (200, {**_ACK, "amount": 6491}, "mismatch", "PW634"),
        (200, {**_ACK, "amount": None}, "mismatch", "PW634"),
        (200, {**_ACK, "amount": True}, "mismatch", "PW634"),
        (200, {k: v for k, v in _ACK.items() if k != "amount"}, "mismatch", "PW634"),
        (200, {**_ACK, "idempotency_key": "pw-other"}, "mismatch", "PW633"),
        (200, {**_ACK, "status": "pending"}, "mismatch", "PW632"),
        (200, {**_ACK, "id": ""}, "mismatch", "PW632"),
        (200, [1], "mismatch", "PW632"),
        (200, b'{"id": "r1", "id": "r2"}', "mismatch", "PW632"),
        (200, b'{"amount": 64.9}', "mismatch", "PW632"),
        (200, b"\xff", "mismatch", "PW631"),
        (404, b"", "failed", "PW635"),
        (503, {"applied": False}, "failed", "PW635"),
        (503, b"", "uncertain", "PW636"),
        (302, b"", "mismatch", "PW632"),
    ],
)
def test_dispatch_answer_table(status: int, body: Any, kind: str, code: str) -> None:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    outcome = dispatch_outcome(_request(), status, data)
    assert (outcome.kind, outcome.detail[:5] if code else outcome.detail) == (kind, code)


def test_an_oversized_answer_is_a_mismatch_whatever_it_says() -> None:
    assert dispatch_outcome(_request(), 201, json.dumps(_ACK).encode(), oversized=True).detail.startswith("PW630")
    assert dispatch_outcome(_request(), 503, b'{"applied": false}', oversized=True).kind == "uncertain"


def test_an_amountless_effect_expects_null() -> None:
    assert dispatch_outcome(_request(amount=None), 201, json.dumps({**_ACK, "amount": None}).encode()).kind == (
        "acknowledged"
    )


@pytest.mark.parametrize(
    ("status", "kind"), [(200, "applied"), (404, "not_applied"), (500, "unknown"), (401, "unknown")]
)
def test_lookup_answer_table(status: int, kind: str) -> None:
    assert lookup_result(_request(), status, json.dumps(_ACK).encode()).kind == kind


# Providers and secrets files --------------------------------------------------------------------


def test_load_providers(tmp_path: Path) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(
        f'[destination."{PAYMENTS}"]\nendpoint = "http://127.0.0.1:8123/refunds"\ncredential = "payments"\n'
    )
    route = load_providers(path).route(PAYMENTS)
    assert (route.endpoint, route.credential) == ("http://127.0.0.1:8123/refunds", "payments")


@pytest.mark.parametrize(
    "text",
    [
        "not toml [",
        "[other]\nx = 1\n",
        f'[destination."{PAYMENTS}"]\n',
        f'[destination."{PAYMENTS}"]\nendpoint = "ftp://host/x"\n',
        f'[destination."{PAYMENTS}"]\nendpoint = "http://user:pw@host/x"\n',
        f'[destination."{PAYMENTS}"]\nendpoint = "http://host:99999/x"\n',
        f'[destination."{PAYMENTS}"]\nendpoint = "http://host/x"\ncredential = "a b"\n',
        f'[destination."{PAYMENTS}"]\nendpoint = "http://host/x"\nretries = 3\n',
        '[destination."not a url"]\nendpoint = "http://host/x"\n',
        "destination = 3\n",
    ],
)
def test_a_bad_providers_file_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(text)
    with pytest.raises(PactwrightError) as caught:
        load_providers(path)
    assert caught.value.code == "PW623" and caught.value.exit_code == 2


def test_a_missing_providers_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PactwrightError) as caught:
        load_providers(tmp_path / "nope.toml")
    assert caught.value.code == "PW623"


@pytest.mark.skipif(os.name != "posix", reason="POSIX modes")
@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620])
def test_a_secrets_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text(f'payments = "{SECRET}"\n')
    path.chmod(mode)
    with pytest.raises(PactwrightError) as caught:
        Credentials.load(path, environ={})
    assert caught.value.code == "PW624" and SECRET not in str(caught.value)


@pytest.mark.parametrize("text", ["payments = 3\n", "[payments]\nx = 'y'\n", "payments = ''\n", "x = [\n",
                                  'payments = "a\\nb"\n'])  # fmt: skip
def test_a_bad_secrets_file_is_refused(tmp_path: Path, text: str) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(PactwrightError) as caught:
        Credentials.load(path, environ={})
    assert caught.value.code == "PW625"


def test_the_environment_wins_and_names_are_normalised(tmp_path: Path) -> None:
    assert env_name("payments.eu-west") == "PACTWRIGHT_SECRET_PAYMENTS_EU_WEST"
    path = tmp_path / "secrets.toml"
    path.write_text('payments = "from-file"\n')
    path.chmod(0o600)
    assert Credentials.load(path, environ={}).get("payments").reveal() == "from-file"
    from_env = Credentials.load(path, environ={"PACTWRIGHT_SECRET_PAYMENTS": "from-env"})
    assert from_env.get("payments").reveal() == "from-env"
    assert "from-env" not in repr(from_env.get("payments")) and "from-file" not in repr(from_env)
