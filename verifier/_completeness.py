"""Whether a run decided the policy, and what to tell the reader when it did not.

A bounded search that found nothing is not a pass: the violation may lie one
step past the bound. A run is complete when the search exhausted the state
space (within the agreement and fault bounds) with no inconclusive solver
query, or when every invariant not violated is `proved` (k-induction makes
the bound irrelevant). An incomplete run gets the verdict `incomplete`
unless the caller accepted it explicitly (`--allow-incomplete`), and then
the report records that it did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pactwright import report_rules
from pactwright.verifier.model import Json, Model

if TYPE_CHECKING:
    from pactwright.verifier.explorer import Bounds, ExplorationResult

__all__ = ["ALLOWED_NOTE", "bound_warnings", "is_complete", "verdict_of"]

ALLOWED_NOTE = "incomplete, allowed by --allow-incomplete"
_FLAG = {"max_depth": "--max-depth", "max_states": "--max-states"}


def is_complete(
    exhausted: bool, unknown_queries: int, invariants: Sequence[Json], properties: Sequence[Json] = ()
) -> bool:
    """Exhausted with every solver query decided, or every invariant not violated proved, and
    no liveness property `incomplete` (the kernel's one rule, which `sign` and activation
    recompute from the report)."""
    return report_rules.is_complete(exhausted, unknown_queries, invariants, properties)


def verdict_of(
    invariants: Sequence[Json], complete: bool, allow_incomplete: bool, properties: Sequence[Json] = ()
) -> str:
    """`fail` on any violation (of an invariant or a property); else `pass` if complete or
    explicitly allowed; else `incomplete`."""
    if any(i["verdict"] == "violated" for i in [*invariants, *properties]):
        return "fail"
    return "pass" if complete or allow_incomplete else "incomplete"


def bound_warnings(
    model: Model,
    result: ExplorationResult,
    bounds: Bounds,
    unknown_queries: int,
    complete: bool,
    allow_incomplete: bool,
    failed: bool = False,
) -> list[str]:
    """The warnings of an unfinished search: the bound and its flag, the cycles behind it, unknown queries."""
    out: list[str] = []
    if not result.exhausted:
        bound = result.bound_hit or "max_depth"
        flag = _FLAG.get(bound, "--max-depth")
        now: int = getattr(bounds, bound, 0)
        text = (
            f"exploration stopped at the `{bound}` bound ({now:,}) before the state space was exhausted; "
            f"results hold only for the states explored; raise it with `{flag} N`"
        )
        from pactwright.verifier.loops import describe, pumping_cycles

        cycles = pumping_cycles(model)
        if cycles:
            named = ", ".join(f"`{describe(c)}`" for c in cycles)
            text += f"; cycles of transitions that can repeat without end (pumping a balance or a counter): {named}"
        out.append(text)
    if unknown_queries:
        out.append(
            f"{unknown_queries:,} solver quer{'y' if unknown_queries == 1 else 'ies'} during exploration "
            "gave no answer (unknown); the search cannot claim the states behind them"
        )
    if not complete and not failed:
        # A violation decides the verdict (`fail`) whatever the bound: only a run that found
        # nothing is told it is incomplete.
        if allow_incomplete:
            out.append(
                f"the run is incomplete; the verdict is `pass` because a bounded result was accepted ({ALLOWED_NOTE})"
            )
        else:
            out.append(
                "the verdict is `incomplete`: raise the bound, make the invariants provable (each method says "
                "why a proof failed), or accept a bounded result with `--allow-incomplete`"
            )
    return out
