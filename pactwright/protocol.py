"""The effect protocol: the one definition the verifier checks and the runtime runs.

Each `call EFFECT` in a committed transition becomes an effect instance that
the effect worker (runtime/effect_worker.py) dispatches. It moves through the phases below; faults (a
lost request, a lost response, a provider error) and the effect's declared
strategy decide what happens next. The verifier's explorer
(`pactwright.verifier.explorer`) composes a policy with exactly these
tables, and the runtime, which imports only the kernel, takes its effect
strategies from here, so a verdict about a strategy is a verdict about what
the runtime does: change a table here and both change together
(docs/effects.md, "The effect lifecycle"; tests/test_runtime_vs_verifier.py
drives the verifier's effect paths through the runtime).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Final

__all__ = ["FAULTS", "ON_FAILED", "ON_UNCERTAIN", "OUTCOME_PHASES", "PHASE_NAMES", "TERMINAL", "Phase"]


class Phase(IntEnum):
    """Where one effect instance stands. The values are part of the verifier's state encoding."""

    IDLE = 0
    PREPARED = 1
    ACKNOWLEDGED = 2
    UNCERTAIN = 3
    NEEDS_RECONCILIATION = 4
    RECONCILED_RECOVERED = 5
    RECONCILED_NOT_OCCURRED = 6
    ABANDONED_UNCERTAIN = 7
    FAILED = 8
    COMPENSATION_REQUIRED = 9
    COMPENSATED = 10


# Phases in which nothing more happens to the instance without a new commit.
TERMINAL: Final = frozenset(
    {
        Phase.IDLE,
        Phase.ACKNOWLEDGED,
        Phase.RECONCILED_RECOVERED,
        Phase.ABANDONED_UNCERTAIN,
        Phase.COMPENSATED,
    }
)

PHASE_NAMES: Final = {phase: phase.name.lower() for phase in Phase}

# What `acknowledged(E)`, `reconciled(E)` and `abandoned(E)` read (new in 1.1): each holds when the latest
# call at some `call E` stands in this phase. A call reconciled as not occurred is no outcome: it is sent
# again at once, with the same key. A call compensated since it was acknowledged no longer stands acknowledged.
OUTCOME_PHASES: Final = {
    "acknowledged": Phase.ACKNOWLEDGED,
    "reconciled": Phase.RECONCILED_RECOVERED,
    "abandoned": Phase.ABANDONED_UNCERTAIN,
}

# What the runtime does, per strategy, when it cannot tell whether the effect happened.
ON_UNCERTAIN: Final = {
    "retry": Phase.PREPARED,
    "idempotent": Phase.PREPARED,
    "reconcilable": Phase.NEEDS_RECONCILIATION,
    "once": Phase.ABANDONED_UNCERTAIN,
    "compensate": Phase.COMPENSATION_REQUIRED,
}

# ...and after a definite provider error (the effect did not happen).
ON_FAILED: Final[dict[str, Phase | None]] = {
    "retry": Phase.PREPARED,
    "idempotent": Phase.PREPARED,
    "reconcilable": Phase.PREPARED,
    "once": None,  # stays FAILED: never repeated
    "compensate": None,  # it did not happen: nothing to compensate
}

# The faults the environment may inject, within the fault budget.
FAULTS: Final = ("lost_request", "lost_response", "provider_error")
