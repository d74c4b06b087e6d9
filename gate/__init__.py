"""The safety gate: run reviewable scenario files against a real runtime and judge what was observed.

A scenario (TOML, one per file, docs/gate.md) names a policy or a bundle,
the agreement, a sequence of steps and what must hold afterwards. The gate
builds and activates the bundle into a temporary store with its own ledger
and a provider simulator on loopback, runs the steps, and reads what
happened back from the store, the ledger, the evidence chain and the
simulator's own counts. Expectations are only compared with those
observations; they never feed the report.

The gate compiles and verifies policies, so it is a CI tool: nothing in the
runtime imports it.
"""

from pactwright.gate.report import render
from pactwright.gate.runner import GateRun, ScenarioResult, run_gate
from pactwright.gate.scenario import Scenario, ScenarioError, load_scenario

__all__ = ["GateRun", "Scenario", "ScenarioError", "ScenarioResult", "load_scenario", "render", "run_gate"]
