"""z3 proofs beside the symbolic search: transfer arithmetic stated for ALL values, invariants for ALL depths.

Exploration is exact over the ranged params but bounded in depth. This
module says more only where a solver proves it:

- `transfer_properties`: each posting's split (Numscript allotment or capped
  amounts) sums to the amount and is never negative, and each effect amount
  stays within its ceiling, for every value in the declared ranges; plus the
  exact min/max share of each portion.
- `upgrade`: k-induction over one agreement's symbolic transition relation,
  strengthened with lemmas that are themselves proved inductive, upgrades
  `holds-to-bound` to `proved`.

Honesty rules: a proof is claimed only on unsat; z3 `unknown` (timeouts
included) is reported as unknown; every refutation carries a witness that
was re-checked concretely. z3 and networkx are imported lazily so that the
CLI starts without them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pactwright.verifier.model import Json, Model

if TYPE_CHECKING:
    from pactwright.verifier.explorer import ExplorationResult, Explorer

__all__ = ["DEFAULT_TIMEOUT_MS", "transfer_properties", "upgrade"]

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

    The search itself is exact over the ranged params (symbolic), so no
    amount search between samples is needed; k-induction (invariants still
    `holds-to-bound`): verdict `proved` only when both base and step cases are
    unsat; otherwise `method` says why not.
    """
    from pactwright.verifier._z3_terms import fresh_context

    with fresh_context():
        _upgrade(model, explorer, result, invariants, timeout_ms, max_k)


def _upgrade(
    model: Model, explorer: Explorer, result: ExplorationResult, invariants: list[Json], timeout_ms: int, max_k: int
) -> None:
    from pactwright.verifier._z3_induction import Machine

    users = [entry for entry in invariants if not entry.get("builtin")]
    specs = {spec["name"]: spec for spec in model.invariants}
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
