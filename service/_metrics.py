"""`/metrics` in the Prometheus text format (version 0.0.4).

Two sources, never mixed up:

- per-request facts are counters in this process (they reset when it
  restarts, as Prometheus counters may): `pactwright_commands_total` by
  outcome (`committed`, `replayed`, `waiting_for_approval`, `dry_run`,
  `refused` with the refusal's `code`) and `pactwright_http_requests_total`
  by method, route template and status;
- state is read from the store at each scrape, in one read-only
  transaction, so every replica reports the same numbers:
  `pactwright_outbox_entries` by status (`pending` is the outbox depth),
  `pactwright_quarantined` (outbox entries and effect calls),
  `pactwright_effects_parked`, `pactwright_approvals_pending`, and
  `pactwright_delivery_latency_seconds`, a histogram of how long each
  delivered outbox entry took from its commit to its delivery (the
  trusted clock's seconds, from the entry's rows).

When the store cannot be read, `pactwright_store_up` is 0 and the state
series are absent; the counters are still served.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from pactwright.runtime.store import Store

__all__ = ["LATENCY_BUCKETS", "Counters", "StoreState", "read_state", "render"]

LATENCY_BUCKETS = (1, 5, 15, 60, 300, 900, 3600, 21600, 86400)  # seconds
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Counters:
    """The in-process counters; safe to bump from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.commands: Counter[tuple[str, str]] = Counter()
        self.requests: Counter[tuple[str, str, str]] = Counter()

    def command(self, outcome: str, code: str = "") -> None:
        with self._lock:
            self.commands[(outcome, code)] += 1

    def request(self, method: str, route: str, status: int) -> None:
        with self._lock:
            self.requests[(method, route, str(status))] += 1

    def snapshot(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str, str], int]]:
        with self._lock:
            return dict(self.commands), dict(self.requests)


class StoreState:
    """What the store holds now, for the gauges and the latency histogram."""

    def __init__(self) -> None:
        self.outbox: dict[str, int] = {}
        self.quarantined: dict[str, int] = {"outbox": 0, "effect": 0}
        self.parked = 0
        self.approvals_pending = 0
        self.latency_buckets: list[int] = [0] * len(LATENCY_BUCKETS)
        self.latency_count = 0
        self.latency_sum = 0


def read_state(store: Store) -> StoreState:
    """The state series, from one read-only transaction; tables an older store lacks count as empty."""
    state = StoreState()
    with store.transaction(write=False) as db:
        if db.has_table("outbox"):
            for status, count in db.query("SELECT status, COUNT(*) FROM outbox GROUP BY status ORDER BY status"):
                state.outbox[str(status)] = int(count)
            state.quarantined["outbox"] = state.outbox.get("quarantined", 0)
            cases = ", ".join(
                f"SUM(CASE WHEN updated_at - created_at <= {b} THEN 1 ELSE 0 END)" for b in LATENCY_BUCKETS
            )
            row = db.query(
                f"SELECT COUNT(*), COALESCE(SUM(updated_at - created_at), 0), {cases} FROM outbox "  # noqa: S608 - fixed numbers
                "WHERE status = 'delivered'"
            )[0]
            state.latency_count, state.latency_sum = int(row[0]), int(row[1])
            state.latency_buckets = [int(v or 0) for v in row[2:]]
        if db.has_table("effects"):
            state.quarantined["effect"] = int(db.query("SELECT COUNT(*) FROM effects WHERE quarantined = 1")[0][0])
            state.parked = int(
                db.query("SELECT COUNT(*) FROM effects WHERE phase = 'needs_reconciliation' OR quarantined = 1")[0][0]
            )
        if db.has_table("approval_requests"):
            state.approvals_pending = int(
                db.query("SELECT COUNT(*) FROM approval_requests WHERE status = 'pending'")[0][0]
            )
    return state


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    inner = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items() if v != "")
    return "{" + inner + "}" if inner else ""


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def render(counters: Counters, state: StoreState | None) -> str:
    commands, requests = counters.snapshot()
    out = _family(
        "pactwright_commands_total", "counter", "Commands submitted to this process, by outcome (refusals by code).",
        (f"pactwright_commands_total{_labels(outcome=o, code=c)} {n}" for (o, c), n in sorted(commands.items())),
    )  # fmt: skip
    out += _family(
        "pactwright_http_requests_total", "counter", "HTTP requests answered by this process.",
        (f"pactwright_http_requests_total{_labels(method=m, route=r, status=s)} {n}"
         for (m, r, s), n in sorted(requests.items())),
    )  # fmt: skip
    out += _family("pactwright_store_up", "gauge", "1 when this scrape could read the store.",
                   [f"pactwright_store_up {0 if state is None else 1}"])  # fmt: skip
    if state is not None:
        statuses = sorted({"pending", "delivered", "quarantined", *state.outbox})
        out += _family(
            "pactwright_outbox_entries", "gauge", "Outbox entries in the store by status (pending: the outbox depth).",
            (f"pactwright_outbox_entries{_labels(status=s)} {state.outbox.get(s, 0)}" for s in statuses),
        )  # fmt: skip
        out += _family(
            "pactwright_quarantined", "gauge", "Quarantined outbox entries and effect calls in the store.",
            (f"pactwright_quarantined{_labels(kind=k)} {n}" for k, n in sorted(state.quarantined.items())),
        )  # fmt: skip
        out += _family("pactwright_effects_parked", "gauge", "Effect calls parked for an operator.",
                       [f"pactwright_effects_parked {state.parked}"])  # fmt: skip
        out += _family("pactwright_approvals_pending", "gauge", "Approval requests waiting for an approver.",
                       [f"pactwright_approvals_pending {state.approvals_pending}"])  # fmt: skip
        name = "pactwright_delivery_latency_seconds"
        samples = [
            f'{name}_bucket{{le="{b}"}} {n}' for b, n in zip(LATENCY_BUCKETS, state.latency_buckets, strict=True)
        ]
        samples += [f'{name}_bucket{{le="+Inf"}} {state.latency_count}', f"{name}_sum {state.latency_sum}",
                    f"{name}_count {state.latency_count}"]  # fmt: skip
        out += _family(name, "histogram", "Seconds from an outbox entry's commit to its delivery to the ledger.",
                       samples)  # fmt: skip
    return "\n".join(out) + "\n"
