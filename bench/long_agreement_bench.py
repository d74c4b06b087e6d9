"""Long-agreement benchmark: what one outbox delivery costs as an agreement's evidence chain grows.

Before it delivers an entry, the outbox worker walks the agreement's whole
evidence chain (`check_chain`: every record re-parsed as canonical JSON,
re-hashed and cross-checked against the event log and the outbox), so a
delivery costs time linear in the agreement's records. On a policy whose
payments repeat without end (bench/policies/installments.pact), this
commits N payments to one agreement, then drains the N outbox entries with
one worker, twice over in the same run on two identical stores:

- `strict`: every record parsed by the strict canonical parser each time
  (`load_json` remembering nothing, as before it remembered accepted bytes);
- `remembered`: the worker as it runs, parsing with the standard parser the
  bytes it has already accepted as canonical.

It prints deliveries per second of each and their ratio, per N. Both
still walk every record; the ratio is what parsing each record strictly
once saves.

Run: `python bench/long_agreement_bench.py [N ...]` (default 50 200 800; SQLite).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright import canonical
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.activation import activate, verify_bundle
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import Worker
from pactwright.trust import Trust, add_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
from activate_bench import build, sign  # the bundle as `pactwright build` makes it

POLICY = Path(__file__).resolve().parent / "policies" / "installments.pact"
T0 = 1780315200  # 2026-06-01T12:00:00Z


def store_with_payments(directory: Path, files: dict[str, bytes], trust: bytes, payments: int) -> str:
    """A new SQLite store with the bundle active and one agreement holding `payments` committed payments."""
    url = str(directory / f"store-{payments}-{time.perf_counter_ns()}.db")
    with open_store(url) as store:
        activate(store, verify_bundle(files, trust, now=datetime(2026, 6, 1, tzinfo=UTC)))
        open_agreement(store, "bench.installments", {"price": "10.00"}, {"buyer": "bea"}, agreement_id="a1",
                       clock=TestClock(T0))  # fmt: skip
        for n in range(payments):
            submit(store, "a1", "pay", "buyer", "bea", f"pay-{n}", clock=TestClock(T0))
    return url


def drain_rate(url: str, *, remember: bool) -> float:
    """Deliveries per second of one worker draining every pending entry of `url`."""
    largest = canonical._SeenCanonical.LARGEST
    canonical._SEEN_CANONICAL.clear()
    canonical._SeenCanonical.LARGEST = largest if remember else -1
    try:
        with open_store(url) as store, open_ledger(None, url) as ledger:
            start = time.perf_counter()
            outcomes = Worker(store, ledger, TestClock(T0)).drain()
            seconds = time.perf_counter() - start
    finally:
        canonical._SeenCanonical.LARGEST = largest
    delivered = sum(1 for o in outcomes if o.status == "delivered")
    if delivered != len(outcomes):
        raise SystemExit(f"expected every entry delivered, got {[o.status for o in outcomes]}")
    return delivered / seconds


def main(argv: Sequence[str]) -> None:
    sizes = [int(a) for a in argv] or [50, 200, 800]
    approver, signer = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    trust = add_key(add_key(Trust(), approver.public_key(), ["approver"]), signer.public_key(), ["signer"])
    files = sign(build(0, POLICY, allow_incomplete=True), approver, signer)
    print("long-agreement bench: one agreement, N payments committed, one worker drains the N entries (SQLite)")
    print(f"{'N':>6} | {'records at end':>14} | {'strict /s':>10} | {'remembered /s':>13} | {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="pw-long-bench-") as tmp:
        for n in sizes:
            urls = [store_with_payments(Path(tmp), files, trust.to_bytes(), n) for _ in range(2)]
            strict = drain_rate(urls[0], remember=False)
            remembered = drain_rate(urls[1], remember=True)
            print(f"{n:>6} | {2 * n + 1:>14} | {strict:>10.1f} | {remembered:>13.1f} | {remembered / strict:>5.2f}x")
    print("ratio = remembered/strict deliveries per second; both walk every record of the chain per delivery")


if __name__ == "__main__":
    main(sys.argv[1:])
