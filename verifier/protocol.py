"""The runtime's effect protocol as the verifier models it.

Each `call EFFECT` in a committed transition becomes an effect instance that
the outbox worker dispatches. Faults (within the fault budget) and the
effect's declared strategy decide what happens next; reconciliation
outcomes are explored as the environment's choices. `happened` records
whether the effect really occurred, so reconciliation answers truthfully.
"""

from __future__ import annotations

from enum import IntEnum


class Phase(IntEnum):
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


TERMINAL = frozenset(
    {
        Phase.IDLE,
        Phase.ACKNOWLEDGED,
        Phase.RECONCILED_RECOVERED,
        Phase.ABANDONED_UNCERTAIN,
        Phase.COMPENSATED,
    }
)

PHASE_NAMES = {phase: phase.name.lower() for phase in Phase}

# What the runtime does, per strategy, when it cannot tell whether the effect happened.
ON_UNCERTAIN = {
    "retry": Phase.PREPARED,
    "idempotent": Phase.PREPARED,
    "reconcilable": Phase.NEEDS_RECONCILIATION,
    "once": Phase.ABANDONED_UNCERTAIN,
    "compensate": Phase.COMPENSATION_REQUIRED,
}

# ...and after a definite provider error (the effect did not happen).
ON_FAILED = {
    "retry": Phase.PREPARED,
    "idempotent": Phase.PREPARED,
    "reconcilable": Phase.PREPARED,
    "once": None,  # stays FAILED: never repeated
    "compensate": None,  # it did not happen: nothing to compensate
}

FAULTS = ("lost_request", "lost_response", "provider_error")
