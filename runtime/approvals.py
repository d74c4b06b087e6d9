"""Approvals with previews: a command that needs `approval by ROLE` is parked, shown, then granted once.

`submit` on such a transition, with no usable approval, parks the command
(`park`): one `approval_requests` row per (agreement, idempotency key),
holding the command, the preview an approver reads (runtime/_approval_preview.py)
and its digest, and an expiry (`APPROVAL_TTL_S` after the request, trusted
clock). Nothing else is written: no event, no effect row.

`grant` is the approver's decision, in one store transaction: the
agreement's row is locked first, so two grants of one request serialize and
exactly one consumes it. It then refuses, each with its own code and changing
nothing: an unknown request (PW601), a request whose stored row no longer
agrees with itself (PW609), one already decided (PW604, a replay), an
expired one (PW602), an approver who does not hold the role in this
agreement (PW605), the requester when the policy says `not requester`
(PW607), an approver with no key registered for the role in the party
registry (PW606), and a proof that is not the registered key's ed25519
signature over `{"approval": ID, "preview_digest": DIGEST, "decision":
"grant"}` (PW608; PW615 when it is the key the registry lists for another
party). Then the parked command runs through the whole command
path with the grant; the command path recomputes the preview and refuses
(PW603) when it differs from the one signed. The request is marked consumed
by the event in the same transaction. Only the proof's digest is kept, in
the row and in the evidence record; never the proof.

`reject` records a refusal the same way (`"decision": "reject"`); a
rejected request is never granted, and its idempotency key never parks again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.errors import EffectError
from pactwright.money import format_money
from pactwright.runtime import _agreement as rows
from pactwright.runtime._agreement import Agreement, Bundle
from pactwright.runtime._approval_preview import (
    PREVIEW_FORMAT,
    approval_slots,
    make_preview,
    preview_digest,
    request_of,
)
from pactwright.runtime._approval_rows import COLUMNS, ApprovalRequest, decision_statement, from_row, intact, refuse
from pactwright.runtime.clock import Clock, SystemClock, epoch_seconds
from pactwright.runtime.commands import Command, Grant, SubmitResult, run_in
from pactwright.runtime.effect_payload import PlannedCall, planned_calls
from pactwright.runtime.parties import key_for
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import EFFECT_TABLES
from pactwright.signing import decode_b64, public_key_from_raw, verify_statement, weak_public_key

__all__ = [
    "APPROVAL_TTL_S",
    "PREVIEW_FORMAT",
    "ApprovalRequest",
    "decision_statement",
    "dry_run",
    "get_request",
    "grant",
    "list_requests",
    "make_preview",
    "park",
    "preview_digest",
    "reject",
]

APPROVAL_TTL_S = 3600  # how long a parked command may wait for its approver (seconds, trusted clock)
MAX_PROOF = 200  # base64 of a 64-byte signature is 88 characters
DECISIONS = ("grant", "reject")


def _request_id(agreement_id: str, key: str, created_at: int) -> str:
    basis = {"agreement": agreement_id, "key": key, "created_at": created_at}
    return "apr-" + hashlib.sha256(canonical_bytes(basis)).hexdigest()[:16]


def park(
    db: Backend,
    bundle: Bundle,
    agreement: Agreement,
    spec: Mapping[str, Any],
    payload: dict[str, Any],
    digest: str,
    key: str,
    planned: tuple[PlannedCall, ...],
    postings: list[dict[str, str]],
    now: int,
    *,
    write: bool = True,
    ttl: int = APPROVAL_TTL_S,
) -> ApprovalRequest:
    """Park the command `payload` (digest `digest`, idempotency key `key`) until an approver decides.

    Called by the command path under the agreement's row lock, after every
    other check passed. Idempotent per (agreement, key): the pending request
    of the same command is returned as it is (same id, same expiry); another
    command under that key is PW610; a key whose request was rejected is
    PW604. A pending request of the same command that expired undecided is
    renewed in its row (`_renew`): a new id, expiry and preview, and no
    grants, so no proof of the expired one approves it. With `write=False`
    (a dry run) nothing is written and the request comes back with
    `recorded=False`. Writes the request row and an `approval_requested`
    evidence record holding the preview digest.
    """
    found = db.query(f"SELECT {COLUMNS} FROM approval_requests WHERE agreement_id = ? AND idempotency_key = ?",  # noqa: S608
                     (agreement.id, key))  # fmt: skip
    if found:
        request = intact(from_row(found[0]))
        if request.command_digest != digest:
            raise refuse("PW610", f"idempotency key `{key}` is parked for another command (approval request "
                          f"`{request.id}`)", field="key", expected=request.command_digest, found=digest)  # fmt: skip
        if request.status != "pending":
            raise refuse("PW604", f"the approval request `{request.id}` for key `{key}` was already {request.status}",
                          field="key", hint="submit the command again with a new key")  # fmt: skip
        if now <= request.expires_at:
            return request
        expired: ApprovalRequest | None = request
    else:
        expired = None
    expires = now + ttl
    preview = make_preview(bundle, agreement, spec, payload, planned, postings, now, expires)
    command_text = canonical_bytes(payload).decode("utf-8")
    preview_text = canonical_bytes(preview).decode("utf-8")
    actor = payload["actor"]
    request = ApprovalRequest(
        id=_request_id(agreement.id, key, now), agreement_id=agreement.id, transition=str(spec["id"]),
        requester_role=str(actor["role"]), requester_party=str(actor["party"]), idempotency_key=key,
        command=dict(payload), command_digest=digest, expect_version=agreement.version, preview=preview,
        preview_digest=preview_digest(preview), status="pending", expires_at=expires, created_at=now,
        recorded=write,
    )  # fmt: skip
    if not write:
        return request
    if expired is not None:
        _renew(db, expired, request, preview_text)
    else:
        db.execute(
            f"INSERT INTO approval_requests ({COLUMNS}) VALUES ({', '.join('?' * 19)})",  # noqa: S608
            (request.id, agreement.id, request.transition, request.requester_role, request.requester_party, key,
             command_text, digest, request.expect_version, preview_text, request.preview_digest, "pending", expires,
             now, None, None, None, None, None),
        )  # fmt: skip
    rows.append_evidence(db, agreement.id, "approval_requested", {
        "approval": request.id, "transition": request.transition, "requested_by": dict(actor),
        "command_digest": digest, "preview_digest": request.preview_digest, "requested_at": now,
        "expires_at": expires, "approver_role": preview["approval"]["role"],
        **({"renews": expired.id} if expired is not None else {}),
    })  # fmt: skip
    return request


def _renew(db: Backend, expired: ApprovalRequest, fresh: ApprovalRequest, preview_text: str) -> None:
    """Put `fresh` in the row of `expired`: the same command and key, parked again after its request expired.

    The row is one per (agreement, key) (`UNIQUE (agreement_id,
    idempotency_key)`), so the expired request is replaced, never kept
    beside its successor: its id is then unknown (PW601), and a proof signed
    for it names that id and the old preview digest (whose expiry is in the
    preview), so it verifies against nothing. Grants given to the expired
    request (four eyes) are dropped with it; each approver signs the new preview.
    Only an undecided request is renewed (`status = 'pending'`).
    """
    db.execute(
        "UPDATE approval_requests SET id = ?, expect_version = ?, preview = ?, preview_digest = ?, expires_at = ?, "
        "created_at = ?, grants = NULL WHERE id = ? AND status = 'pending'",
        (fresh.id, fresh.expect_version, preview_text, fresh.preview_digest, fresh.expires_at, fresh.created_at,
         expired.id),
    )  # fmt: skip


def list_requests(store: Store, *, status: str | None = None, agreement_id: str | None = None) -> list[ApprovalRequest]:
    """Every approval request (or those of one status or agreement), oldest first; altered ones flagged."""
    if store.schema_version() < EFFECT_TABLES:
        return []
    where, params = ["1 = 1"], []
    if status is not None:
        where.append("status = ?")
        params.append(status)
    if agreement_id is not None:
        where.append("agreement_id = ?")
        params.append(agreement_id)
    with store.transaction(write=False) as db:
        found = db.query(f"SELECT {COLUMNS} FROM approval_requests WHERE {' AND '.join(where)} "  # noqa: S608
                         "ORDER BY created_at, id", params)  # fmt: skip
    return [from_row(row) for row in found]


def _unknown(request_id: str) -> EffectError:
    return refuse("PW601", f"there is no approval request `{request_id[:80]}` in the store", field="approval",
                   hint="list them with `pactwright approvals list --store URL`")  # fmt: skip


def _read(db: Backend, request_id: str) -> ApprovalRequest:
    found = db.query(f"SELECT {COLUMNS} FROM approval_requests WHERE id = ?", (request_id,))  # noqa: S608
    if not found:
        raise _unknown(request_id)
    return from_row(found[0])


def get_request(store: Store, request_id: str) -> ApprovalRequest:
    """One request as stored (PW601 unknown, PW609 altered: a person is never shown an altered preview)."""
    if store.schema_version() < EFFECT_TABLES or "\x00" in request_id:
        raise _unknown(request_id)
    with store.transaction(write=False) as db:
        return intact(_read(db, request_id))


def _locked(store: Store, db: Backend, request_id: str) -> tuple[Agreement, Bundle, ApprovalRequest]:
    """Lock the request's agreement row, THEN read the request: concurrent decisions serialize on the lock."""
    if "\x00" in request_id or not db.has_table("approval_requests"):
        raise _unknown(request_id)
    # The agreement a request belongs to never changes; everything else is read after the lock.
    owner = db.query("SELECT agreement_id FROM approval_requests WHERE id = ?", (request_id,))
    if not owner:
        raise _unknown(request_id)
    agreement = rows.read(db, str(owner[0][0]), lock=True)
    request = intact(_read(db, request_id))
    bundle = rows.load_bundle(store, db, agreement, rows.EXECUTED)
    return agreement, bundle, request


def _check_decision(db: Backend, agreement: Agreement, bundle: Bundle, request: ApprovalRequest, party: str,
                    proof_b64: str, decision: str, now: int) -> tuple[str, str]:  # fmt: skip
    """Every refusal a decision can meet, in order; returns (approver role, proof digest)."""
    if request.status != "pending":
        raise refuse("PW604", f"approval request `{request.id}` was already {request.status}"
                      + (f" by `{request.decided_by}`" if request.decided_by else ""), field="approval",
                      found=request.status)  # fmt: skip
    if decision == "grant" and now > request.expires_at:
        raise refuse("PW602", f"approval request `{request.id}` expired at {request.expires_at}; it is now {now}",
                      field="approval", expected=f"at most {request.expires_at}", found=str(now),
                      hint="submit the command again with a new key for a fresh preview")  # fmt: skip
    spec = bundle.transition(request.transition) or {}
    need = spec.get("approval") or {}
    role = str(need.get("role", ""))
    if len(approval_slots(need)) > 1:
        role = _four_eyes_role(agreement, request, need, party)
    elif not role or agreement.parties.get(role) != party:
        raise refuse("PW605", f"party `{party}` does not hold `{role or 'an approver role'}` in agreement "
                      f"`{agreement.id}`", field="approver", expected=role or None, found=party)  # fmt: skip
    if need.get("not_requester") and party == request.requester_party:
        raise refuse("PW607", f"`{request.transition}` needs an approver other than the requester `{party}`",
                      field="approver", found=party)  # fmt: skip
    raw = key_for(db, party, role)
    if raw is None:
        hint = f"register it: `pactwright parties add {party} --role {role} --public-key FILE.pub`"
        raise refuse("PW606", f"party `{party}` has no key registered for `{role}` in the party registry",
                      field="approver", hint=hint)  # fmt: skip
    signature = decode_b64(proof_b64) if len(proof_b64) <= MAX_PROOF else None
    statement = request.statement(decision)
    if signature is None or not verify_statement(public_key_from_raw(raw), statement, proof_b64):
        owner = _other_signer(db, party, statement, proof_b64) if signature is not None else None
        if owner is not None:
            raise refuse("PW615", f"the proof is signed with the key the party registry lists for `{owner}`, "
                          f"not `{party}`'s key for `{role}`", field="proof", expected=party, found=owner,
                          hint=f"decide as `{owner}`, or with `{party}`'s own key")  # fmt: skip
        raise refuse("PW608", f"the proof is not `{party}`'s signature ({role}) of the {decision} of "
                      f"`{request.id}` for preview {request.preview_digest}", field="proof")  # fmt: skip
    return role, hash_bytes(signature)


def _other_signer(db: Backend, party: str, statement: Mapping[str, Any], proof_b64: str) -> str | None:
    """The other registered party whose key made this proof, if any: so the refusal names the mismatch (PW615).

    Only reached for a proof that `party`'s own key does not verify; the
    decision is refused either way, this only says why.
    """
    found = db.query("SELECT DISTINCT party, public_key FROM parties WHERE party <> ? AND public_key IS NOT NULL "
                     "ORDER BY party", (party,))  # fmt: skip
    for owner, encoded in found:
        raw = decode_b64(str(encoded))
        if raw is not None and not weak_public_key(raw) and verify_statement(public_key_from_raw(raw), dict(statement),
                                                                              proof_b64):  # fmt: skip
            return str(owner)
    return None


def _four_eyes_role(agreement: Agreement, request: ApprovalRequest, need: Mapping[str, Any], party: str) -> str:
    """The role `party` grants in, for a transition that needs several approvals (new in 1.1).

    Each approval comes from a different party (PW614 for a second grant by one party). Under
    `approval by A, B distinct` the approver for A is the party the agreement binds to A, and a
    party may fill only a slot still open.
    Under `approvals N by R distinct` an approver is any party holding R in the store's party
    registry with a key for it (checked after this, PW606), not only the agreement's party for R.
    (A party the agreement binds to a role whose approval was given is the party that gave it: PW614.)
    """
    if any(g["party"] == party for g in request.grants):
        raise refuse("PW614", f"party `{party}` already granted approval request `{request.id}`", field="approver",
                      found=party, hint="another eligible party grants it")  # fmt: skip
    remaining = list(approval_slots(need))
    for given in request.grants:
        if given["role"] in remaining:
            remaining.remove(given["role"])
    if need.get("count") is not None:
        return remaining[0] if remaining else str(need["role"])
    roles = [r for r in remaining if agreement.parties.get(r) == party]
    if roles:
        return roles[0]
    wanted = ", ".join(remaining)
    raise refuse("PW605", f"party `{party}` does not hold `{wanted}` in agreement `{agreement.id}`",
                  field="approver", expected=wanted, found=party)  # fmt: skip


def _given(bundle: Bundle, params: Mapping[str, Any]) -> dict[str, str]:
    """The stored command's params as a caller states them (money as decimal text), so they re-encode equal."""
    kinds = {str(p["name"]): str(p["type"]) for p in bundle.doc["params"]}
    return {str(name): format_money(int(str(value)), bundle.scale) if kinds.get(str(name)) == "money"
            else str(value) for name, value in params.items()}  # fmt: skip


def _decide(db: Backend, request: ApprovalRequest, status: str, party: str, proof_digest: str, at: int,
            event_id: str | None) -> None:  # fmt: skip
    db.execute(
        "UPDATE approval_requests SET status = ?, decided_at = ?, decided_by = ?, proof_digest = ?, event_id = ? "
        "WHERE id = ? AND status = 'pending'",
        (status, at, party, proof_digest, event_id, request.id),
    )


def _evidence(db: Backend, request: ApprovalRequest, kind: str, role: str, party: str, proof_digest: str, at: int,
              event_id: str | None) -> None:  # fmt: skip
    body = {"approval": request.id, "transition": request.transition, "approver": {"role": role, "party": party},
            "preview_digest": request.preview_digest, "proof_digest": proof_digest, "decided_at": at}  # fmt: skip
    if event_id is not None:
        body["event_id"] = event_id
    rows.append_evidence(db, request.agreement_id, kind, body)


def grant(store: Store, request_id: str, approver_party: str, proof_b64: str,
          clock: Clock | None = None) -> SubmitResult:  # fmt: skip
    """Grant a parked command and commit it: returns the command's `SubmitResult`.

    One transaction; any refusal (PW601-PW609, or the command path's own,
    such as PW509 when the agreement moved on since the preview) changes
    nothing.
    """
    now = epoch_seconds(clock or SystemClock())
    with store.transaction(exclusive=False) as db:
        agreement, bundle, request = _locked(store, db, request_id)
        now = max(now, agreement.updated_at)
        role, proof_digest = _check_decision(db, agreement, bundle, request, approver_party, proof_b64, "grant", now)
        command = Command(request.transition, request.requester_role, request.requester_party,
                                   request.idempotency_key, _given(bundle, request.command["params"]),
                                   request.expect_version)  # fmt: skip
        need = (bundle.transition(request.transition) or {}).get("approval") or {}
        slots = approval_slots(need)
        if len(request.grants) + 1 < len(slots):
            return _grant_partly(store, db, agreement, request, command, role, approver_party, proof_digest, now)
        approvers = tuple((str(g["role"]), str(g["party"])) for g in request.grants) if len(slots) > 1 else ()
        allowed = Grant(request.id, role, approver_party, request.preview_digest, request.expires_at,
                        request.created_at, (*approvers, (role, approver_party)) if approvers else ())  # fmt: skip
        result = run_in(store, db, agreement.id, command, now, grant=allowed)
        if result.replayed or result.status != "committed":
            raise refuse("PW604", f"the command of approval request `{request.id}` was already committed as "
                          f"`{result.event_id}`", field="approval")  # fmt: skip
        _decide(db, request, "consumed", approver_party, proof_digest, result.committed_at, result.event_id)
        _evidence(db, request, "approval_granted", role, approver_party, proof_digest, result.committed_at,
                  result.event_id)  # fmt: skip
    return result


def _grant_partly(store: Store, db: Backend, agreement: Agreement, request: ApprovalRequest, command: Command,
                  role: str, party: str, proof_digest: str, now: int) -> SubmitResult:  # fmt: skip
    """Record one grant of several (four eyes, new in 1.1): the request stays pending with the grants so far.

    The command path runs again first, unchanged (it must still be allowed; it finds the pending
    request and changes nothing), then the grant's digest is recorded with an evidence record.
    """
    result = run_in(store, db, agreement.id, command, now)
    if result.status != "waiting_for_approval":
        raise refuse("PW604", f"the command of approval request `{request.id}` was already committed as "
                      f"`{result.event_id}`", field="approval")  # fmt: skip
    grants = [*request.grants, {"role": role, "party": party, "proof_digest": proof_digest, "granted_at": now}]
    db.execute("UPDATE approval_requests SET grants = ? WHERE id = ? AND status = 'pending'",
               (rows.dumps(grants), request.id))  # fmt: skip
    _evidence(db, request, "approval_granted", role, party, proof_digest, now, None)
    updated = replace(request, grants=tuple(grants))
    return replace(result, approval=updated.to_json())


def reject(store: Store, request_id: str, approver_party: str, proof_b64: str,
           clock: Clock | None = None) -> ApprovalRequest:  # fmt: skip
    """Reject a parked command: it never runs, and its key never parks again. Returns the decided request.

    The same refusals as `grant` except expiry (closing a stale request is
    allowed); the proof signs `"decision": "reject"`.
    """
    now = epoch_seconds(clock or SystemClock())
    with store.transaction(exclusive=False) as db:
        agreement, bundle, request = _locked(store, db, request_id)
        now = max(now, agreement.updated_at)
        role, proof_digest = _check_decision(db, agreement, bundle, request, approver_party, proof_b64, "reject", now)
        _decide(db, request, "rejected", approver_party, proof_digest, now, None)
        _evidence(db, request, "approval_rejected", role, approver_party, proof_digest, now, None)
    return replace(request, status="rejected", decided_at=now, decided_by=approver_party, proof_digest=proof_digest)


def dry_run(store: Store, agreement_id: str, command: Command,
            clock: Clock | None = None) -> tuple[SubmitResult, list[dict[str, Any]]]:  # fmt: skip
    """`submit --dry-run` with the requests its effect calls would send; nothing is sent or written.

    Returns the command path's dry-run `SubmitResult` (parked or not) and,
    for each call, the request (`request_of`): declared method and URL,
    idempotency key, payload digest and the exact body, computed by the same
    `planned_calls` the commit uses, at the same instant and sequence number.
    """
    now = epoch_seconds(clock or SystemClock())
    with store.transaction(exclusive=False) as db:
        result = run_in(store, db, agreement_id, command, now, dry_run=True)
        if result.replayed or not result.effects:
            return result, []
        agreement = rows.read(db, agreement_id, lock=False)
        bundle = rows.load_bundle(store, db, agreement, rows.EXECUTED)
        spec = bundle.transition(command.transition) or {}
        planned = planned_calls(bundle, agreement, spec, result.committed_at, agreement.version + 1)
    return result, [request_of(call) for call in planned]
