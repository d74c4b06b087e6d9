"""Runtime benchmark: `submit` through the Python API against a raw-SQL loop doing the same writes.

A command's floor is the database work it cannot avoid: lock the agreement
row and check its version, insert the event, insert the outbox row, bump
the version. This measures, on SQLite and on PostgreSQL, with 1, 2 and 4
client processes (separate interpreters started with `spawn`, each with its
own connection, meeting at a barrier before the clock starts):

- `submit`: `pactwright.runtime.submit` (load and re-verify the bundle, every
  check, the ledger program against the agreement's own balances, event,
  outbox, idempotency key, evidence record, new agreement row). On SQLite
  the bundle's rows are read again only when the store's change mark moved
  (another connection committed, or this one wrote a bundle table:
  docs/runtime.md "What a command re-verifies"), so with one client they
  are read once per process and with several, whenever another client
  committed in between;
- `raw-sql`: the same transaction with only those four writes, through the
  same store connection (same WAL, fsync and isolation settings), into
  identical copies of the runtime's tables (`raw_agreements`, `raw_events`,
  `raw_outbox`, made from the runtime's own migration DDL), except that
  `raw_events` has no idempotency key column and no index on it (migration
  8 keeps the key on the event row): the key is the runtime's own work, so
  the baseline does not carry its cost.

Both run the same command mix on the reference marketplace policy: per
agreement `fund` (one posting, one outbox row), `deliver` (no posting, no
outbox row), `release` (two postings, one outbox row), with every client on
its own agreements so no two clients contend for one row. It prints the
commands per second (all clients, from the barrier to the last commit), p50
and p99 latency of one command, and the ratio submit/raw-sql (target: at
least 0.5x). When `pactwright worker` exists it also times `worker --drain`
delivering the outbox rows the run produced (to a SQLite ledger file).

On SQLite it also prints the pages each commit writes to the WAL, per mode
(`pages_per_command`): with `synchronous=FULL` each one is written and fsynced
at commit, which is much of why the ratio there is lower.

Each backend run uses a fresh store (a new SQLite file, or a new PostgreSQL
schema dropped afterwards). Agreements are opened before the barrier and are
not timed.

Each configuration runs `--rounds` times (default 3) as back-to-back pairs,
raw-sql then submit and the other way round in turn, and the ratio printed
is the median of the pairs' ratios, with its range.

Run: `python bench/runtime_bench.py [--commands N] [--rounds R] [--postgres URL] [--backends sqlite,postgresql]`
(default 1,500 commands per configuration and round; PostgreSQL at postgresql://root@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import multiprocessing
import re
import secrets
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.store import Store, open_store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import MIGRATIONS

PACT_ID = "marketplace.milestone"
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
PRICE = "64.90"
T0 = 1780315200  # 2026-06-01T12:00:00Z, the test clock's time for every command
POSTGRES_URL = "postgresql://root@127.0.0.1:5432/test"
PROCESS_COUNTS = (1, 2, 4)
# Per configuration and round. Long enough that a pair spans several WAL checkpoints and fsync stalls on
# SQLite (at 300 a pair lasted about 0.1 s, and one stall moved its ratio by a tenth either way).
COMMANDS = 1500
# (transition, role, party, state after, postings as the runtime computes them for PRICE)
MIX = (
    ("fund", "buyer", "alice", "funded", (("world", "escrow", 6490),)),
    ("deliver", "seller", "bob", "delivered", ()),
    ("release", "buyer", "alice", "released", (("escrow", "platform", 649), ("escrow", "seller", 5841))),
)
RAW_TABLES = ("agreements", "events", "outbox")


@dataclass(frozen=True)
class Job:
    """One client's work: its mode, store, own agreements and number of commands."""

    mode: str  # "submit" | "raw-sql"
    url: str
    agreements: tuple[str, ...]
    commands: int


@dataclass(frozen=True)
class Measured:
    backend: str
    mode: str
    processes: int
    commands: int
    seconds: float
    latencies_ns: tuple[int, ...]
    round_no: int = 0

    @property
    def rate(self) -> float:
        return self.commands / self.seconds

    def percentile_ms(self, q: float) -> float:
        """Nearest-rank percentile of one command's latency, in milliseconds."""
        ordered = sorted(self.latencies_ns)
        return ordered[max(1, math.ceil(q * len(ordered))) - 1] / 1e6


# The store ------------------------------------------------------------------------


@contextmanager
def fresh_store(backend: str, postgres: str, directory: Path) -> Iterator[tuple[str, str]]:
    """(store URL, ledger URL): new SQLite files, or two new PostgreSQL schemas dropped afterwards."""
    if backend == "sqlite":
        name = f"store-{secrets.token_hex(4)}"
        yield str(directory / f"{name}.db"), str(directory / f"{name}.ledger.sqlite")
        return
    import psycopg

    schema = f"pw_bench_{secrets.token_hex(6)}"
    separator = "&" if "?" in postgres else "?"
    with psycopg.connect(postgres, autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        admin.execute(f'CREATE SCHEMA "{schema}_ledger"')
        try:
            store_url, ledger_url = (
                f"{postgres}{separator}options=-csearch_path%3D{s}" for s in (schema, f"{schema}_ledger")
            )
            yield store_url, ledger_url
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
            admin.execute(f'DROP SCHEMA "{schema}_ledger" CASCADE')


def raw_ddl(backend: str) -> list[str]:
    """The runtime's own DDL for agreements, events and outbox on `backend`, renamed to `raw_*` copies."""
    out = []
    indexes: set[str] = set()  # the indexes made on the copied tables, which a later migration may drop
    for statement in (s for m in MIGRATIONS if backend in m.backends for s in m.statements):
        dropped = re.fullmatch(r"DROP INDEX (\w+)", statement)
        if dropped is not None:
            if dropped.group(1) in indexes:
                out.append(f"DROP INDEX raw_{dropped.group(1)}")
            continue
        target = re.search(r"(?:TABLE|ON) (\w+)", statement)
        if target is None or target.group(1) not in RAW_TABLES:
            continue
        if "idempotency_key" in statement or "evidence_" in statement:  # the key and the evidence link are the
            continue  # runtime's own work
        made = re.match(r"CREATE INDEX (\w+)", statement)
        if made is not None:
            indexes.add(made.group(1))
        renamed = re.sub(rf"\b({'|'.join(RAW_TABLES)})\b", r"raw_\1", statement)
        out.append(re.sub(r"CREATE INDEX (\w+)", r"CREATE INDEX raw_\1", renamed))
    return out


def prepare(url: str) -> None:
    """Activate the reference bundle (built, verified, approved and signed here) and make the raw copies."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from activate_bench import build, sign  # the bundle as `pactwright build` makes it
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from pactwright.runtime.activation import activate, verify_bundle
    from pactwright.trust import Trust, add_key

    approver, signer = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    trust = add_key(add_key(Trust(), approver.public_key(), ["approver"]), signer.public_key(), ["signer"])
    files = sign(build(0), approver, signer)
    with open_store(url) as store:
        activate(store, verify_bundle(files, trust.to_bytes(), now=datetime(2026, 6, 1, tzinfo=UTC)))
        with store.transaction() as db:
            for statement in raw_ddl(db.name):
                db.execute(statement.format(blob=db.blob_type))


# One client process -----------------------------------------------------------------


def _open(store: Store, job: Job) -> None:
    """Open the client's agreements (untimed); the raw loop gets copies of the same rows."""
    for agreement_id in job.agreements:
        open_agreement(store, PACT_ID, {"price": PRICE}, PARTIES, agreement_id=agreement_id, clock=TestClock(T0))
        if job.mode == "raw-sql":
            with store.transaction(exclusive=False) as db:
                db.execute("INSERT INTO raw_agreements SELECT * FROM agreements WHERE id = ?", (agreement_id,))


def _raw_command(db: Backend, agreement_id: str, expect: int, step: int) -> None:
    """The four writes of a command, nothing else: lock + version check, event, outbox row, version."""
    transition, role, party, state, postings = MIX[step]
    lock = " FOR UPDATE" if db.name == "postgresql" else ""
    rows = db.query(f"SELECT version FROM raw_agreements WHERE id = ?{lock}", (agreement_id,))  # noqa: S608
    if not rows or int(rows[0][0]) != expect:
        raise RuntimeError(f"raw loop: {agreement_id} is not at version {expect}")
    seq = expect + 1
    event_id = f"{agreement_id}/{seq}"
    command = {"transition": transition, "actor": {"role": role, "party": party}, "params": {}}
    moves = [{"source": s, "destination": d, "amount": str(a), "asset": "EUR/2"} for s, d, a in postings]
    body = json.dumps({"command": command, "to": state, "postings": moves}, sort_keys=True, separators=(",", ":"))
    db.execute(
        "INSERT INTO raw_events (agreement_id, seq, event_id, transition, actor_role, actor_party, committed_at, "
        "payload_digest, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (agreement_id, seq, event_id, transition, role, party, T0, "0" * 64, body),
    )
    if postings:
        db.execute(
            "INSERT INTO raw_outbox (agreement_id, event_seq, group_index, reference, program_path, variables, "
            "expected_postings, status, attempts, created_at, updated_at) "
            "VALUES (?, ?, 0, ?, ?, ?, ?, 'pending', 0, ?, ?)",
            (agreement_id, seq, f"{event_id}/0", f"ledger/{transition}.num", "{}", json.dumps(moves), T0, T0),
        )
    db.execute(
        "UPDATE raw_agreements SET version = ?, state = ?, updated_at = ? WHERE id = ? AND version = ?",
        (seq, state, T0, agreement_id, expect),
    )


def client(job: Job, barrier: Any, results: Any) -> None:
    """Open the agreements, wait at the barrier, run the commands, report (start, end, latencies)."""
    clock = TestClock(T0)
    with open_store(job.url) as store:
        _open(store, job)
        barrier.wait()
        latencies = []
        start = time.perf_counter_ns()
        for n in range(job.commands):
            agreement_id, step = job.agreements[n // len(MIX)], n % len(MIX)
            began = time.perf_counter_ns()
            if job.mode == "submit":
                transition, role, party, state, _ = MIX[step]
                result = submit(store, agreement_id, transition, role, party, f"k{step}", step, clock=clock)
                if result.version != step + 1 or result.state != state or result.replayed:
                    raise RuntimeError(f"submit: unexpected result {result}")
            else:
                with store.transaction(exclusive=False) as db:
                    _raw_command(db, agreement_id, step, step)
            latencies.append(time.perf_counter_ns() - began)
        end = time.perf_counter_ns()
    results.put((start, end, latencies))


def run(backend: str, mode: str, url: str, processes: int, commands: int, round_no: int = 0) -> Measured:
    """One configuration: `processes` clients sharing `commands`, each on its own agreements."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    jobs = []
    for p in range(processes):
        mine = commands // processes + (1 if p < commands % processes else 0)
        count = -(-mine // len(MIX))
        jobs.append(Job(mode, url, tuple(f"{mode[:3]}{processes}-r{round_no}-c{p}-{i}" for i in range(count)), mine))
    return gather(context, client, jobs, barrier, results, backend, mode, round_no)


def gather(context: Any, target: Any, jobs: Sequence[Any], barrier: Any, results: Any, backend: str, mode: str,
           round_no: int = 0, timeout: float = 600) -> Measured:  # fmt: skip
    """Run one client process per job, wait for every report, and pool them (barrier to last commit)."""
    workers = [context.Process(target=target, args=(job, barrier, results)) for job in jobs]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=timeout) for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise SystemExit(f"a {mode} client failed on {backend} (exit {worker.exitcode})")
    start = min(r[0] for r in reports)
    end = max(r[1] for r in reports)
    latencies = tuple(ns for r in reports for ns in r[2])
    return Measured(backend, mode, len(jobs), len(latencies), (end - start) / 1e9, latencies, round_no)


def check_counts(url: str, expected: int) -> None:
    """Every timed command committed exactly once: events and outbox rows as the mix writes them."""
    with open_store(url) as store, store.transaction(write=False) as db:
        events = int(db.query("SELECT COUNT(*) FROM events")[0][0])
        raw = int(db.query("SELECT COUNT(*) FROM raw_events")[0][0])
    if events != expected or raw != expected:
        raise SystemExit(f"expected {expected} events per mode, found submit {events}, raw-sql {raw}")


# The worker -----------------------------------------------------------------------


def worker_rate(url: str, ledger_url: str) -> str:
    """One `Worker.drain()` over the outbox rows the run produced, to a new ledger, or why it is not measured."""
    if importlib.util.find_spec("pactwright.runtime.worker") is None:
        return "not measured (runtime/worker.py does not exist yet)"
    from pactwright.runtime.ledger_db import open_ledger
    from pactwright.runtime.worker import Worker

    with open_store(url) as store:
        with store.transaction(write=False) as db:
            pending = int(db.query("SELECT COUNT(*) FROM outbox WHERE status = 'pending'")[0][0])
        ledger = open_ledger(ledger_url, url)
        try:
            start = time.perf_counter()
            outcomes = Worker(store, ledger, TestClock(T0)).drain()
            seconds = time.perf_counter() - start
        finally:
            ledger.close()
    statuses: dict[str, int] = {}
    for outcome in outcomes:
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
    delivered = statuses.get("delivered", 0)
    shown = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    return (
        f"{delivered / seconds:.1f} deliveries/s: one worker process drained {pending} pending outbox rows "
        f"in {seconds:.2f} s ({shown}) into a ledger of its own database"
    )


# What a commit writes ------------------------------------------------------------------


def pages_per_command(directory: Path, agreements: int = 60) -> str:
    """SQLite only: the database pages each commit writes, submit against raw-sql.

    With `synchronous=FULL` every page a commit dirties is written to the WAL
    and fsynced with it, so on a disk whose fsync cost grows with what was
    written, pages per command explain much of the gap between the two
    rates. Measured on a store of its own, untimed, with automatic
    checkpoints off: the WAL then holds exactly the frames the commands appended.
    """
    url = str(directory / f"pages-{secrets.token_hex(4)}.db")
    prepare(url)
    clock = TestClock(T0)
    frames: dict[str, float] = {}
    with open_store(url) as store:
        with store.transaction(write=False) as db:
            page_size = int(db.query("PRAGMA page_size")[0][0])
            db.query("PRAGMA wal_autocheckpoint=0")
        for mode in ("submit", "raw-sql"):
            job = Job(mode, url, tuple(f"pages-{mode[:3]}-{i}" for i in range(agreements)), 0)
            _open(store, job)
            with contextlib.closing(sqlite3.connect(url)) as other:  # empty the WAL: only this mode's frames
                other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            for agreement_id in job.agreements:
                for step, (transition, role, party, _, _) in enumerate(MIX):
                    if mode == "submit":
                        submit(store, agreement_id, transition, role, party, f"k{step}", step, clock=clock)
                    else:
                        with store.transaction(exclusive=False) as db:
                            _raw_command(db, agreement_id, step, step)
            written = Path(url + "-wal").stat().st_size - 32  # the WAL header, then (24-byte header + page) frames
            frames[mode] = written // (24 + page_size) / (agreements * len(MIX))
    return (
        f"submit {frames['submit']:.1f}, raw-sql {frames['raw-sql']:.1f} pages of {page_size} bytes per command "
        "(WAL frames per commit over the mix; each is written and fsynced at commit)"
    )


# Main -----------------------------------------------------------------------------


def bench_backend(
    backend: str, postgres: str, commands: int, rounds: int, directory: Path
) -> tuple[list[Measured], str]:
    """Every configuration `rounds` times, raw-sql and submit back to back, the order swapped each round.

    One run of each mode is at the mercy of the disk's fsync latency and the
    machine's load in its few seconds; pairs run back to back, in both
    orders, meet the same conditions, and the summary takes the median of
    the pairs' ratios (printing the lowest and highest too).
    """
    with fresh_store(backend, postgres, directory) as (url, ledger_url):
        prepare(url)
        measured: list[Measured] = []
        for processes in PROCESS_COUNTS:
            for round_no in range(rounds):
                modes = ("raw-sql", "submit") if round_no % 2 == 0 else ("submit", "raw-sql")
                pair = {mode: run(backend, mode, url, processes, commands, round_no) for mode in modes}
                measured += pair.values()
                ours, raw = pair["submit"], pair["raw-sql"]
                print(
                    f"  {backend:<10} {processes} proc, round {round_no + 1}: submit {ours.rate:8.1f} cmd/s "
                    f"(p50 {ours.percentile_ms(0.50):.2f} ms), raw-sql {raw.rate:8.1f} cmd/s "
                    f"(p50 {raw.percentile_ms(0.50):.2f} ms): {ours.rate / raw.rate:.2f}x",
                    flush=True,
                )
        check_counts(url, commands * len(PROCESS_COUNTS) * rounds)
        return measured, worker_rate(url, ledger_url)


def summary(measured: Sequence[Measured], workers: dict[str, str], target: float) -> None:
    """Per configuration: rates and latency percentiles over every round, the median round ratio and its range."""
    print()
    header = (
        f"{'backend':<10} {'procs':>5} | {'submit cmd/s':>12} {'p50 ms':>8} {'p99 ms':>8} | "
        f"{'raw cmd/s':>10} {'p50 ms':>8} {'p99 ms':>8} | {'ratio':>6} {'range':>11}"
    )
    print(header)
    print("-" * len(header))
    for backend in dict.fromkeys(m.backend for m in measured):
        for processes in PROCESS_COUNTS:
            runs = [m for m in measured if m.backend == backend and m.processes == processes]
            ours = _pooled([m for m in runs if m.mode == "submit"])
            raw = _pooled([m for m in runs if m.mode == "raw-sql"])
            ratios = sorted(
                o.rate / r.rate
                for o in runs if o.mode == "submit"
                for r in runs if r.mode == "raw-sql" and r.round_no == o.round_no
            )  # fmt: skip
            ratio = statistics.median(ratios)
            print(
                f"{backend:<10} {processes:>5} | {ours.rate:>12.1f} {ours.percentile_ms(0.5):>8.2f} "
                f"{ours.percentile_ms(0.99):>8.2f} | {raw.rate:>10.1f} {raw.percentile_ms(0.5):>8.2f} "
                f"{raw.percentile_ms(0.99):>8.2f} | {ratio:>5.2f}x {ratios[0]:>5.2f}-{ratios[-1]:.2f} "
                f"{'ok' if ratio >= target else 'BELOW'}"
            )
    print(
        f"ratio = submit/raw-sql commands per second, the median over rounds of back-to-back pairs (range: lowest "
        f"and highest pair); rates and latencies pool every round; target >= {target}x"
    )
    for backend, line in workers.items():
        print(f"worker ({backend}): {line}")


def _pooled(runs: Sequence[Measured]) -> Measured:
    """The rounds of one mode as one run: every command, every second, every latency."""
    first = runs[0]
    latencies = tuple(ns for m in runs for ns in m.latencies_ns)
    return Measured(first.backend, first.mode, first.processes, len(latencies), sum(m.seconds for m in runs), latencies)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--commands", type=int, default=COMMANDS, help=f"commands per configuration (default {COMMANDS})"
    )
    parser.add_argument("--postgres", default=POSTGRES_URL, help=f"PostgreSQL URL (default {POSTGRES_URL})")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated: sqlite, postgresql")
    parser.add_argument("--rounds", type=int, default=3, help="back-to-back raw-sql/submit pairs per configuration")
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if args.commands < max(PROCESS_COUNTS) or any(b not in ("sqlite", "postgresql") for b in backends):
        parser.error(f"--commands must be at least {max(PROCESS_COUNTS)}; backends are sqlite and postgresql")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    print(
        f"runtime bench: {args.commands} commands per configuration, mix fund/deliver/release on "
        f"`{PACT_ID}`, clients {', '.join(map(str, PROCESS_COUNTS))} (spawned processes, own agreements), "
        f"{args.rounds} rounds",
        flush=True,
    )
    directory = Path(tempfile.mkdtemp(prefix="pw-runtime-bench-"))
    measured: list[Measured] = []
    workers: dict[str, str] = {}
    try:
        for backend in backends:
            results, workers[backend] = bench_backend(backend, args.postgres, args.commands, args.rounds, directory)
            measured += results
        pages = pages_per_command(directory) if "sqlite" in backends else None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    summary(measured, workers, 0.5)
    if pages is not None:
        print(f"pages written (sqlite): {pages}")


if __name__ == "__main__":
    main()
