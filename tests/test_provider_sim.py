"""The provider simulator over real sockets: keyed writes, lookups, every fault, the control API, the CLI.

Requests go through `http.client` (not the adapter under test elsewhere), so
these tests pin the simulator's own behaviour: what it counts is what it did.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pactwright.canonical import hash_bytes
from pactwright.errors import UsageError
from pactwright.runtime.provider_sim import FAULTS, Simulator, start_simulator

BODY = json.dumps({"agreement": "a1", "amount": 6490, "currency": "EUR", "effect": "refund"}).encode()


@pytest.fixture(scope="module")
def shared() -> Iterator[Simulator]:
    with start_simulator(slow_seconds=0.5) as simulator:
        yield simulator


@pytest.fixture
def sim(shared: Simulator) -> Simulator:
    shared.reset()
    return shared


def _call(
    sim: Simulator, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
    timeout: float = 5.0,
) -> tuple[int, bytes]:  # fmt: skip
    connection = http.client.HTTPConnection(sim.host, sim.port, timeout=timeout)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _write(sim: Simulator, key: str = "pw-k1", body: bytes = BODY, path: str = "/refunds") -> tuple[int, Any]:
    status, data = _call(sim, "POST", path, body, {"Idempotency-Key": key, "Content-Type": "application/json"})
    return status, data


def test_a_write_is_acknowledged_with_its_key_and_amount(sim: Simulator) -> None:
    status, data = _write(sim)
    assert status == 201
    assert json.loads(data) == {"id": "sim_1", "idempotency_key": "pw-k1", "amount": 6490, "status": "succeeded"}
    state = sim.state()
    assert (state["writes"], state["by_key"], state["requests"]) == (1, {"pw-k1": 1}, 1)
    record = state["records"][0]
    assert record["body_digest"] == hash_bytes(BODY)
    assert (record["method"], record["path"], record["authorization"]) == ("POST", "/refunds", None)


def test_the_same_key_returns_the_original_write(sim: Simulator) -> None:
    first = json.loads(_write(sim)[1])
    status, data = _write(sim, body=BODY.replace(b"6490", b"9999"))
    assert status == 200
    replay = json.loads(data)
    assert replay["id"] == first["id"] and replay["amount"] == 6490 and replay["duplicate"] is True
    assert sim.state()["writes"] == 1
    _write(sim, key="pw-k2")
    assert sim.state()["by_key"] == {"pw-k1": 1, "pw-k2": 1}


@pytest.mark.parametrize("via", ["python", "http"])
def test_ignore_keys_makes_a_second_write(sim: Simulator, via: str) -> None:
    if via == "python":
        sim.set_mode(ignore_keys=True)
    else:
        assert _call(sim, "POST", "/_sim/mode", b'{"ignore_keys": true}')[0] == 200
    ids = {json.loads(_write(sim)[1])["id"] for _ in range(2)}
    assert ids == {"sim_1", "sim_2"}
    assert sim.state()["writes"] == 2 and sim.state()["by_key"] == {"pw-k1": 2}
    sim.reset()
    _write(sim)
    _write(sim)
    assert sim.state()["writes"] == 1, "reset restores the start-up mode"


def test_lookup_by_key(sim: Simulator) -> None:
    _write(sim, key="pw-a/b c")
    status, data = _call(sim, "GET", "/refunds/pw-a%2Fb%20c")
    assert status == 200 and json.loads(data)["idempotency_key"] == "pw-a/b c"
    assert _call(sim, "GET", "/refunds/pw-missing")[0] == 404
    state = sim.state()
    assert (state["lookups"], state["requests"], state["writes"]) == (2, 3, 1)


def test_a_write_without_a_key_or_json_is_refused_and_spends_no_fault(sim: Simulator) -> None:
    sim.queue("error_5xx")
    assert _call(sim, "POST", "/refunds", BODY)[0] == 400
    assert _write(sim, body=b"not json")[0] == 400
    assert sim.state()["writes"] == 0 and sim.state()["pending_faults"] == ["error_5xx"]
    assert _write(sim)[0] == 503


def _dropped(sim: Simulator) -> bool:
    try:
        _write(sim)
    except (http.client.RemoteDisconnected, ConnectionError):
        return True
    return False


@pytest.mark.parametrize(("fault", "writes"), [("lost_request", 0), ("lost_response", 1)])
def test_lost_faults_close_without_an_answer(sim: Simulator, fault: str, writes: int) -> None:
    sim.queue(fault)
    assert _dropped(sim)
    assert sim.state()["writes"] == writes
    assert _write(sim)[0] == (201 if writes == 0 else 200), "the next request is served normally"


def test_error_5xx_applies_nothing(sim: Simulator) -> None:
    sim.queue("error_5xx")
    status, data = _write(sim)
    assert status == 503 and json.loads(data)["applied"] is False
    assert sim.state()["writes"] == 0


def test_slow_writes_first_then_answers_late(sim: Simulator) -> None:
    sim.queue("slow")
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        _write_with_timeout(sim, 0.2)
    assert time.monotonic() - started < 0.45
    assert sim.state()["writes"] == 1, "the write happened although the caller gave up"


def _write_with_timeout(sim: Simulator, timeout: float) -> None:
    _call(sim, "POST", "/refunds", BODY, {"Idempotency-Key": "pw-k1"}, timeout=timeout)


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        ("duplicate_ack", lambda d: d["duplicate"] is True and d["amount"] == 6490),
        ("wrong_amount", lambda d: d["amount"] == 6491 and d["idempotency_key"] == "pw-k1"),
        ("wrong_key", lambda d: d["idempotency_key"] != "pw-k1" and d["amount"] == 6490),
        ("oversized", lambda d: len(json.dumps(d)) > 64 * 1024),
    ],
)
def test_answer_faults_write_once_and_answer_wrongly(sim: Simulator, fault: str, check: Any) -> None:
    sim.queue(fault)
    status, data = _write(sim)
    assert status == 201 and check(json.loads(data))
    assert sim.state()["writes"] == 1


def test_not_utf8_answer(sim: Simulator) -> None:
    sim.queue("not_utf8")
    status, data = _write(sim)
    assert status == 201
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    assert sim.state()["writes"] == 1


def test_faults_are_spent_first_in_first_out_on_writes_only(sim: Simulator) -> None:
    assert _call(sim, "POST", "/_sim/faults", json.dumps({"faults": ["error_5xx", "wrong_key"]}).encode())[0] == 200
    assert _call(sim, "GET", "/refunds/pw-k1")[0] == 404  # a lookup spends nothing
    assert _write(sim)[0] == 503
    assert json.loads(_write(sim)[1])["idempotency_key"] == "pw-k1-other"
    assert json.loads(_write(sim)[1])["idempotency_key"] == "pw-k1"
    assert sim.state()["pending_faults"] == []


def test_control_endpoints_refuse_bad_input(sim: Simulator) -> None:
    status, data = _call(sim, "POST", "/_sim/faults", b'{"faults": ["meteor"]}')
    assert status == 400 and json.loads(data)["known"] == list(FAULTS)
    assert _call(sim, "POST", "/_sim/faults", b'{"faults": "slow"}')[0] == 400
    assert _call(sim, "POST", "/_sim/mode", b'{"ignore_keys": "yes"}')[0] == 400
    assert _call(sim, "POST", "/_sim/mode", b"[")[0] == 400
    assert _call(sim, "POST", "/_sim/nope", b"{}")[0] == 404
    assert _call(sim, "GET", "/_sim/nope")[0] == 404
    assert sim.state()["pending_faults"] == []


def test_state_and_reset_over_http(sim: Simulator) -> None:
    _write(sim)
    sim.queue("slow")
    state = json.loads(_call(sim, "GET", "/_sim/state")[1])
    assert (state["writes"], state["requests"], state["pending_faults"]) == (1, 1, ["slow"])
    assert _call(sim, "POST", "/_sim/reset", b"")[0] == 200
    assert sim.state()["writes"] == 0 and sim.state()["pending_faults"] == []


def test_an_unknown_fault_is_refused_in_python() -> None:
    with start_simulator() as simulator, pytest.raises(UsageError) as caught:
        simulator.queue("slow", "meteor")
    assert caught.value.code == "PW626"


def test_a_taken_port_is_refused() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(UsageError) as caught:
            start_simulator(taken.getsockname()[1])
    assert caught.value.code == "PW627"


def test_concurrent_writes_are_counted_exactly(sim: Simulator) -> None:
    import threading

    threads = [threading.Thread(target=_write, args=(sim, f"pw-{i % 5}")) for i in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    state = sim.state()
    assert state["writes"] == 5 and state["requests"] == 40
    assert state["by_key"] == {f"pw-{i}": 1 for i in range(5)}


def test_the_cli_serves_and_stops_on_sigterm() -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "pactwright.cli.main", "provider-sim", "--port", "0", "--slow-seconds", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("provider simulator listening on http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("POST", "/refunds", body=BODY, headers={"Idempotency-Key": "pw-cli"})
        assert connection.getresponse().status == 201
        connection.close()
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert "stopped after 1 writes" in out and err == ""


def test_the_cli_refuses_a_bad_port() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", "provider-sim", "--port", "70000"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert result.returncode == 2 and result.stderr.startswith("error[PW001]")
