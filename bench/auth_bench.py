"""Authentication timing: an unknown token id against a wrong secret for a known one.

`authenticate` must not tell a caller which token ids exist: both refusals
are PW671, and both do one primary-key lookup, one SHA-256 and one
`hmac.compare_digest` (tests/test_tokens.py counts that work). This measures
what is left: the wall-clock time of each, interleaved call by call so drift
of the machine hits both alike, on SQLite and on PostgreSQL, with the
median, p90 and the ratio of the medians (unknown / wrong; 1.0 is no
difference). A valid token is timed too, for scale: it reads the party's
roles as well.

Run: `python bench/auth_bench.py [--calls N] [--postgres URL] [--backends sqlite,postgresql]`
(default 2000 calls of each; PostgreSQL at postgresql://root@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pactwright.errors import PactwrightError
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import Store, open_store
from pactwright.runtime.tokens import authenticate, issue_token

DEFAULT_POSTGRES = "postgresql://root@127.0.0.1:5432/test"
T0 = 1780315200


@contextlib.contextmanager
def _store_url(backend: str, postgres: str) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield str(Path(directory) / "auth.db")
        return
    import psycopg

    schema = f"pw_auth_bench_{secrets.token_hex(6)}"
    with psycopg.connect(postgres, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield f"{postgres}?options=-csearch_path%3D{schema}"
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter_ns()
    with contextlib.suppress(PactwrightError):
        call()
    return (time.perf_counter_ns() - start) / 1000.0


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(store: Store, calls: int) -> dict[str, list[float]]:
    for n in range(50):
        add_party(store, f"party{n}", "buyer", None, T0)
    good = [issue_token(store, f"party{n}", T0) for n in range(50)]
    secret = good[0].token.split("_", 2)[2]
    wrong = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    headers = {
        "unknown id": f"Bearer pwt_{secrets.token_hex(8)}_{secret}",
        "wrong secret": f"Bearer pwt_{good[0].token_id}_{wrong}",
        "valid": f"Bearer {good[0].token}",
    }
    for header in headers.values():  # warm up caches and the connection
        for _ in range(50):
            _timed(lambda h=header: authenticate(store, h))  # type: ignore[misc]
    out: dict[str, list[float]] = {name: [] for name in headers}
    for _ in range(calls):
        for name, header in headers.items():
            out[name].append(_timed(lambda h=header: authenticate(store, h)))  # type: ignore[misc]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    for backend in args.backends.split(","):
        with _store_url(backend, args.postgres) as url, open_store(url) as store:
            times = run(store, args.calls)
        print(f"{backend}: {args.calls} calls each")
        for name, values in times.items():
            print(f"  {name:<13} median {statistics.median(values):8.1f} us   p90 {_pct(values, 0.9):8.1f} us")
        ratio = statistics.median(times["unknown id"]) / statistics.median(times["wrong secret"])
        print(f"  ratio of medians unknown id / wrong secret: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
