"""The effect protocol, as the verifier reads it: re-exported from the kernel.

The definition lives in `pactwright.protocol`, which the runtime runs; the
verifier checks exactly that, never a copy of its own.
"""

from __future__ import annotations

from pactwright.protocol import FAULTS, ON_FAILED, ON_UNCERTAIN, PHASE_NAMES, TERMINAL, Phase

__all__ = ["FAULTS", "ON_FAILED", "ON_UNCERTAIN", "PHASE_NAMES", "TERMINAL", "Phase"]
