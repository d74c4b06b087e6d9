"""What an effect's application carries: its payload, its amount, whether it moves money.

One definition, read by the static checks (on the syntax tree, before a
candidate exists) and by lowering (on the candidate), so `check` and the
model can never disagree about which effects move money.

- The **payload** of a call is the effect's `key` fields plus the params that
  its declared amount reads (the effect's `amount EXPR`, or the call's own
  `call E amount EXPR`). A `consequence` placeholder must name one of them.
- An effect is **money-moving** when its payload carries a money param (a
  money param among its key fields, its consequence placeholders or its
  declared amount), or it declares an amount at all, or its `reversibility`
  is `irreversible` or `compensable`, or its `reversibility` is left unset.
  An effect that is `reversible` or `not_applicable` and names no money
  moves none.
- The **amount** a call carries is exactly the declared expression; nothing
  is inferred from transfers or keys.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass

from pactwright.candidate import Candidate, Effect, Expr

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# Reversibilities that say the effect cannot simply be taken back.
_MOVES_MONEY = frozenset({"irreversible", "compensable"})


@dataclass(frozen=True, slots=True)
class EffectFacts:
    """The parts of an effect declaration that decide whether it moves money."""

    reversibility: str | None
    key: tuple[str, ...]
    consequence: str | None
    amounts: tuple[Expr, ...]  # the effect's declared amount and every call-site amount


def placeholders(consequence: str | None) -> list[str]:
    """The `{name}` placeholders of a consequence sentence, in written order."""
    return [] if consequence is None else _PLACEHOLDER.findall(consequence)


def params_read(expr: Expr | None) -> set[str]:
    """The params an expression reads."""
    found: set[str] = set()
    stack = [] if expr is None else [expr]
    while stack:
        node = stack.pop()
        if node.op == "param" and node.name is not None:
            found.add(node.name)
        stack.extend(node.args)
    return found


def payload_fields(key: Iterable[str], *amounts: Expr | None) -> set[str]:
    """The fields of a call's payload: the key fields and the params its amount reads."""
    fields = set(key)
    for amount in amounts:
        fields |= params_read(amount)
    return fields


def money_moving(facts: EffectFacts, money_params: Collection[str]) -> bool:
    """Whether an effect moves money (the module docstring gives the definition)."""
    if facts.reversibility is None or facts.reversibility in _MOVES_MONEY:
        return True
    if facts.amounts:
        return True
    named = {*facts.key, *placeholders(facts.consequence)}
    return any(name in money_params for name in named)


def call_amount(effect_amount: Expr | None, site_amount: Expr | None) -> Expr | None:
    """The amount one call carries: the one declared (declaring both is a blocker)."""
    return effect_amount if effect_amount is not None else site_amount


def candidate_facts(candidate: Candidate) -> Iterator[tuple[Effect, EffectFacts]]:
    """Each effect of a candidate with its facts, call-site amounts included."""
    site_amounts: dict[str, list[Expr]] = {}
    for transition in candidate.transitions:
        for name, amount in transition.call_sites():
            if amount is not None:
                site_amounts.setdefault(name, []).append(amount)
    for effect in candidate.effects:
        declared = [effect.amount] if effect.amount is not None else []
        yield (
            effect,
            EffectFacts(
                reversibility=effect.reversibility,
                key=effect.key,
                consequence=effect.consequence,
                amounts=(*declared, *site_amounts.get(effect.name, [])),
            ),
        )


def money_moving_effects(candidate: Candidate) -> frozenset[str]:
    """The names of a candidate's money-moving effects."""
    money = {p.name for p in candidate.params if p.type == "money"}
    return frozenset(effect.name for effect, facts in candidate_facts(candidate) if money_moving(facts, money))
