"""The one contract between the effect lifecycle and whatever performs an effect.

The lifecycle decides *when* a call is sent and what an outcome means for the
agreement; an adapter only sends one call and reports, without guessing, what
it knows about it. Four outcomes and three lookup results are all it may say:
an adapter that cannot tell whether a write happened says `uncertain`, and one
that got an answer it cannot trust says `mismatch`, never success.

The allowlist is enforced here, by the runtime, not by adapters' good will:
`check_egress` runs before any connection is opened, and every adapter calls
it first. Kernel and standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from pactwright.errors import CommandError

OutcomeKind = Literal["acknowledged", "failed", "uncertain", "mismatch"]
LookupKind = Literal["applied", "not_applied", "unknown"]


class EgressError(CommandError):
    """A call refused before any byte left: undeclared egress (PW620), no route (PW621), no credential (PW622)."""

    code = "PW620"


@dataclass(frozen=True)
class EffectRequest:
    """One effect call exactly as committed: the same intent always gives the same request.

    `method` and `url` are the declared egress the call uses (as in
    transitions.json), not the endpoint actually reached; `body` is the exact
    canonical JSON bytes to send; `amount` is in minor units as decimal text.
    """

    instance_id: str
    effect: str
    method: str
    url: str
    idempotency_key: str
    body: bytes
    amount: str | None
    timeout_s: float


@dataclass(frozen=True)
class Outcome:
    """What one dispatch established.

    `acknowledged`: the provider confirmed this write (`provider_ref`).
    `failed`: it did not happen. `uncertain`: it may have happened.
    `mismatch`: the provider answered something that contradicts the request
    (another key or amount, an unreadable body): never treated as success.
    `detail` starts with a PW code when there is one and never holds a credential.
    """

    kind: OutcomeKind
    provider_ref: str | None = None
    detail: str = ""
    status: int | None = None


@dataclass(frozen=True)
class Lookup:
    """What the provider says about an idempotency key: applied, not applied, or unknown."""

    kind: LookupKind
    provider_ref: str | None = None
    detail: str = ""


class EffectAdapter(Protocol):
    """Sends one effect call or looks one up. Both refuse undeclared egress before connecting."""

    def dispatch(self, request: EffectRequest, allowed: Sequence[tuple[str, str]]) -> Outcome: ...

    def lookup(self, request: EffectRequest, allowed: Sequence[tuple[str, str]]) -> Lookup: ...


def check_egress(request: EffectRequest, allowed: Sequence[tuple[str, str]]) -> None:
    """Refuse (PW620) a call whose `(method, url)` is not exactly one the effect declares.

    Exact comparison on purpose: no case folding, no trailing-slash or port
    normalisation, so what was reviewed in the policy is what may be called.
    """
    if (request.method, request.url) not in {(method, url) for method, url in allowed}:
        declared = ", ".join(f"{method} {url}" for method, url in allowed) or "none"
        raise EgressError(
            f"effect `{request.effect}` may not call `{request.method} {request.url}`: not a declared egress",
            code="PW620",
            expected=declared,
            found=f"{request.method} {request.url}",
            hint='declare the destination with `egress METHOD "URL"` in the effect, or fix the call',
        )
