"""Compare a scenario's `[expect]` table with what was observed: one verdict per key, both sides kept.

Each expectation is a pure function of the observations (gate/observe.py);
the observed side of every verdict is taken from them, so a report can be
read without the scenario and still say what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Verdict", "judge"]


@dataclass(frozen=True)
class Verdict:
    key: str
    expected: Any
    observed: Any
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "expected": self.expected, "observed": self.observed, "ok": self.ok}


def _agreement(seen: Mapping[str, Any], name: str) -> Any:
    agreement = seen.get("agreement") or {}
    return agreement.get(name)


def _phases(seen: Mapping[str, Any], expected: Mapping[str, Any]) -> tuple[Any, bool]:
    observed = {name: seen["effects"].get(name, []) for name in expected}
    wanted = {name: [value] if isinstance(value, str) else list(value) for name, value in expected.items()}
    return observed, observed == wanted


def _subset(seen: Mapping[str, Any], expected: Mapping[str, Any]) -> tuple[Any, bool]:
    observed = {name: seen.get(name, 0 if isinstance(value, int) else None) for name, value in expected.items()}
    return observed, observed == dict(expected)


def _invariants(seen: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    observed = _agreement(seen, "invariants")
    if observed is None:
        return None, False
    if expected == "hold":
        return observed, bool(observed) and all(v is True for v in observed.values())
    picked = {name: observed.get(name) for name in expected}
    return picked, picked == dict(expected)


def _refusals(seen: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    observed = [r["code"] for r in seen["refusals"]]
    return observed, sorted(observed) == sorted(expected)  # a multiset: racing processes have no order


def _evidence(seen: Mapping[str, Any], expected: Any) -> tuple[Any, bool]:
    chain = _agreement(seen, "evidence")
    observed = None if chain is None else ("verifies" if chain["verifies"] else "does not verify")
    return observed, observed == expected


_JUDGES: dict[str, Callable[[Mapping[str, Any], Any], tuple[Any, bool]]] = {
    "writes": lambda s, e: (s["provider"]["writes"], s["provider"]["writes"] == e),
    "effect_writes": lambda s, e: _subset(s["provider"]["effect_writes"], e),
    "state": lambda s, e: (_agreement(s, "state"), _agreement(s, "state") == e),
    "opened": lambda s, e: (s["agreement"] is not None, (s["agreement"] is not None) == e),
    "version": lambda s, e: (_agreement(s, "version"), _agreement(s, "version") == e),
    "refusals": _refusals,
    "effects": _phases,
    "effect_attempts": lambda s, e: _subset(s["effect_attempts"], e),
    "ledger": lambda s, e: _subset(_agreement(s, "ledger") or {}, e),
    "invariants": _invariants,
    "evidence": _evidence,
    "approvals": lambda s, e: ([a["status"] for a in s["approvals"]], [a["status"] for a in s["approvals"]] == list(e)),
    "race_committed": lambda s, e: (s["race_committed"], s["race_committed"] == e),
    "replayed": lambda s, e: (sum(bool(c["replayed"]) for c in s["commands"]),
                              sum(bool(c["replayed"]) for c in s["commands"]) == e),
    "active_version": lambda s, e: (s["active_version"] or "none", (s["active_version"] or "none") == e),
}  # fmt: skip


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def judge(expect: Mapping[str, Any], seen: Mapping[str, Any]) -> list[Verdict]:
    """One verdict per expectation, in the scenario's order."""
    out = []
    for key, expected in expect.items():
        wanted = _plain(expected)
        observed, ok = _JUDGES[key](seen, wanted)
        out.append(Verdict(key, wanted, observed, ok))
    return out
