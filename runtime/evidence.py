"""Evidence for one agreement: what it claims happened, what supports that, and what it cannot show.

`evidence` reads the agreement's hash-chained evidence log (re-walked and
cross-checked on every call, `runtime/_evidence_chain.py`), its event log,
its outbox rows and its bundle (every stored byte re-verified) and states:

- the claim: who opened it on which bundle with which params and parties,
  then each committed command (actor, trusted commit time, state change,
  every posting with its amount at the currency's scale and its ledger
  reference), and the state and balances it ends in;
- what supports it: the bundle's manifest hash and activation, the event
  ids, the chain (record count, head hash, whether it verifies), each
  ledger reference's delivery status and whether the postings the ledger
  returned equal the ones expected at commit, and consumed approvals;
- what it does not prove: fixed limits of a store-backed runtime, the open
  outbox entries, and the bundle's own verification report's list.

Everything is read in one read-only transaction; nothing depends on the
wall clock, so the same store gives the same document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pactwright.canonical import load_json
from pactwright.errors import PactwrightError
from pactwright.money import format_duration, format_money
from pactwright.runtime import _agreement as rows
from pactwright.runtime._agreement import Agreement, Bundle
from pactwright.runtime._evidence_chain import ChainCheck, Problem, check_chain
from pactwright.runtime._evidence_effects import effect_claims, effect_limits, has_effect_tables
from pactwright.runtime._evidence_tables import check_tables
from pactwright.runtime.clock import utc_text
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend

__all__ = ["ChainCheck", "EvidenceReport", "Problem", "evidence", "verify_evidence"]

FORMAT = "pactwright.evidence/1"
REPORT_PATH = "report.json"


@dataclass(frozen=True)
class EvidenceReport:
    """The evidence document (`to_json`) and its chain check; `text()` renders it for people."""

    doc: dict[str, Any]
    chain: ChainCheck

    def to_json(self) -> dict[str, Any]:
        return self.doc

    def text(self) -> str:
        return render_text(self.doc)


def _amount(bundle: Bundle, minor: int) -> str:
    return f"{format_money(minor, bundle.scale)} {bundle.doc['currency']['code']}"


def _param_text(bundle: Bundle, name: str, value: str) -> str:
    kind = next(str(p["type"]) for p in bundle.doc["params"] if p["name"] == name)
    if kind == "money":
        return _amount(bundle, int(value))
    if kind == "percent":
        return f"{value}%"
    if kind == "duration":
        return format_duration(int(value))
    return value


def _posting_key(posting: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """A posting as (source, destination, amount, asset), whichever field names the writer used."""
    return (
        str(posting.get("source_address", posting.get("source"))),
        str(posting.get("destination_address", posting.get("destination"))),
        str(posting.get("amount")),
        str(posting.get("asset")),
    )


def _ledger(db: Backend, agreement_id: str) -> list[dict[str, Any]]:
    out = []
    for reference, seq, status, expected, delivered, error in db.query(
        "SELECT reference, event_seq, status, expected_postings, delivered_postings, last_error FROM outbox "
        "WHERE agreement_id = ? ORDER BY event_seq, group_index",
        (agreement_id,),
    ):
        want = rows.loads(expected, "expected postings")
        got = None if delivered is None else rows.loads(delivered, "delivered postings")
        matches = None
        if got is not None and isinstance(got, list):
            matches = sorted(_posting_key(p) for p in got if isinstance(p, Mapping)) == sorted(
                _posting_key(p) for p in want
            ) and len(got) == len(want)
        out.append({
            "reference": str(reference),
            "event_id": f"{agreement_id}/{int(seq)}",
            "status": str(status),
            "expected_postings": want,
            "delivered_postings": got,
            "matches": matches,
            "last_error": None if error is None else str(error),
        })  # fmt: skip
    return out


def _approvals(db: Backend, agreement_id: str) -> list[dict[str, Any]]:
    return [
        {
            "id": str(i),
            "transition": str(t),
            "approver": f"{role}:{party}",
            "payload_digest": str(d),
            "consumed_by": str(e),
            "granted_at": int(g),
        }
        for i, t, role, party, d, e, g in db.query(
            "SELECT id, transition, approver_role, approver_party, payload_digest, consumed_event_id, granted_at "
            "FROM approvals WHERE agreement_id = ? AND consumed_event_id IS NOT NULL ORDER BY id",
            (agreement_id,),
        )
    ]


def _report_limits(bundle: Bundle) -> list[str]:
    data = bundle.stored.files.get(REPORT_PATH)
    if data is None:
        return []
    try:
        report = load_json(data)
    except PactwrightError:
        return []
    limits = report.get("does_not_prove", []) if isinstance(report, dict) else []
    return [str(item) for item in limits]


def _claim(bundle: Bundle, agreement: Agreement, records: list[dict[str, Any]],
           ledger: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    references = {e["event_id"]: e["reference"] for e in ledger}
    events = []
    for record in records:
        if record.get("kind") != "event":
            continue
        command = record["command"]
        postings = [
            {**p, "amount_text": _amount(bundle, int(p["amount"])), "reference": references.get(record["event_id"])}
            for p in record.get("postings", [])
        ]
        events.append({
            "event_id": record["event_id"],
            "transition": command["transition"],
            "actor": f"{command['actor']['role']}:{command['actor']['party']}",
            "committed_at": int(record["committed_at"]),
            "committed_at_utc": utc_text(int(record["committed_at"])),
            "from": record["from"],
            "to": record["to"],
            "postings": postings,
            "approval": record.get("approval"),
        })  # fmt: skip
    final = bool(bundle.state(agreement.state)["final"])
    return {
        "opened_at": agreement.opened_at,
        "opened_at_utc": utc_text(agreement.opened_at),
        "params": {
            name: {"value": value, "text": _param_text(bundle, name, value)}
            for name, value in sorted(agreement.params.items())
        },
        "parties": dict(agreement.parties),
        "accounts": dict(agreement.accounts),
        "events": events,
        "state": agreement.state,
        "final": final,
        "version": agreement.version,
        "balances": {
            name: {"minor": str(v), "text": _amount(bundle, v)} for name, v in sorted(agreement.balances.items())
        },
    }


def _limits(bundle: Bundle, agreement: Agreement, chain: ChainCheck, ledger: list[dict[str, Any]]) -> list[str]:
    parties = ", ".join(f"{r}={p}" for r, p in sorted(agreement.parties.items()))
    external = sorted(bundle.external())
    out = [
        f"that the parties are who they claim to be: the store binds roles to party names ({parties}); "
        "who holds those names is outside it",
        f"that money reached anyone outside the ledger: postings to external accounts "
        f"({', '.join(f'`{a}`' for a in external) or 'none'}) record what the ledger booked, not a bank transfer",
        "that the policy matches the contract or intent it was written from",
        "that the trusted clock was right: commit times are what the runtime's clock read",
        "that the whole store was not rewritten: the chain shows no record was edited, deleted or reordered "
        "relative to the others and to the event log, but a writer able to rewrite every table can rebuild it; "
        f"keep the head hash ({chain.head}) elsewhere and check it with `pactwright evidence verify --head`",
    ]
    for entry in ledger:
        if entry["status"] == "pending":
            out.append(f"that the postings under `{entry['reference']}` reached the ledger: they await delivery")
        elif entry["status"] == "quarantined":
            out.append(f"that `{entry['reference']}` settled: its delivery was quarantined ({entry['last_error']})")
        elif entry["matches"] is False:
            out.append(f"that `{entry['reference']}` settled as committed: the ledger's postings differ")
        else:
            out.append(
                f"that the ledger still holds `{entry['reference']}`: the store kept what the ledger "
                "returned at delivery; `pactwright show --ledger URL` shows the balances it holds now"
            )
    opened = next((r for r in chain.records if r.get("kind") == "opened"), {})
    if opened and "activation_id" not in opened:
        out.append(f"that the agreement was opened under activation {agreement.activation_id}: its `opened` record "
                   "(written before the record held it) names only the bundle's manifest hash")  # fmt: skip
    if not chain.ok:
        out.append("anything the broken records would support: the evidence chain does not verify")
    out += [f"(from the bundle's verification report) {item}" for item in _report_limits(bundle) if item not in out]
    return out


def _load(db: Backend, store: Store, agreement_id: str) -> tuple[Agreement, Bundle]:
    agreement = rows.read(db, agreement_id, lock=False)
    return agreement, rows.load_bundle(store, db, agreement)


def _checked(db: Backend, store: Store, agreement: Agreement, expect_head: str | None = None) -> ChainCheck:
    """The chain walked and cross-checked, and, when it is intact, every table the evidence speaks from
    replayed from its records and compared (runtime/_evidence_tables.py): what verifies is what may be claimed."""
    chain = check_chain(db, agreement, expect_head)
    if any(p.code != "PW587" for p in chain.problems):  # broken records replay into noise: named already
        return chain
    try:
        doc = rows.load_bundle(store, db, agreement, ()).doc
    except PactwrightError as exc:
        chain.problems.append(Problem("PW586", None, f"the agreement's bundle does not load, so its effect calls "
                                                     f"cannot be checked: {exc.message}"))  # fmt: skip
        return chain
    found = check_tables(db, agreement, doc, chain.records, has_effect_tables(db))
    chain.problems.extend(Problem("PW586", seq, message) for seq, message in found)
    return chain


def verify_evidence(store: Store, agreement_id: str, expect_head: str | None = None) -> ChainCheck:
    """Re-walk the agreement's chain and the tables it supports (PW501 if there is no such agreement);
    problems are in the result."""
    with store.transaction(write=False) as db:
        agreement = rows.read(db, agreement_id, lock=False)
        return _checked(db, store, agreement, expect_head)


def evidence(store: Store, agreement_id: str) -> EvidenceReport:
    """The claim, its support and its limits for one agreement, from one consistent read."""
    with store.transaction(write=False) as db:
        agreement, bundle = _load(db, store, agreement_id)
        chain = _checked(db, store, agreement)
        ledger = _ledger(db, agreement_id)
        approvals = _approvals(db, agreement_id)
        calls = effect_claims(db, bundle, agreement_id, chain.records, has_effect_tables(db))
    claim = _claim(bundle, agreement, chain.records, ledger)
    claim["effects"] = [{k: c[k] for k in ("instance", "effect", "event_seq", "transition", "phase", "amount",
                                           "amount_text", "claim")} for c in calls]  # fmt: skip
    doc = {
        "format": FORMAT,
        "agreement": agreement.id,
        "pact": {"id": agreement.pact_id, "version": str(bundle.stored.pact_version)},
        "claim": claim,
        "supports": {
            "manifest_hash": agreement.manifest_hash,
            "activation_id": agreement.activation_id,
            "event_ids": [e["event_id"] for e in claim["events"]],
            "evidence_chain": chain.to_json(),
            "ledger": ledger,
            "approvals": approvals,
            "effects": [{"instance": c["instance"], **c["supports"]} for c in calls],
        },
        "does_not_prove": _limits(bundle, agreement, chain, ledger) + effect_limits(calls),
    }
    return EvidenceReport(doc, chain)


def _ledger_line(entry: Mapping[str, Any]) -> str:
    status = str(entry["status"])
    if status == "delivered":
        verdict = (
            "the postings the ledger returned at delivery equal the expected ones"
            if entry["matches"]
            else "postings DIFFER"
        )
        return f"  ledger {entry['reference']}: delivered, {verdict}"
    if status == "quarantined":
        return f"  ledger {entry['reference']}: QUARANTINED ({entry['last_error']})"
    return f"  ledger {entry['reference']}: pending delivery (the ledger has not confirmed it yet)"


def render_text(doc: Mapping[str, Any]) -> str:
    """The evidence document for people: claim, supported by, does not prove."""
    claim, sup = doc["claim"], doc["supports"]
    chain = sup["evidence_chain"]
    params = ", ".join(f"{n}={p['text']}" for n, p in claim["params"].items())
    parties = ", ".join(f"{r}={p}" for r, p in claim["parties"].items())
    out = [f"evidence for agreement {doc['agreement']} ({doc['pact']['id']} {doc['pact']['version']})", "claim:"]
    out.append(f"  opened at {claim['opened_at_utc']} with {params}; parties {parties}")
    for event in claim["events"]:
        out.append(f"  {event['event_id']} {event['transition']} by {event['actor']} at {event['committed_at_utc']}:"
                   f" {event['from']} -> {event['to']}")  # fmt: skip
        out += [
            f"      {p['source']} ({p['source_address']}) -> {p['destination']} ({p['destination_address']})  "
            f"{p['amount_text']}  ref {p['reference']}"
            for p in event["postings"]
        ]
    final = " (final)" if claim["final"] else ""
    balances = ", ".join(f"{n} {b['text']}" for n, b in claim["balances"].items())
    out += [f"  {c['instance']}: {c['claim']}" for c in claim.get("effects", [])]
    out.append(f"  now {claim['state']}{final} at version {claim['version']}; balances in this agreement: {balances}")
    out.append("supported by:")
    out.append(f"  bundle manifest {sup['manifest_hash']} (activation {sup['activation_id']}), recorded at open")
    out.append(f"  events {', '.join(sup['event_ids']) or '(none yet)'} in the store's event log")
    verdict = "verifies" if chain["verifies"] else f"DOES NOT VERIFY ({len(chain['problems'])} problems)"
    out.append(f"  evidence chain: {chain['records']} records, head {chain['head']}, {verdict}")
    out += [f"    error[{p['code']}]: {p['message']}" for p in chain["problems"]]
    out += [_ledger_line(entry) for entry in sup["ledger"]]
    out += [f"  approval {a['id']} by {a['approver']}, consumed by {a['consumed_by']}" for a in sup["approvals"]]
    for call in sup.get("effects", []):
        bound = call["approval"]
        if bound is not None:
            out.append(f"  {call['instance']}: approval by {bound['approver']} ({bound['role']}) bound to preview "
                       f"{bound['preview_digest']}; proof digest {bound['proof_digest']}")  # fmt: skip
        basis = "the preview's" if call["preview_payload_digest"] else "the committed payload"
        same = f"equal to {basis}" if call["payload_matches"] else f"NOT equal to {basis}"
        sent = len(call["dispatched_payload_digests"])
        out.append(f"  {call['instance']}: payload {call['payload_digest']} sent {sent}x, {same}; key "
                   f"{call['idempotency_key']}" + (f"; provider ref {call['provider_ref']}" if call["provider_ref"]
                                                   else ""))  # fmt: skip
    out.append("does not prove:")
    out += [f"  - {item}" for item in doc["does_not_prove"]]
    return "\n".join(out) + "\n"
