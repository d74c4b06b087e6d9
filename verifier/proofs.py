"""z3 proofs beside the explicit-state search: amounts for ALL values, invariants for ALL depths.

Exploration checks sampled param values up to a bound. This module says
more only where a solver proves it:

- `transfer_properties`: each posting's split (Numscript allotment or capped
  amounts) sums to the amount and is never negative, and each effect amount
  stays within its ceiling, for every value in the declared ranges; plus the
  exact min/max share of each portion.
- `upgrade`: each user invariant that reads money is checked symbolically in
  every abstract state the search reached (balances as sums of postings over
  symbolic params); a violating value is minimized, confirmed by a fresh
  concrete exploration, and only then reported. Then k-induction over one
  agreement's symbolic transition relation, strengthened with lemmas that are
  themselves proved inductive, upgrades `holds-to-bound` to `proved`.

Honesty rules: a proof is claimed only on unsat; z3 `unknown` (timeouts
included) is reported as unknown; every refutation carries a witness that
was re-checked concretely. z3 and networkx are imported lazily so that the
CLI starts without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pactwright.verifier.model import Json, Model

if TYPE_CHECKING:
    from pactwright.verifier.explorer import Bounds, ExplorationResult, Explorer

__all__ = ["DEFAULT_TIMEOUT_MS", "transfer_properties", "upgrade", "witness_explorations"]

DEFAULT_TIMEOUT_MS = 5_000  # per solver query


def transfer_properties(model: Model, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[Json]:
    """One entry per checked property of every posting and effect ceiling.

    Entry keys: transition, posting (index; None for a ceiling), property
    (reader's text), kind (`sum`, `non_negative`, `share_range`, `ceiling`),
    verdict (`proved` | `refuted` | `unknown`), witness (minor units of the
    amount at the smallest violating point, or None), witness_text, detail;
    refutations add witness_params (ranged param -> sample text); share
    ranges add portion, account, min, max, min_text, max_text; ceilings add
    effect.
    """
    from pactwright.verifier._z3_terms import fresh_context
    from pactwright.verifier._z3_transfers import TransferProver

    with fresh_context():
        return TransferProver(model, timeout_ms).run()


def upgrade(
    model: Model,
    explorer: Explorer,
    result: ExplorationResult,
    invariants: list[Json],
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    max_k: int = 4,
) -> None:
    """Strengthen the verdicts of user invariants in place, never beyond what z3 proved.

    Amount search (invariants reading money): sets `amounts` to what was
    established, and on a confirmed violation sets verdict `violated`,
    `amount_witness` {param, value, text, params} and extends `method`.
    k-induction (invariants still `holds-to-bound`): verdict `proved` only
    when both base and step cases are unsat; otherwise `method` says why not.
    An invariant entry marked violated here has `counterexample` None until
    the caller attaches one from `witness_explorations`.
    """
    from pactwright.verifier._z3_terms import fresh_context

    with fresh_context():
        _upgrade(model, explorer, result, invariants, timeout_ms, max_k)


def _upgrade(
    model: Model, explorer: Explorer, result: ExplorationResult, invariants: list[Json], timeout_ms: int, max_k: int
) -> None:
    from pactwright.verifier._z3_amounts import AmountChecker
    from pactwright.verifier._z3_induction import Machine

    users = [entry for entry in invariants if not entry.get("builtin")]
    specs = {spec["name"]: spec for spec in model.invariants}
    if not explorer.symbolic:
        # A sampled search (no ranged param is a symbol) still gets z3's look between the samples.
        AmountChecker(model, explorer, result, timeout_ms).run([e for e in users if e["name"] in specs])
    machine: Machine | None = None
    for entry in users:
        spec = specs.get(entry["name"])
        if spec is None or entry["verdict"] != "holds-to-bound":
            continue
        if machine is None:
            machine = Machine(model, timeout_ms)
        outcome = machine.prove(spec["expr"], max_k)
        if outcome.proved:
            entry["verdict"] = "proved"
            entry["method"] = outcome.text
        else:
            entry["method"] = f"{entry['method']}; {outcome.text}"


def witness_explorations(
    model: Model, bounds: Bounds, invariants: list[Json]
) -> list[tuple[str, Explorer, ExplorationResult]]:
    """Concrete explorations behind the amount witnesses `upgrade` confirmed.

    For each invariant that `upgrade` marked violated through an amount
    witness and that has no counterexample yet: the explorer and result of
    the model with each ranged param pinned to its witness value, with
    `violations` restricted to that invariant, ready for the caller's
    counterexample builder.
    """
    from pactwright.verifier._z3_amounts import explore_at

    out: list[tuple[str, Explorer, ExplorationResult]] = []
    for entry in invariants:
        witness = entry.get("amount_witness")
        if witness is None or entry["verdict"] != "violated" or entry.get("counterexample") is not None:
            continue
        explorer, result = explore_at(model, bounds, witness["params"])
        violation = result.violations.get(entry["name"])
        if violation is None:
            continue  # cannot happen for a confirmed witness; then nothing is attached
        result.violations = {entry["name"]: violation}
        out.append((entry["name"], explorer, result))
    return out
