"""Run scenarios: each on a fresh SQLite store and ledger, one provider simulator per gate run.

Setup per scenario, in order: activate the bundle (unless `activate =
false`), register the parties (approvers with keys generated for the run,
operators), open the agreement (unless the steps open it), then the steps,
then the observations, then the verdicts. Every scenario file is parsed and
checked before the first one runs, so a malformed file (exit 2) never
leaves a half-run gate behind.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pactwright.errors import PactwrightError
from pactwright.gate.bundles import Builder
from pactwright.gate.context import Context, StepError
from pactwright.gate.expectations import Verdict, judge
from pactwright.gate.observe import observe
from pactwright.gate.scenario import Scenario, ScenarioError, load_scenario
from pactwright.gate.steps import activate_bundle, run_step
from pactwright.runtime import TestClock, open_agreement, open_ledger
from pactwright.runtime.clock import epoch_seconds
from pactwright.runtime.parties import OPERATOR, add_party
from pactwright.runtime.provider_sim import Simulator, start_simulator
from pactwright.runtime.store import open_store
from pactwright.signing import raw_public_key

__all__ = ["GateRun", "ScenarioResult", "run_gate", "run_scenario"]

FORMAT = "pactwright.gate/1"


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    observed: dict[str, Any]
    verdicts: list[Verdict]
    seconds: float
    error: PactwrightError | None = None  # a step that could not run: the scenario fails

    @property
    def ok(self) -> bool:
        return self.error is None and all(v.ok for v in self.verdicts)

    @property
    def failed(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.scenario.name, "file": str(self.scenario.path), "ok": self.ok,
            "seconds": round(self.seconds, 3), "observed": self.observed,
            "expectations": [v.to_json() for v in self.verdicts],
        }  # fmt: skip
        if self.error is not None:
            out["error"] = self.error.to_json()
        return out


@dataclass(frozen=True)
class GateRun:
    results: list[ScenarioResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "ok": self.ok, "scenarios": len(self.results),
                "failed": sum(not r.ok for r in self.results), "seconds": round(self.seconds, 3),
                "results": [r.to_json() for r in self.results]}  # fmt: skip


def _setup(ctx: Context) -> None:
    scenario = ctx.scenario
    if scenario.activate:
        activate_bundle(ctx)
    now = epoch_seconds(ctx.clock)
    for party, role in sorted(scenario.approvers.items()):
        add_party(ctx.store, party, role, raw_public_key(ctx.key(party).public_key()), now)
    for party in scenario.operators:
        add_party(ctx.store, party, OPERATOR, None, now)
    if scenario.open_at_start and ctx.pact_id is not None:
        try:
            open_agreement(ctx.store, ctx.pact_id, scenario.params, scenario.parties,
                           agreement_id=scenario.agreement_id, clock=ctx.clock)  # fmt: skip
            ctx.opened = True
        except PactwrightError as exc:
            ctx.refused(0, "open", exc)


def run_scenario(scenario: Scenario, builder: Builder, sim: Simulator) -> ScenarioResult:
    """One scenario on a fresh store and ledger in a temporary directory; the simulator is reset first."""
    started = time.monotonic()
    sim.reset()
    sim.set_mode(ignore_keys=scenario.ignore_keys, slow_seconds=scenario.slow_seconds)
    error: PactwrightError | None = None
    with tempfile.TemporaryDirectory(prefix="pw-gate-") as tmp:
        workdir = Path(tmp)
        url = str(workdir / "store.db")
        with open_store(url) as store, open_ledger(None, url) as ledger:
            ctx = Context(scenario, builder, sim, workdir, store, url, ledger, TestClock(scenario.start))
            ctx.providers.write_text("", encoding="utf-8")
            try:
                if scenario.policy is not None or scenario.bundle is not None:
                    ctx.learn_bundle(_first_files(ctx))
                _setup(ctx)
                for step in scenario.steps:
                    run_step(ctx, step)
            except ScenarioError:
                raise
            except StepError as exc:
                error = exc
            except PactwrightError as exc:  # setup refused (activation of the scenario's own bundle, say)
                error = StepError(f"setup: [{exc.code}] {exc.message}")
            observed = observe(ctx)
    verdicts = judge(scenario.expect, observed)
    return ScenarioResult(scenario, observed, verdicts, time.monotonic() - started, error)


def _first_files(ctx: Context) -> dict[str, bytes]:
    """The bundle's files (for its declared destinations), before anything is activated."""
    if ctx.scenario.policy is not None:
        return ctx.builder.policy(ctx.scenario.policy)
    assert ctx.scenario.bundle is not None
    return ctx.builder.directory(ctx.scenario.bundle)


def run_gate(paths: Sequence[Path]) -> GateRun:
    """Check every scenario file first (ScenarioError, exit 2), then run them in order with one simulator."""
    started = time.monotonic()
    scenarios = [load_scenario(path) for path in paths]
    builder = Builder()
    with start_simulator(port=0, slow_seconds=1.5) as sim:
        results = [run_scenario(s, builder, sim) for s in scenarios]
    return GateRun(results, time.monotonic() - started)
