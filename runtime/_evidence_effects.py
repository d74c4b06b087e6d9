"""Evidence claims for effect calls: what happened to each call, what supports it, what it cannot show.

For every call of the agreement (runtime/effect_worker.py), from the
effects table, the approval requests and the hash-chained evidence records
read in the same transaction as the rest of the evidence:

- the claim, in words: "a 64.90 EUR `refund_payment` was authorised by
  rita holding refund_approver and acknowledged by the provider (ref
  sim_1)", or that it may have occurred (abandoned), is parked, failed,
  was cancelled, or was undone by its compensation;
- what supports it: the consumed approval and the preview digest it was
  bound to, the payload digest the preview showed, the payload digest of
  every dispatch recorded (they must all be equal to it: `payload_matches`),
  the idempotency key, and the provider's reference;
- what it does not prove: that the money reached the customer, that the
  action was commercially right, that data a read returned was accurate,
  and, for a call whose outcome is unknown, that it did or did not happen.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pactwright.canonical import load_json
from pactwright.errors import PactwrightError
from pactwright.money import format_money
from pactwright.runtime._agreement import Bundle
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import EFFECT_TABLES

__all__ = ["effect_claims", "effect_limits"]

_SAID = {
    "acknowledged": "acknowledged by the provider",
    "reconciled_recovered": "found at the provider by reconciliation",
    "reconciled_not_occurred": "found not to have happened, and is to be sent again",
    "prepared": "committed and not yet sent",
    "dispatched": "sent, its answer not yet recorded",
    "uncertain": "sent with an outcome nobody knows",
    "needs_reconciliation": "parked: the provider could not say whether it happened",
    "abandoned_uncertain": "abandoned: it may or may not have occurred",
    "failed": "refused by the provider: it did not happen",
    "cancelled": "cancelled before it was sent",
    "compensation_required": "acknowledged, and to be undone by its compensation",
    "compensated": "acknowledged, then undone by its compensation",
}


def _records(records: list[dict[str, Any]], kind: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record.get("kind") == kind and isinstance(record.get("instance"), str):
            out.setdefault(str(record["instance"]), []).append(record)
    return out


def _approvals(db: Backend, agreement_id: str) -> dict[int, dict[str, Any]]:
    """event seq -> the approval request consumed by that event (with its preview)."""
    out: dict[int, dict[str, Any]] = {}
    for event_id, party, digest, preview, proof in db.query(
        "SELECT event_id, decided_by, preview_digest, preview, proof_digest FROM approval_requests "
        "WHERE agreement_id = ? AND status = 'consumed' AND event_id IS NOT NULL",
        (agreement_id,),
    ):
        try:
            shown = load_json(str(preview).encode("utf-8"))
        except PactwrightError:
            shown = {}
        seq = int(str(event_id).rsplit("/", 1)[-1])
        out[seq] = {"party": str(party), "preview_digest": str(digest), "preview": shown,
                    "proof_digest": None if proof is None else str(proof)}  # fmt: skip
    return out


def _direct(db: Backend, agreement_id: str) -> dict[int, dict[str, Any]]:
    """event seq -> an approval row consumed by it (approvals written without a preview)."""
    out: dict[int, dict[str, Any]] = {}
    for event_id, role, party in db.query(
        "SELECT consumed_event_id, approver_role, approver_party FROM approvals WHERE agreement_id = ? "
        "AND consumed_event_id IS NOT NULL",
        (agreement_id,),
    ):
        out[int(str(event_id).rsplit("/", 1)[-1])] = {"role": str(role), "party": str(party)}
    return out


def effect_claims(db: Backend, bundle: Bundle, agreement_id: str, records: list[dict[str, Any]],
                  has_tables: bool) -> list[dict[str, Any]]:  # fmt: skip
    """One claim per effect call, in commit order (empty for a store without effect tables)."""
    if not has_tables:
        return []
    code = str(bundle.doc["currency"]["code"])
    effects = {str(e["name"]): e for e in bundle.doc.get("effects", [])}
    roles = {str(t["id"]): (t.get("approval") or {}).get("role") for t in bundle.doc["transitions"]}
    transitions = {int(s): str(t) for s, t in db.query(
        "SELECT seq, transition FROM events WHERE agreement_id = ?", (agreement_id,))}  # fmt: skip
    previews, direct = _approvals(db, agreement_id), _direct(db, agreement_id)
    dispatched, quarantines = _records(records, "effect_dispatched"), _records(records, "effect_quarantined")
    out = []
    for row in db.query(
        "SELECT id, event_seq, call_index, effect, phase, amount, payload_digest, idempotency_key, provider_ref, "
        "compensates, quarantined, resolution, resolved_by, reason FROM effects WHERE agreement_id = ? "
        "ORDER BY event_seq, call_index, id",
        (agreement_id,),
    ):
        (instance, seq, index, effect, phase, amount, digest, key, ref, compensates, quarantined, resolution,
         by, reason) = row  # fmt: skip
        seq, phase = int(seq), str(phase)
        money = None if amount is None else f"{format_money(int(amount), bundle.scale)} {code}"
        transition = transitions.get(seq, "?")
        approval = previews.get(seq)
        role = roles.get(transition)
        shown_digest = None
        if approval is not None:
            shown = [c for c in approval["preview"].get("calls", []) if isinstance(c, Mapping)]
            match = next((c for c in shown if c.get("index") == int(index) and c.get("effect") == effect), None)
            shown_digest = None if match is None else match.get("payload_digest")
        sent = [str(r.get("payload_digest")) for r in dispatched.get(str(instance), [])]
        what = f"a {money} `{effect}` call" if money else f"a `{effect}` call"
        if compensates is not None:
            what += f" compensating `{compensates}`"
        if approval is not None:
            who = f"authorised by {approval['party']} holding {role}"
        elif seq in direct:
            who = f"authorised by {direct[seq]['party']} holding {direct[seq]['role']}"
        else:
            who = f"committed by `{transition}`"
        said = _SAID.get(phase, phase)
        if int(quarantined):
            last = (quarantines.get(str(instance)) or [{}])[-1]
            said = "QUARANTINED: the provider's answer contradicted the request"
            if last.get("sent") is False:
                said = (
                    "QUARANTINED: its row is not the call its event committed (PW644), so the worker refused "
                    "it; " + ("nothing was ever sent" if not sent else f"sent {len(sent)} time(s) before")
                )
        text = f"{what} was {who} and {said}"
        if ref:
            text += f" (provider ref {ref})"
        if resolution and by:
            text += f"; resolved `{resolution}` by operator {by}" + (f": {reason}" if reason else "")
        out.append({
            "instance": str(instance), "effect": str(effect), "event_seq": seq, "transition": transition,
            "phase": phase, "amount": None if amount is None else str(amount), "amount_text": money,
            "claim": text,
            "supports": {
                "approval": None if approval is None else {
                    "approver": approval["party"], "role": role, "preview_digest": approval["preview_digest"],
                    "proof_digest": approval["proof_digest"]},
                "preview_payload_digest": shown_digest,
                "payload_digest": str(digest),
                "dispatched_payload_digests": sent,
                "payload_matches": bool(sent) and all(d == str(digest) for d in sent)
                and (shown_digest is None or shown_digest == str(digest)),
                "idempotency_key": str(key),
                "provider_ref": None if ref is None else str(ref),
            },
            "reads_data": not bool(effects.get(str(effect), {}).get("money_moving"))
            and any(e.get("method") == "GET" for e in effects.get(str(effect), {}).get("egress", [])),
            "money_moving": bool(effects.get(str(effect), {}).get("money_moving")),
        })  # fmt: skip
    return out


def effect_limits(claims: list[dict[str, Any]]) -> list[str]:
    """What the effect claims cannot show."""
    out: list[str] = []
    for claim in claims:
        name, instance, phase = claim["effect"], claim["instance"], claim["phase"]
        if claim["money_moving"] and phase in ("acknowledged", "reconciled_recovered"):
            out.append(f"that the customer received the funds of `{instance}` ({claim['amount_text']}): the "
                       "provider's acknowledgement is all the runtime saw")  # fmt: skip
            out.append(f"that `{name}` ({instance}) was commercially right: the policy allowed it and an approver "
                       "authorised it; whether it should have happened is outside the runtime")  # fmt: skip
        if claim["reads_data"]:
            out.append(f"that the data `{name}` read ({instance}) was accurate")
        if phase in ("abandoned_uncertain", "needs_reconciliation", "uncertain", "dispatched"):
            out.append(f"whether `{instance}` happened: its outcome is unknown ({phase})")
    return out


def has_effect_tables(db: Backend) -> bool:
    rows = db.query("SELECT MAX(version) FROM schema_migrations")
    return bool(rows and rows[0][0] is not None and int(rows[0][0]) >= EFFECT_TABLES)
