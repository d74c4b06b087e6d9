"""The phases of each call site along a replayed counterexample, for the effect outcomes (new in 1.1).

`acknowledged(E)`, `reconciled(E)` and `abandoned(E)` read the phase of the
latest call at each `call E`. The replay (`counterexample.py`) re-derives
those phases from the path's moves with the kernel's protocol tables
(`pactwright.protocol`), independently of the explorer's state encoding.
"""

from __future__ import annotations

from typing import Any

from pactwright.protocol import ON_FAILED, ON_UNCERTAIN, OUTCOME_PHASES, Phase


class SitePhases:
    """Per (agreement, call site): the phase of its latest call."""

    def __init__(self, sites: list[Any], sites_of: list[list[int]]) -> None:
        self.sites = sites
        self.sites_of = sites_of
        self.phase: dict[tuple[str, int], Phase] = {}

    def committed(self, agreement: str, transition: int) -> None:
        for s in self.sites_of[transition]:
            self.phase[(agreement, s)] = Phase.PREPARED

    def moved(self, agreement: str, kind: str, site: int | None, fault: str | None, happened: bool) -> None:
        """One effect move of the path: dispatch, fault, runtime, reconcile, abandon, compensate, cancel."""
        if site is None:
            return
        key = (agreement, site)
        strategy = self.sites[site].strategy
        now = self.phase.get(key, Phase.IDLE)
        if kind == "dispatch":
            self.phase[key] = Phase.ACKNOWLEDGED
        elif kind == "fault":
            self.phase[key] = Phase.FAILED if fault == "provider_error" else Phase.UNCERTAIN
            if ON_FAILED.get(strategy) is None:
                self._compensate_earlier(agreement, site)
        elif kind == "runtime":
            if now == Phase.UNCERTAIN:
                self.phase[key] = ON_UNCERTAIN[strategy]
                if self.phase[key] == Phase.ABANDONED_UNCERTAIN:
                    self._compensate_earlier(agreement, site)
            elif now == Phase.FAILED:
                self.phase[key] = ON_FAILED[strategy] or Phase.FAILED
            elif now == Phase.RECONCILED_NOT_OCCURRED:
                self.phase[key] = Phase.PREPARED
        elif kind == "reconcile":
            self.phase[key] = Phase.RECONCILED_RECOVERED if happened else Phase.RECONCILED_NOT_OCCURRED
        elif kind == "abandon":
            self.phase[key] = Phase.ABANDONED_UNCERTAIN
            self._compensate_earlier(agreement, site)
        elif kind == "compensate":
            self.phase[key] = Phase.COMPENSATED
        elif kind == "cancel":
            self.phase[key] = Phase.IDLE

    def _compensate_earlier(self, agreement: str, site: int) -> None:
        for s in self.sites_of[self.sites[site].transition]:
            if s >= site:
                break
            if self.sites[s].strategy == "compensate" and self.phase.get((agreement, s)) == Phase.ACKNOWLEDGED:
                self.phase[(agreement, s)] = Phase.COMPENSATION_REQUIRED

    def outcomes(self, agreement: str) -> dict[str, frozenset[str]]:
        """Per outcome function, the effects for which it holds in this agreement."""
        out: dict[str, set[str]] = {op: set() for op in OUTCOME_PHASES}
        for (a, s), phase in self.phase.items():
            for op, wanted in OUTCOME_PHASES.items():
                if a == agreement and phase == wanted:
                    out[op].add(self.sites[s].effect)
        return {op: frozenset(names) for op, names in out.items()}
