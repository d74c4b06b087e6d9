"""HTTP benchmark: commands through a live `pactwright serve` against the same commands through the Python API.

On PostgreSQL, in one run and on one fresh store (a new schema, and a new
ledger schema, dropped afterwards), with the reference marketplace bundle
activated as bench/runtime_bench.py does:

- `python-api`: N client processes (separate interpreters, `spawn`, each
  with its own store connection) calling `pactwright.runtime.submit`;
- `http`: `pactwright serve --threads 8` as its own process on loopback, and
  N client processes, each with one keep-alive httpx2 connection, sending
  `POST /v1/agreements/{id}/commands` with a bearer token of the party that
  holds the command's role (the buyer's for `fund` and `release`, the
  seller's for `deliver`), each command's `Idempotency-Key` its own. N
  clients keep N requests in flight.

Both run the same command mix as bench/runtime_bench.py: per agreement
`fund` (one posting, one outbox row), `deliver` (none), `release` (two
postings, one outbox row), every client on its own agreements (no two
clients contend for a row). Agreements are opened before the barrier (over
HTTP for `http`) and are not timed; every client meets the others at a
barrier before the clock starts. It prints commands per second (all clients,
from the barrier to the last answer), p50 and p99 of one command's latency,
and the ratio http / python-api (target: at least 0.3x), then checks that
every timed command committed exactly once.

Run: `python bench/http_bench.py [--commands N] [--clients N] [--postgres URL]`
(default 600 commands per mode, 8 clients; PostgreSQL at postgresql://root@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runtime_bench import MIX, PACT_ID, PARTIES, POSTGRES_URL, PRICE, T0, Measured, fresh_store, gather, prepare
from runtime_bench import run as run_python_api

TARGET = 0.3
SERVE_THREADS = 8


@dataclass(frozen=True)
class HttpJob:
    """One HTTP client's work: the service, its tokens by party, its own agreements and number of commands."""

    base: str
    tokens: dict[str, str]
    agreements: tuple[str, ...]
    commands: int


def _register(url: str) -> dict[str, str]:
    """alice (buyer) and bob (seller) in the store's party registry, each with one bearer token."""
    from pactwright.runtime.parties import add_party
    from pactwright.runtime.store import open_store
    from pactwright.runtime.tokens import issue_token

    tokens = {}
    with open_store(url) as store:
        for role, party in PARTIES.items():
            add_party(store, party, role, None, T0)
            tokens[party] = issue_token(store, party, T0).token
    return tokens


@contextmanager
def serving(url: str, ledger: str, clock_file: Path) -> Iterator[str]:
    """`pactwright serve` on a free loopback port, as its own process; yields its base URL."""
    command = [sys.executable, "-m", "pactwright.cli.main", "serve", "--store", url, "--ledger", ledger, "--port", "0",
               "--threads", str(SERVE_THREADS), "--clock-file", str(clock_file)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:[0-9]+)\n", line)
        if match is None:
            raise SystemExit(f"serve did not start: {line!r} {process.stderr.read() if process.stderr else ''}")
        yield match[1]
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def http_client(job: HttpJob, barrier: Any, results: Any) -> None:
    """Open the agreements over HTTP, wait at the barrier, send the commands one at a time, report."""
    import httpx2

    def auth(party: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {job.tokens[party]}"}

    # TCP_NODELAY, as curl and most HTTP clients set it: without it a POST written as headers then body
    # waits ~40 ms on Nagle's algorithm and the server's delayed ACK, which would measure the kernel.
    nodelay = httpx2.HTTPTransport(socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)])
    with httpx2.Client(base_url=job.base, timeout=120, transport=nodelay) as client:
        for agreement_id in job.agreements:
            body = {"pact_id": PACT_ID, "id": agreement_id, "params": {"price": PRICE}, "parties": PARTIES}
            opened = client.post("/v1/agreements", json=body, headers=auth("alice"))
            if opened.status_code != 201:
                raise RuntimeError(f"open {agreement_id}: {opened.status_code} {opened.text}")
        barrier.wait()
        latencies = []
        start = time.perf_counter_ns()
        for n in range(job.commands):
            agreement_id, step = job.agreements[n // len(MIX)], n % len(MIX)
            transition, role, party, state, _ = MIX[step]
            began = time.perf_counter_ns()
            answer = client.post(f"/v1/agreements/{agreement_id}/commands", json={"transition": transition,
                                                                                     "role": role},
                                 headers={**auth(party), "Idempotency-Key": f"k{step}"})  # fmt: skip
            latencies.append(time.perf_counter_ns() - began)
            doc = answer.json()
            if answer.status_code != 201 or doc.get("version") != step + 1 or doc.get("state") != state:
                raise RuntimeError(f"http: unexpected answer {answer.status_code} {answer.text[:300]}")
        end = time.perf_counter_ns()
    results.put((start, end, latencies))


def run_http(base: str, tokens: dict[str, str], clients: int, commands: int) -> Measured:
    """`clients` HTTP client processes sharing `commands`, each on its own agreements."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(clients), context.Queue()
    jobs = []
    for p in range(clients):
        mine = commands // clients + (1 if p < commands % clients else 0)
        count = -(-mine // len(MIX))
        jobs.append(HttpJob(base, tokens, tuple(f"http{clients}-c{p}-{i}" for i in range(count)), mine))
    return gather(context, http_client, jobs, barrier, results, "postgresql", "http", timeout=1200)


def check_counts(url: str, expected: int) -> None:
    """Every timed command of both modes committed exactly once (the events of the `sub` and `http` agreements)."""
    from pactwright.runtime.store import open_store

    with open_store(url) as store, store.transaction(write=False) as db:
        rows = db.query("SELECT agreement_id, COUNT(*) FROM events GROUP BY agreement_id")
    counts = {"sub": 0, "htt": 0}
    for agreement_id, n in rows:
        counts[str(agreement_id)[:3]] = counts.get(str(agreement_id)[:3], 0) + int(n)
    if counts != {"sub": expected, "htt": expected}:
        raise SystemExit(f"expected {expected} events per mode, found {counts}")


def _line(result: Measured) -> str:
    return (f"{result.mode:<10} {result.processes} clients: {result.rate:8.1f} cmd/s  "
            f"p50 {result.percentile_ms(0.50):7.2f} ms  p99 {result.percentile_ms(0.99):7.2f} ms")  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=600, help="commands per mode (default 600)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients per mode (default 8)")
    parser.add_argument("--postgres", default=POSTGRES_URL, help=f"PostgreSQL URL (default {POSTGRES_URL})")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.commands < args.clients:
        parser.error("--clients must be at least 1 and --commands at least --clients")
    print(f"http bench: {args.commands} commands per mode, mix fund/deliver/release on `{PACT_ID}`, "
          f"{args.clients} client processes per mode, PostgreSQL, serve --threads {SERVE_THREADS}",
          flush=True)  # fmt: skip
    directory = Path(tempfile.mkdtemp(prefix="pw-http-bench-"))
    clock_file = directory / "clock"
    clock_file.write_text(f"{T0}\n")  # the service judges commands at the time the Python API's clients use
    try:
        with fresh_store("postgresql", args.postgres, directory) as (url, ledger):
            prepare(url)
            tokens = _register(url)
            api = run_python_api("postgresql", "submit", url, args.clients, args.commands)
            api = Measured(api.backend, "python-api", api.processes, api.commands, api.seconds, api.latencies_ns)
            print("  " + _line(api), flush=True)
            with serving(url, ledger, clock_file) as base:
                http = run_http(base, tokens, args.clients, args.commands)
            print("  " + _line(http), flush=True)
            check_counts(url, args.commands)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    ratio = http.rate / api.rate
    print()
    print(f"ratio http / python-api: {ratio:.2f}x ({'ok' if ratio >= TARGET else 'BELOW'} target >= {TARGET}x); "
          f"every timed command committed exactly once")  # fmt: skip


if __name__ == "__main__":
    main()
