"""What an approver is shown before a parked command runs: its preview, and the digest a grant binds to.

The preview is a deterministic document computed from the committed
agreement, the bundle's transition and the command's own payload, with the
same `planned_calls` the commit uses: the payload digest shown for each call
is the digest of the exact body bytes the worker will later send. Nothing in
it is caller-supplied text: the consequence is the policy's `consequence`
template filled with the agreement's validated params (money as exact
decimal text at the currency's scale, with its code), and times are the
trusted clock's. Its canonical hash (`preview_digest`) is what the approver
signs; the command path recomputes the preview when the grant arrives and
refuses (PW603) when it differs, so what runs is what was seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.money import format_money
from pactwright.runtime._agreement import Agreement, Bundle
from pactwright.runtime.effect_payload import PlannedCall

__all__ = ["PREVIEW_FORMAT", "approval_slots", "make_preview", "preview_digest", "request_of"]

PREVIEW_FORMAT = "pactwright.approval-preview/1"


def _money(bundle: Bundle, minor: int) -> str:
    return f"{format_money(minor, bundle.scale)} {bundle.doc['currency']['code']}"


def request_of(call: PlannedCall) -> dict[str, Any]:
    """The HTTP request one call would make: declared method and URL, key, digest and the exact body."""
    return {
        "effect": call.effect,
        "index": call.index,
        "method": call.method,
        "url": call.url,
        "idempotency_key": call.idempotency_key,
        "payload_digest": call.payload_digest,
        "body": call.body.decode("utf-8"),
        "timeout_s": call.timeout_s,
    }


def make_preview(
    bundle: Bundle,
    agreement: Agreement,
    spec: Mapping[str, Any],
    payload: Mapping[str, Any],
    planned: Sequence[PlannedCall],
    postings: Sequence[Mapping[str, str]],
    requested_at: int,
    expires_at: int,
) -> dict[str, Any]:
    """The preview of the parked command `payload` (its stored form) of transition `spec`.

    Every field is a function of the arguments; `requested_at` and
    `expires_at` are the request's (trusted clock), never the time the
    preview is recomputed at, so the same command gives the same document.
    """
    code = str(bundle.doc["currency"]["code"])
    need = spec.get("approval") or {}
    touched = sorted({str(p["source"]) for p in postings} | {str(p["destination"]) for p in postings})
    calls = []
    for call in planned:
        shown = call.to_json(bundle.scale, code)
        shown["body"] = call.body.decode("utf-8")
        calls.append(shown)
    return {
        "format": PREVIEW_FORMAT,
        "agreement": agreement.id,
        "pact": agreement.pact_id,
        "manifest_hash": agreement.manifest_hash,
        "operation": {
            "transition": str(spec["id"]),
            "from": agreement.state,
            "to": str(spec["to"]),
            "effects": [call.effect for call in planned],
        },
        "target": {
            "accounts": {name: agreement.accounts[name] for name in touched},
            "destinations": [{"effect": call.effect, "destination": f"{call.method} {call.url}"} for call in planned],
        },
        "consequence": [call.consequence for call in planned if call.consequence is not None],
        "postings": [
            {
                "source": str(p["source"]),
                "source_address": str(p["source_address"]),
                "destination": str(p["destination"]),
                "destination_address": str(p["destination_address"]),
                "amount": _money(bundle, int(p["amount"])),
            }
            for p in postings
        ],
        "calls": calls,
        "approval": _approval(need),
        "command_digest": hash_bytes(canonical_bytes(dict(payload))),
        "requested_by": {"role": str(payload["actor"]["role"]), "party": str(payload["actor"]["party"])},
        "requested_at": requested_at,
        "expires_at": expires_at,
    }


def preview_digest(preview: Mapping[str, Any]) -> str:
    """The canonical hash of a preview: what a grant's signature binds to."""
    return hash_bytes(canonical_bytes(dict(preview)))


def _approval(need: Mapping[str, Any]) -> dict[str, Any]:
    """Who approves: the role, whether the requester is excluded; with four eyes (new in 1.1) also
    `approvers`, the role of each required approval, and `registry` for `approvals N by ROLE`."""
    out: dict[str, Any] = {"role": str(need.get("role")), "not_requester": bool(need.get("not_requester"))}
    slots = approval_slots(need)
    if len(slots) > 1:
        out["approvers"] = list(slots)
        out["registry"] = need.get("count") is not None
    return out


def approval_slots(need: Mapping[str, Any]) -> tuple[str, ...]:
    """The role of each approval a transition's `approval` requires (transitions.json form)."""
    role = str(need.get("role", ""))
    if need.get("count") is not None:
        return (role,) * int(need["count"])
    return (role, *(str(r) for r in need.get("also") or ()))
