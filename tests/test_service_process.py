"""`pactwright serve` as a real OS process, called over loopback with httpx2; and on a deploy host.

The deploy-host run starts `serve` in a fresh interpreter whose
`sys.meta_path` refuses lark, jinja2, networkx and z3 (the child of
tests/test_activation_runtime_imports.py): the service starts, answers
`/healthz` and a command, says the review pages are not available there
(PW687), stops on SIGTERM, and loaded none of the compiler's modules.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.signed_bundles import BACKENDS
from tests.test_activation_runtime_imports import _CHILD
from tests.test_service_env import OPEN_BODY, Env, service_env


@contextlib.contextmanager
def serving(command: list[str]) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Start a `serve` command with `--port 0`; yield its base URL once it says where it listens."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:[0-9]+)\n", line)
        assert match, (line, process.stderr.read() if process.poll() is not None and process.stderr else "")
        yield match[1], process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


def _stop(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    return process.returncode, out, err


def _exercise(env: Env, base: str) -> None:
    with httpx2.Client(base_url=base, timeout=30) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200
        assert client.post("/v1/agreements", json=OPEN_BODY, headers=env.auth("alice")).status_code == 201
        fund = client.post("/v1/agreements/a1/commands", json={"transition": "fund", "role": "buyer"},
                           headers={**env.auth("alice"), "Idempotency-Key": "k1"})  # fmt: skip
        assert fund.status_code == 201, fund.text
        assert fund.json()["event_id"] == "a1/1"
        missing = client.get("/v1/nothing")
        assert (missing.status_code, missing.headers["content-type"]) == (404, "application/problem+json")


@pytest.mark.parametrize("backend", BACKENDS)
def test_serve_runs_as_a_process_and_stops_on_sigterm(backend: str, tmp_path: Path, cli: Path) -> None:
    with service_env(backend, tmp_path) as env:
        command = [str(cli), "serve", "--store", env.store, "--ledger", env.ledger, "--port", "0"]
        with serving(command) as (base, process):
            _exercise(env, base)
            code, _, err = _stop(process)
        assert code == 0, err
        assert "Traceback" not in err


def test_serve_works_without_the_compiler_stack(tmp_path: Path) -> None:
    with service_env("sqlite", tmp_path) as env:
        command = [sys.executable, "-c", _CHILD, "serve", "--store", env.store, "--ledger", env.ledger, "--port", "0"]
        with serving(command) as (base, process):
            _exercise(env, base)
            with httpx2.Client(base_url=base, timeout=30) as client:
                page = client.get("/review/agreements/a1", headers=env.auth("alice"))
            assert (page.status_code, page.json()["code"]) == (501, "PW687")
            code, out, err = _stop(process)
    assert code == 0, err
    assert "LOADED []" in out


def test_serve_refuses_a_port_it_cannot_bind(tmp_path: Path, cli: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = subprocess.run([str(cli), "serve", "--store", str(tmp_path / "s.db"), "--port", str(port)],
                                capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("error[PW001]: cannot listen on `127.0.0.1:")


def test_the_listening_socket_sends_without_waiting_for_nagle() -> None:
    """TCP_NODELAY on the listening socket (inherited by each connection): else ~40 ms per response on loopback."""
    import socket

    from pactwright.cli.cmd_serve import _listen

    sock = _listen("127.0.0.1", 0)
    try:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        client = socket.create_connection(sock.getsockname()[:2])
        accepted, _ = sock.accept()
        try:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            accepted.close()
            client.close()
    finally:
        sock.close()
