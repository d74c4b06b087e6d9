"""What a claimed effect row's own agreement and bundle say: is the row the call its records make it,
which compensation its bundle derives, where it may be sent.

The effect worker asks these in its claim transaction, under the agreement's
row lock, before any byte leaves; all three rest on one read of the
agreement and its re-verified bundle (`Own`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pactwright.errors import PactwrightError
from pactwright.runtime import _agreement as rows
from pactwright.runtime._compensation import Compensation, derive
from pactwright.runtime.effect_payload import DEFAULT_TIMEOUT_S
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend

if TYPE_CHECKING:
    from pactwright.runtime.effect_worker import _Row

__all__ = ["Own", "Target", "derived_compensation", "disagreement", "egress_of"]


class Own:
    """One agreement's row and re-verified bundle, read once per claim, in the claim's transaction.

    The checks before a send, the compensation's derivation and the egress
    all rest on the same bundle; the agreement row is locked for the whole
    transaction and a bundle's rows never change, so one read serves them
    all. A bundle that does not load is kept as
    the error it raised, for each caller to refuse in its own words.
    """

    def __init__(self, store: Store, db: Backend, agreement_id: str) -> None:
        self.store, self.db, self.agreement_id = store, db, agreement_id
        self._loaded: tuple[rows.Agreement, rows.Bundle] | PactwrightError | None = None

    def loaded(self) -> tuple[rows.Agreement, rows.Bundle]:
        """(agreement, bundle); raises the `PactwrightError` that loading them raised, every time."""
        if self._loaded is None:
            try:
                agreement = rows.read(self.db, self.agreement_id, lock=False)
                self._loaded = (agreement, rows.load_bundle(self.store, self.db, agreement, ()))
            except PactwrightError as exc:
                self._loaded = exc
        if isinstance(self._loaded, PactwrightError):
            raise self._loaded
        return self._loaded


def disagreement(own: Own, row: _Row, *, earlier: bool = False) -> str | None:
    """Why the row is not the call its evidence records make it (None when it is): before any byte leaves.

    The row is only a copy. Its bytes, key, destination, amount, strategy
    and phase must be those the records of an intact chain give it
    (runtime/_effect_replay.py, the replay `evidence verify` runs): every
    record hashing to its row, linked to its predecessor, numbered without
    gaps, and agreeing with the event log (`check_chain`). So an edited row
    cannot send another amount, or to another destination, or send a `once`
    call again (its phase set back, its strategy changed); and a
    compensation is sent only as the one row `ID/c` derived from the bundle
    and its call, for a call the records put in `compensation_required`.
    With `earlier`, the calls before it in its event are checked too (a
    call goes only after them, and is cancelled when one was given up), so
    an earlier row set to `acknowledged` behind pactwright's back, moved or
    deleted sends nothing.
    """
    from pactwright.runtime._effect_replay import row_disagreement
    from pactwright.runtime._evidence_chain import check_chain

    try:
        agreement, bundle = own.loaded()
    except PactwrightError as exc:
        return f"the bundle of agreement `{row.agreement_id}` does not load ({exc.code})"
    chain = check_chain(own.db, agreement)
    if not chain.ok:
        return f"the evidence chain of agreement `{row.agreement_id}` does not verify"
    return row_disagreement(own.db, row.agreement_id, bundle.doc, chain.records, row.id, earlier=earlier)


def derived_compensation(own: Own, original: _Row) -> Compensation | None:
    """The compensation `original` must have under its agreement's re-verified bundle (None: it has none)."""
    try:
        bundle = own.loaded()[1]
        return derive(bundle.doc, original.agreement_id, original.id, original.effect, original.key,
                      original.payload, original.amount)  # fmt: skip
    except PactwrightError:
        return None  # a bundle that no longer verifies, or a payload that does not parse, derives nothing


@dataclass(frozen=True)
class Target:
    """What the agreement's own re-verified bundle allows the row's effect: its egress and timeout."""

    egress: tuple[tuple[str, str], ...]
    timeout_s: int


def egress_of(own: Own, row: _Row) -> Target:
    """The egress and timeout the bundle gives the row's effect; none for an effect it does not declare."""
    try:
        bundle = own.loaded()[1]
    except PactwrightError:
        return Target((), DEFAULT_TIMEOUT_S)  # a bundle that no longer verifies allows nothing
    for effect in bundle.doc.get("effects", []):
        if effect["name"] == row.effect:
            egress = tuple((str(e["method"]), str(e["url"])) for e in effect["egress"])
            return Target(egress, int(effect.get("timeout") or DEFAULT_TIMEOUT_S))
    return Target((), DEFAULT_TIMEOUT_S)
