"""One racer of tests/test_races_scheduler_renewal.py: a spawned interpreter with its own store connection.

Each racer gets a list of actions, one per round, and waits at a shared
barrier before each: both racers of a round start their action at the same
moment, against the same agreement, at the same test-clock instant (or the
instants the round names). An action is one of:

- `scan`: `runtime.scheduler.scan` over the named agreements (None: all of
  them), as `pactwright scheduler --once` runs it; the outcome is its JSON;
- `cli`: `pactwright scheduler --once --format json` itself (the CLI entry
  point, imported before the barrier so its start-up is not part of the race);
- `submit`: `runtime.commands.submit`; the outcome is its status, event id,
  replay flag and parked request, or the refusal's code;
- `grant`: `runtime.approvals.grant` with a proof the parent signed (the
  racer holds no key); the outcome is the result's status, or the code.

The outcomes come back on a queue, in round order, as plain JSON values.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
from typing import Any

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, approvals, submit
from pactwright.runtime.scheduler import scan
from pactwright.runtime.store import Store, open_store

Action = tuple[str, dict[str, Any]]


def _plain(value: Any) -> Any:
    """A JSON round trip: tuples become lists, so outcomes compare the way they would on the wire."""
    return json.loads(json.dumps(value, sort_keys=True))


def _act(store: Store, url: str, kind: str, args: dict[str, Any]) -> dict[str, Any]:
    if kind == "scan":
        return _plain(scan(store, TestClock(args["at"]), args.get("agreements")).to_json())
    if kind == "cli":
        from pactwright.cli.main import main

        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            code = main(["scheduler", "--store", url, "--once", "--format", "json", "--clock-file", args["clock"]])
        return {"exit": code, "scans": [json.loads(line) for line in text.getvalue().splitlines() if line]}
    try:
        if kind == "submit":
            result = submit(store, args["agreement"], args["transition"], args["role"], args["party"], args["key"],
                            clock=TestClock(args["at"]))  # fmt: skip
        elif kind == "grant":
            result = approvals.grant(store, args["request"], args["party"], args["proof"], TestClock(args["at"]))
        else:
            raise ValueError(f"unknown action {kind!r}")
    except PactwrightError as exc:
        return {"code": exc.code}
    return _plain({"status": result.status, "event_id": result.event_id, "replayed": result.replayed,
                   "approval": result.approval})  # fmt: skip


def race(url: str, side: int, actions: list[Action], barrier: Any, out: Any) -> None:
    """Run `actions` in order, meeting the other racer at `barrier` before each one; put (side, outcomes)."""
    for module in ("pactwright.cli.main", "pactwright.cli.cmd_scheduler"):
        importlib.import_module(module)  # loaded before the first barrier: an import is never part of a race

    outcomes: list[dict[str, Any]] = []
    with open_store(url, migrate_schema=False) as store:
        for kind, args in actions:
            barrier.wait(timeout=120)
            outcomes.append(_act(store, url, kind, args))
    out.put((side, outcomes))
