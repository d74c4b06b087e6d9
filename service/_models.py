"""The API's request and response bodies as pydantic models: what handlers parse and emit, and the OpenAPI.

Handlers validate every request body with these models and pass every
response through them (`dump`), and `/openapi.json` is written from the
same models' `model_json_schema`, so the published schema is the one the
code enforces. Request models are strict (a number is never a string, a
string never a number, unknown fields are refused); money, percents and
every param value are strings exactly as the CLI takes them (`"64.90"`),
and amounts the runtime reports are strings of minor units (`"6490"`), as
its JSON output prints them: never a JSON number.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from pactwright.runtime.effect_ops import Resolution

__all__ = [
    "Abandon",
    "ActiveBundle",
    "ActiveBundleList",
    "Agreement",
    "Approval",
    "ApprovalList",
    "CommandResult",
    "Decision",
    "Effect",
    "EffectList",
    "Event",
    "EventList",
    "Evidence",
    "GrantResult",
    "Health",
    "OpenAgreement",
    "OpenedAgreement",
    "Problem",
    "Readiness",
    "Reconcile",
    "SubmitCommand",
    "Verification",
    "dump",
]

Name = Field(min_length=1, max_length=200)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def dump(model: type[_Response], doc: Any) -> dict[str, Any]:
    """A runtime document as the response model publishes it: checked against the model, extras dropped."""
    return model.model_validate(doc).model_dump(mode="json")


# Requests ------------------------------------------------------------------------------------------------


class OpenAgreement(_Request):
    """Open an agreement on the active version of a pact (`pactwright open`)."""

    pact_id: StrictStr = Name
    id: StrictStr | None = Field(None, description="the agreement id (default: a new random one)", max_length=200)
    params: dict[str, StrictStr] = Field(
        default_factory=dict, description="param values as decimal strings, money as `64.90`", max_length=64
    )
    parties: dict[str, StrictStr] = Field(description="role -> party", max_length=64)


class SubmitCommand(_Request):
    """One command (`pactwright submit`): the token's party acts in `role`; the key is `Idempotency-Key`."""

    transition: StrictStr = Name
    role: StrictStr = Field(min_length=1, max_length=64, description="the role the token's party acts in")
    params: dict[str, StrictStr] = Field(default_factory=dict, description="values the command states",
                                         max_length=64)  # fmt: skip
    expect_version: StrictInt | None = Field(None, ge=0, le=2**53, description="refuse unless at this version")
    dry_run: StrictBool = Field(False, description="compute what the command would do; write and send nothing")


class Decision(_Request):
    """The approver's ed25519 signature (base64) over `{"approval", "preview_digest", "decision"}`."""

    proof: StrictStr = Field(min_length=1, max_length=200)


class Reconcile(_Request):
    """Resolve a parked effect call as found at the provider, or as not having happened."""

    resolution: Resolution
    provider_ref: StrictStr | None = Field(None, max_length=200)


class Abandon(_Request):
    """Give a parked effect call up as `may have occurred`."""

    reason: StrictStr = Field(min_length=1, max_length=500)


# Responses -----------------------------------------------------------------------------------------------


class Problem(_Response):
    """RFC 9457 problem details; `code` is the stable PW code (docs/errors.md)."""

    type: str
    title: str
    status: int
    detail: str
    code: str = Field(pattern=r"^PW[0-9]{3}$")
    instance: str | None = None
    field: str | None = None
    expected: str | None = None
    found: str | None = None
    hint: str | None = None


class Health(_Response):
    status: Literal["ok"]


class Readiness(_Response):
    status: Literal["ready"]
    store: str
    schema_version: int
    ledger: str


class OpenedAgreement(_Response):
    id: str
    pact_id: str
    manifest_hash: str
    state: str
    version: int
    params: dict[str, str]
    parties: dict[str, str]
    accounts: dict[str, str]


class Event(_Response):
    seq: int
    event_id: str
    transition: str
    actor: str = Field(description="ROLE:PARTY")
    committed_at: int


class PendingOutbox(_Response):
    reference: str
    program: str
    expected_postings: list[dict[str, str]]
    attempts: int


class Agreement(_Response):
    id: str
    pact_id: str
    manifest_hash: str
    state: str
    version: int
    params: dict[str, str]
    parties: dict[str, str]
    accounts: dict[str, str]
    stamps: dict[str, int]
    fired: dict[str, int]
    balances: dict[str, str] = Field(description="minor units, as committed by the command path")
    pending_outbox: list[PendingOutbox]
    last_events: list[Event]
    ledger_balances: dict[str, str] | None = Field(description="the same accounts as the ledger holds them")


class EventList(_Response):
    data: list[Event]


class Posting(_Response):
    source: str
    destination: str
    source_address: str
    destination_address: str
    amount: str = Field(description="minor units")
    asset: str


class EffectCall(_Response):
    effect: str
    instance: str
    amount: str | None
    destination: str
    idempotency_key: str
    payload_digest: str
    phase: str


class Approval(_Response):
    id: str
    agreement: str
    transition: str
    requested_by: dict[str, str]
    idempotency_key: str
    command_digest: str
    expect_version: int
    preview: dict[str, Any] = Field(description="what the approver decides on (docs/approvals.md)")
    preview_digest: str
    status: str
    expires_at: int
    created_at: int
    decided_at: int | None
    decided_by: str | None
    proof_digest: str | None
    event_id: str | None
    grants: list[dict[str, Any]]
    recorded: bool
    intact: bool


class WouldSend(_Response):
    effect: str
    index: int
    method: str
    url: str
    idempotency_key: str
    payload_digest: str
    body: str
    timeout_s: int


class CommandResult(_Response):
    agreement: str
    event_id: str
    seq: int
    version: int
    state: str
    transition: str
    committed_at: int
    postings: list[Posting]
    outbox: list[str]
    replayed: bool
    dry_run: bool
    effects: list[EffectCall]
    status: Literal["committed", "waiting_for_approval"]
    approval: Approval | None
    would_send: list[WouldSend] | None = Field(None, description="with `dry_run`: the requests effects would send")


class ApprovalList(_Response):
    data: list[Approval]


class GrantResult(_Response):
    request: Approval
    result: CommandResult


class Effect(_Response):
    id: str
    agreement: str
    event_seq: int
    call: int
    effect: str
    strategy: str
    compensates: str | None
    phase: str
    destination: str
    idempotency_key: str
    payload_digest: str
    amount: str | None
    attempts: int
    provider_ref: str | None
    last_error: str | None
    resolution: str | None
    resolved_by: str | None
    reason: str | None
    quarantined: bool
    parked: bool
    updated_at: int


class EffectList(_Response):
    data: list[Effect]


class Evidence(_Response):
    format: str
    agreement: str
    pact: dict[str, str]
    claim: dict[str, Any]
    supports: dict[str, Any]
    does_not_prove: list[str]


class ChainProblem(_Response):
    code: str
    seq: int | None
    message: str


class Verification(_Response):
    agreement: str
    records: int
    head: str | None
    verifies: bool
    problems: list[ChainProblem]


class ActiveBundle(_Response):
    pact_id: str
    pact_version: str
    manifest_hash: str
    activation_id: int


class ActiveBundleList(_Response):
    data: list[ActiveBundle]
