"""The report's verdicts on limits across agreements (new in 1.1).

A limit is checked as a cross-agreement invariant over the explored run:
the money its effect's calls took effect with, summed over every explored
agreement, must stay at most the limit. The explored run is taken to fall
in ONE window (every commit on the same day for `per 1d`), the worst case
for a fixed calendar window; for `per ROLE`, the same party is taken to
hold ROLE in every explored agreement, again the worst case. With one
agreement the sum is that agreement's own, so nothing is said across
agreements: the verdict is `not-checked-across-agreements`, never a pass.
"""

from __future__ import annotations

from pactwright.money import format_money
from pactwright.verifier.explorer import ExplorationResult
from pactwright.verifier.model import Json, Model

__all__ = ["ASSUMPTION", "limit_verdicts"]

ASSUMPTION = (
    "limits across agreements: every explored commit is taken to fall in one window (the worst case of fixed "
    "UTC windows) and, for `per ROLE`, the same party to hold ROLE in every explored agreement; more "
    "agreements than explored, and the runtime's refusal at commit (PW528), are not modelled"
)


def _window(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def limit_verdicts(model: Model, result: ExplorationResult, index_of: dict[str, int], agreements: int) -> list[Json]:
    """One entry per limit: `violated` (with its counterexample), `holds-to-bound` across the
    explored agreements, or `not-checked-across-agreements` when only one agreement was explored."""
    out: list[Json] = []
    for limit in model.limits:
        name = f"limit:{limit['name']}"
        entry: Json = {
            "name": name,
            "effect": limit["effect"],
            "max": format_money(int(limit["max"]), model.scale),
            "window": _window(limit["window"]),
            "per": limit.get("per"),
            "agreements": agreements,
            "counterexample": index_of.get(name),
        }
        if name in index_of:
            entry["verdict"] = "violated"
            entry["method"] = f"explicit-state search over {agreements} agreement{'s' if agreements != 1 else ''}"
        elif agreements < 2:
            entry["verdict"] = "not-checked-across-agreements"
            entry["method"] = (
                "one agreement explored: the limit was not checked across agreements; "
                "verify with `--agreements 2` or more"
            )
        else:
            entry["verdict"] = "holds-to-bound"
            bound = "state space exhausted" if result.exhausted else f"to depth {result.depth_reached}"
            entry["method"] = f"explicit-state search over {agreements} agreements in one window, {bound}"
        out.append(entry)
    return out
