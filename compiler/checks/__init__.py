"""Static checks (LANGUAGE.md "Static checks"): a registry of small functions."""

from __future__ import annotations

from pactwright.compiler.checks import (
    accounts,
    effects,
    four_eyes,
    guards,
    names,
    outcomes,
    payloads,
    related,
    states,
    transfers,
    values,
)
from pactwright.compiler.checks import limits as cross_agreement_limits
from pactwright.compiler.checks import properties as liveness
from pactwright.compiler.checks._registry import REGISTRY, Check, CheckContext, check
from pactwright.compiler.checks.guards import type_all
from pactwright.compiler.expressions import ExpressionTyper
from pactwright.compiler.symbols import Symbols
from pactwright.diagnostics import Diagnostic

__all__ = ["REGISTRY", "Check", "CheckContext", "check", "run_checks"]

# registration order (related, four_eyes, outcomes, liveness and the limits are new in 1.1)
_TOPICS = (
    names, states, values, related, accounts, transfers, effects, four_eyes, payloads, guards, outcomes, liveness,
    cross_agreement_limits,
)  # fmt: skip


def run_checks(sym: Symbols) -> tuple[CheckContext, list[Diagnostic]]:
    """Run every registered check; diagnostics come back sorted and deduplicated."""
    ctx = CheckContext(sym=sym, typer=ExpressionTyper(sym))
    type_all(ctx)
    found: dict[tuple[object, ...], Diagnostic] = {}
    for registered in REGISTRY:
        for diagnostic in registered.run(ctx):
            key = (diagnostic.code, diagnostic.span, diagnostic.message)
            found.setdefault(key, diagnostic)
    return ctx, sorted(found.values(), key=Diagnostic.sort_key)
