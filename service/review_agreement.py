"""What the review page shows for an agreement, read from the store through the runtime's own functions.

An operator looking at an agreement wants the same chain a reviewer saw for
its bundle, now with what actually happened: the state machine with the
path the agreement took, every committed event, its balances (as committed,
and as the ledger holds them when a ledger is given), every effect call and
the lifecycle its evidence records show, the evidence claim with what
supports it and what it does not prove, and every ledger posting under its
reference with whether it is the one the commit expected.

Nothing here reads a table directly: `show`, `evidence`, `list_entries`,
`list_effects` and `Store.load_activation` do, each re-verifying what it
reads as it always does. "Matched" is the worker's own comparison
(`_worker_compare.compare`: same postings, same order) when a ledger is
given, else what the store recorded at delivery. Times are the trusted
clock's, as committed; nothing depends on the wall clock, so the same store
gives the same page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pactwright.canonical import load_json
from pactwright.money import format_money
from pactwright.runtime._worker_compare import Mismatch, compare, normalize_expected
from pactwright.runtime.agreements import show
from pactwright.runtime.clock import utc_text
from pactwright.runtime.effect_ops import list_effects
from pactwright.runtime.evidence import evidence
from pactwright.runtime.ledger_api import Ledger
from pactwright.runtime.outbox import list_entries
from pactwright.runtime.store import Store
from pactwright.service.review_bundle import machine_of

__all__ = ["AgreementPage", "agreement_view"]

Json = dict[str, Any]


@dataclass(frozen=True)
class Balance:
    account: str
    address: str
    committed: str
    ledger: str | None  # None: no ledger was given
    differs: bool


@dataclass(frozen=True)
class PostingRow:
    source: str
    destination: str
    amount: str


@dataclass(frozen=True)
class LedgerEntry:
    """One outbox reference: what the commit expected, what the ledger returned, and whether they match."""

    reference: str
    event_id: str
    transition: str
    status: str
    attempts: int
    expected: tuple[PostingRow, ...]
    returned: tuple[PostingRow, ...] | None  # what the ledger answered at delivery; None before any
    matched: bool | None  # the worker's comparison at delivery; None: not delivered yet
    detail: str | None  # why it did not match (or the last delivery error)
    now: str | None  # with a ledger: `equal`, `differs` or `absent` (nothing under the reference)
    now_detail: str | None


@dataclass(frozen=True)
class Lifecycle:
    seq: int
    kind: str
    phase: str
    at: str
    note: str


@dataclass(frozen=True)
class EffectView:
    instance: str
    effect: str
    transition: str
    event_seq: int
    phase: str
    parked: bool
    strategy: str
    amount: str | None
    destination: str
    idempotency_key: str
    provider_ref: str | None
    attempts: int
    claim: str
    lifecycle: tuple[Lifecycle, ...]


@dataclass(frozen=True)
class AgreementPage:
    id: str
    pact_id: str
    pact_version: str
    manifest_hash: str
    activation_id: int
    state: str
    final: bool
    version: int
    opened_at: str
    params: tuple[tuple[str, str], ...]
    parties: tuple[tuple[str, str], ...]
    machine: Json
    clause_of: Mapping[str, str | None]
    events: tuple[Json, ...]
    balances: tuple[Balance, ...]
    ledger_given: bool
    effects: tuple[EffectView, ...]
    ledger: tuple[LedgerEntry, ...]
    chain: Json
    supports: Json
    does_not_prove: tuple[str, ...]
    records: tuple[tuple[int, str, str], ...]  # evidence log: seq, kind, time

    @property
    def healthy(self) -> bool:
        """Whether nothing on the page is a problem: chain verifies, no mismatch, no quarantine, nothing parked."""
        return (
            bool(self.chain["verifies"])
            and all(e.matched is not False and e.now != "differs" for e in self.ledger)
            and not any(e.parked for e in self.effects)
        )


def _postings(items: Any, scale: int, code: str) -> tuple[PostingRow, ...]:
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping):
            amount = str(item.get("amount"))
            shown = f"{format_money(int(amount), scale)} {code}" if amount.isdigit() else amount
            out.append(PostingRow(str(item.get("source_address")), str(item.get("destination_address")), shown))
        else:
            out.append(PostingRow(str(item), "", ""))
    return tuple(out)


def _ledger_entry(entry: Mapping[str, Any], attempts: int, transition: str, ledger: Ledger | None, scale: int,
                  code: str) -> LedgerEntry:  # fmt: skip
    """The worker's verdict as recorded (delivered: equal; quarantined: not), and, with a ledger, a fresh look."""
    expected, returned, status = entry["expected_postings"], entry["delivered_postings"], str(entry["status"])
    matched: bool | None = None if status == "pending" else status != "quarantined" and entry["matches"] is not False
    now = now_detail = None
    if ledger is not None:
        found = ledger.postings(str(entry["reference"]))
        try:
            compare(normalize_expected(expected), found)
            now = "equal"
        except Mismatch as exc:
            now, now_detail = ("absent" if found is None else "differs"), str(exc)
    return LedgerEntry(
        reference=str(entry["reference"]),
        event_id=str(entry["event_id"]),
        transition=transition,
        status=status,
        attempts=attempts,
        expected=_postings(expected, scale, code),
        returned=None if returned is None else _postings(returned, scale, code),
        matched=matched,
        detail=entry["last_error"],
        now=now,
        now_detail=now_detail,
    )


_NOTE_KEYS = ("outcome", "resolution", "operator", "provider_ref", "detail", "reason")


def _lifecycle(records: list[Json], instance: str) -> tuple[Lifecycle, ...]:
    out = []
    for record in records:
        if record.get("instance") != instance or not str(record.get("kind", "")).startswith("effect_"):
            continue
        notes = [f"{k} {record[k]}" for k in _NOTE_KEYS if record.get(k) not in (None, "")]
        if record.get("attempt") is not None:
            notes.insert(0, f"attempt {record['attempt']}")
        at = record.get("at")
        out.append(Lifecycle(
            seq=int(record["seq"]), kind=str(record["kind"]).removeprefix("effect_"),
            phase=str(record.get("phase") or ""), at=utc_text(int(at)) if isinstance(at, int) else "",
            note="; ".join(notes),
        ))  # fmt: skip
    return tuple(out)


def agreement_view(store: Store, agreement_id: str, ledger: Ledger | None = None) -> AgreementPage:
    """The page's view of one agreement (PW501 if the store has no such agreement)."""
    shown = show(store, agreement_id, last=1, ledger=ledger)
    report = evidence(store, agreement_id)
    doc, claim, supports = report.doc, report.doc["claim"], report.doc["supports"]
    agreement = shown.agreement
    stored = store.load_activation(agreement.activation_id)
    table = load_json(stored.files["transitions.json"])
    scale, code = int(table["currency"]["scale"]), str(table["currency"]["code"])
    clause_of = {str(t["id"]): t.get("clause") for t in table["transitions"]}
    transition_of = {e["event_id"]: e["transition"] for e in claim["events"]}
    attempts = {e.reference: e.attempts for e in list_entries(store, agreement_id=agreement_id)}
    held = shown.ledger_balances
    balances = tuple(
        Balance(
            account=name,
            address=agreement.accounts.get(name, ""),
            committed=f"{format_money(int(b['minor']), scale)} {code}",
            ledger=None if held is None else f"{format_money(int(held.get(name, '0')), scale)} {code}",
            differs=held is not None and str(held.get(name, "0")) != str(b["minor"]),
        )
        for name, b in claim["balances"].items()
    )
    said = {str(c["instance"]): c for c in claim.get("effects", [])}
    effects = tuple(
        EffectView(
            instance=r.id, effect=r.effect, transition=str(said.get(r.id, {}).get("transition", "?")),
            event_seq=r.event_seq, phase=r.phase, parked=r.parked, strategy=r.strategy,
            amount=None if r.amount is None else f"{format_money(int(r.amount), scale)} {code}",
            destination=r.destination, idempotency_key=r.idempotency_key, provider_ref=r.provider_ref,
            attempts=r.attempts, claim=str(said.get(r.id, {}).get("claim", "")),
            lifecycle=_lifecycle(report.chain.records, r.id),
        )
        for r in list_effects(store, agreement_id=agreement_id)
    )  # fmt: skip
    entries = tuple(
        _ledger_entry(e, attempts.get(e["reference"], 0), transition_of.get(e["event_id"], "?"), ledger, scale, code)
        for e in supports["ledger"]
    )
    records = tuple(
        (int(r["seq"]), str(r["kind"]), utc_text(int(r["at"])) if isinstance(r.get("at"), int) else
         utc_text(int(r["committed_at"])) if isinstance(r.get("committed_at"), int) else "")
        for r in report.chain.records
    )  # fmt: skip
    return AgreementPage(
        id=agreement.id,
        pact_id=agreement.pact_id,
        pact_version=str(doc["pact"]["version"]),
        manifest_hash=agreement.manifest_hash,
        activation_id=agreement.activation_id,
        state=agreement.state,
        final=bool(claim["final"]),
        version=agreement.version,
        opened_at=str(claim["opened_at_utc"]),
        params=tuple((name, str(p["text"])) for name, p in claim["params"].items()),
        parties=tuple(sorted(claim["parties"].items())),
        machine=machine_of(table),
        clause_of=clause_of,
        events=tuple(claim["events"]),
        balances=balances,
        ledger_given=ledger is not None,
        effects=effects,
        ledger=entries,
        chain=dict(supports["evidence_chain"]),
        supports=dict(supports),
        does_not_prove=tuple(str(x) for x in doc["does_not_prove"]),
        records=records,
    )
