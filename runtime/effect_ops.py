"""What operators do with effect calls: list them, and resolve the ones parked with an unknown outcome.

A call parks in `needs_reconciliation` (a `reconcilable` effect whose
outcome is unknown and whose provider could not say) or is quarantined (the
provider answered something that contradicts the request). Only a party
holding the reserved `operator` role in the store's party registry may
resolve it (PW641 otherwise), and only a call in one of those states
(PW642):

- `reconcile --resolution recovered_acknowledgement --provider-ref REF`:
  the effect happened (the operator found it at the provider): the call is
  `reconciled_recovered`;
- `reconcile --resolution not_occurred`: it did not happen: the call is
  `reconciled_not_occurred` and the worker sends it once more, same key;
- `abandon --reason TEXT`: nobody can tell; the call is
  `abandoned_uncertain` ("may have occurred"), earlier calls of its event
  that declare `compensate with E` require E, and every later command that
  depends on the effect fails with EFFECT_ABANDONED_UNCERTAIN (PW526).

Each resolution is one store transaction under the agreement's row lock,
with an evidence record naming the operator, the resolution and the
reason; a refused resolution changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from pactwright.errors import CommandError, UsageError
from pactwright.runtime import _agreement as rows
from pactwright.runtime.clock import Clock, SystemClock, epoch_seconds
from pactwright.runtime.effect_worker import after_phase
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import EFFECT_TABLES

__all__ = ["RESOLUTIONS", "EffectRecord", "Resolution", "abandon", "list_effects", "reconcile"]

# What an operator found at the provider; the service's request model takes this same type.
Resolution = Literal["recovered_acknowledgement", "not_occurred"]
RESOLUTIONS: tuple[str, ...] = get_args(Resolution)
OPERATOR = "operator"
MAX_REASON = 500
MAX_REF = 200
_COLUMNS = (
    "id, agreement_id, event_seq, call_index, effect, strategy, compensates, phase, method, url, idempotency_key, "
    "payload_digest, amount, attempts, provider_ref, last_error, resolution, resolved_by, reason, quarantined, "
    "updated_at"
)


@dataclass(frozen=True)
class EffectRecord:
    """One effect call as the store holds it."""

    id: str
    agreement_id: str
    event_seq: int
    call_index: int
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
    updated_at: int

    @property
    def parked(self) -> bool:
        return self.phase == "needs_reconciliation" or self.quarantined

    @classmethod
    def of(cls, row: tuple[Any, ...]) -> EffectRecord:
        (id_, agreement, seq, index, effect, strategy, compensates, phase, method, url, key, digest, amount,
         attempts, ref, error, resolution, by, reason, quarantined, updated) = row  # fmt: skip
        opt = lambda v: None if v is None else str(v)  # noqa: E731
        return cls(str(id_), str(agreement), int(seq), int(index), str(effect), str(strategy), opt(compensates),
                   str(phase), f"{method} {url}", str(key), str(digest), opt(amount), int(attempts), opt(ref),
                   opt(error), opt(resolution), opt(by), opt(reason), bool(int(quarantined)), int(updated))  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "agreement": self.agreement_id, "event_seq": self.event_seq, "call": self.call_index,
            "effect": self.effect, "strategy": self.strategy, "compensates": self.compensates, "phase": self.phase,
            "destination": self.destination, "idempotency_key": self.idempotency_key,
            "payload_digest": self.payload_digest, "amount": self.amount, "attempts": self.attempts,
            "provider_ref": self.provider_ref, "last_error": self.last_error, "resolution": self.resolution,
            "resolved_by": self.resolved_by, "reason": self.reason, "quarantined": self.quarantined,
            "parked": self.parked, "updated_at": self.updated_at,
        }  # fmt: skip


def list_effects(store: Store, *, parked: bool = False, agreement_id: str | None = None) -> list[EffectRecord]:
    """Every effect call (or only the parked ones), in commit order."""
    if store.schema_version() < EFFECT_TABLES:
        return []
    where, params = [], []
    if agreement_id is not None:
        where.append("agreement_id = ?")
        params.append(agreement_id)
    if parked:
        where.append("(phase = 'needs_reconciliation' OR quarantined = 1)")
    sql = f"SELECT {_COLUMNS} FROM effects"  # noqa: S608
    if where:
        sql += " WHERE " + " AND ".join(where)
    with store.transaction(write=False) as db:
        found = db.query(sql, params)
    # Sorted here, by code point: ORDER BY on text follows the database's collation, which differs.
    records = [EffectRecord.of(r) for r in found]
    return sorted(records, key=lambda r: (r.agreement_id, r.event_seq, r.call_index, r.id))


def _find(db: Backend, agreement_id: str, effect: str) -> EffectRecord:
    """The call named by its id, or by its effect's name when the agreement has exactly one parked call of it."""
    found = db.query(f"SELECT {_COLUMNS} FROM effects WHERE agreement_id = ? AND id = ?",  # noqa: S608
                     (agreement_id, effect))  # fmt: skip
    if found:
        return EffectRecord.of(found[0])
    named = [EffectRecord.of(r) for r in db.query(
        f"SELECT {_COLUMNS} FROM effects WHERE agreement_id = ? AND effect = ? ORDER BY event_seq, call_index, id",  # noqa: S608
        (agreement_id, effect))]  # fmt: skip
    parked = [r for r in named if r.parked]
    if len(parked) == 1:
        return parked[0]
    if not named:
        raise CommandError(f"agreement `{agreement_id}` has no effect call `{effect}`", code="PW640",
                           field="effect", hint="list them with `pactwright effects list --agreement ID`")  # fmt: skip
    if not parked:
        raise _not_parked(named[-1])
    ids = ", ".join(r.id for r in parked)
    raise CommandError(f"`{effect}` names {len(parked)} parked calls in agreement `{agreement_id}`; name one by id",
                       code="PW640", field="effect", expected=ids)  # fmt: skip


def _not_parked(record: EffectRecord) -> CommandError:
    return CommandError(
        f"effect call `{record.id}` is `{record.phase}`, not parked: there is nothing to resolve",
        code="PW642",
        field="effect",
        found=record.phase,
    )


def _operator(db: Backend, party: str) -> None:
    held = db.query("SELECT 1 FROM parties WHERE party = ? AND role = ?", (party, OPERATOR))
    if not held:
        raise CommandError(
            f"party `{party}` does not hold the `{OPERATOR}` role: only an operator resolves parked effects",
            code="PW641",
            field="as",
            found=party,
            hint="an operator is registered with `pactwright parties add PARTY --role operator`",
        )


def _text(value: str, what: str, limit: int) -> str:
    if not value or len(value) > limit or not value.isprintable() or value.strip() != value:
        raise UsageError(f"{what} is 1-{limit} printable characters", code="PW643", field=what)
    return value


def _resolve(store: Store, agreement_id: str, effect: str, party: str, clock: Clock | None, *, phase: str,
             resolution: str, provider_ref: str | None, reason: str | None) -> EffectRecord:  # fmt: skip
    now = epoch_seconds(clock or SystemClock())
    with store.transaction(write=True, exclusive=False) as db:
        rows.read(db, agreement_id, lock=True)
        _operator(db, party)
        record = _find(db, agreement_id, effect)
        if not record.parked:
            raise _not_parked(record)
        db.execute(
            "UPDATE effects SET phase = ?, quarantined = 0, provider_ref = COALESCE(?, provider_ref), resolution = ?, "
            "resolved_by = ?, reason = ?, lease_owner = NULL, lease_until = NULL, next_at = ?, updated_at = ? "
            "WHERE id = ?",
            (phase, provider_ref, resolution, party, reason, now, now, record.id),
        )
        after_phase(db, record, phase, now)
        rows.append_evidence(db, agreement_id, "effect_resolved", {
            "instance": record.id, "effect": record.effect, "operator": party, "resolution": resolution,
            "provider_ref": provider_ref, "reason": reason, "phase": phase, "was": record.phase,
            "quarantined": record.quarantined, "at": now})  # fmt: skip
        found = db.query(f"SELECT {_COLUMNS} FROM effects WHERE id = ?", (record.id,))  # noqa: S608
    return EffectRecord.of(found[0])


def reconcile(store: Store, agreement_id: str, effect: str, resolution: str, party: str,
              provider_ref: str | None = None, clock: Clock | None = None) -> EffectRecord:  # fmt: skip
    """Resolve a parked call as found at the provider (`recovered_acknowledgement`) or not (`not_occurred`)."""
    if resolution not in RESOLUTIONS:
        raise UsageError(f"`{resolution}` is not a resolution", code="PW643", field="resolution",
                         expected=", ".join(RESOLUTIONS), found=resolution)  # fmt: skip
    if resolution == "recovered_acknowledgement":
        if provider_ref is None:
            raise UsageError("`recovered_acknowledgement` needs the provider's reference (`--provider-ref REF`)",
                             code="PW643", field="provider_ref")  # fmt: skip
        ref = _text(provider_ref, "provider_ref", MAX_REF)
        return _resolve(store, agreement_id, effect, party, clock, phase="reconciled_recovered",
                        resolution=resolution, provider_ref=ref, reason=None)  # fmt: skip
    if provider_ref is not None:
        raise UsageError("`not_occurred` takes no provider reference", code="PW643", field="provider_ref")
    return _resolve(store, agreement_id, effect, party, clock, phase="reconciled_not_occurred",
                    resolution=resolution, provider_ref=None, reason=None)  # fmt: skip


def abandon(store: Store, agreement_id: str, effect: str, reason: str, party: str,
            clock: Clock | None = None) -> EffectRecord:  # fmt: skip
    """Give a parked call up as "may have occurred": nothing that depends on its effect runs again."""
    text = _text(reason, "reason", MAX_REASON)
    return _resolve(store, agreement_id, effect, party, clock, phase="abandoned_uncertain", resolution="abandoned",
                    provider_ref=None, reason=text)  # fmt: skip
