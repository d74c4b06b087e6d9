"""Approval requests as the store holds them: one row, its parsed command and preview, and whether they agree.

A request row is read back strictly: its preview must hash to its preview
digest, its command to its command digest, and the row's own columns
(agreement, transition, requester, times) must equal what the preview says.
A row that does not is returned with `problem` set and is never decided
(PW609), so an edited row can neither be shown as genuine nor granted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from pactwright.canonical import hash_bytes
from pactwright.errors import EffectError, PactwrightError
from pactwright.runtime import _agreement as rows
from pactwright.runtime._approval_preview import PREVIEW_FORMAT

__all__ = ["COLUMNS", "ApprovalRequest", "decision_statement", "from_row", "intact", "refuse"]

COLUMNS = (
    "id, agreement_id, transition, requester_role, requester_party, idempotency_key, command, command_digest, "
    "expect_version, preview, preview_digest, status, expires_at, created_at, decided_at, decided_by, "
    "proof_digest, event_id, grants"
)


@dataclass(frozen=True)
class ApprovalRequest:
    """One parked command: what it would do (`preview`), its digest, and its decision once made."""

    id: str
    agreement_id: str
    transition: str
    requester_role: str
    requester_party: str
    idempotency_key: str
    command: dict[str, Any]
    command_digest: str
    expect_version: int
    preview: dict[str, Any]
    preview_digest: str
    status: str
    expires_at: int
    created_at: int
    decided_at: int | None = None
    decided_by: str | None = None
    proof_digest: str | None = None
    event_id: str | None = None
    # Four eyes (new in 1.1): the grants so far of a request that needs several, in order: each
    # {"role", "party", "proof_digest", "granted_at"} (never the proof itself).
    grants: tuple[dict[str, Any], ...] = ()
    recorded: bool = True  # False for the request a dry run would park
    problem: str | None = None  # why the stored row does not agree with itself (never granted then)

    def statement(self, decision: str) -> dict[str, str]:
        """What the approver's key signs for `decision` on this request."""
        return decision_statement(self.id, self.preview_digest, decision)

    def state_at(self, now: int) -> str:
        """`status`, or `expired` for a pending request past its expiry at `now`."""
        return "expired" if self.status == "pending" and now > self.expires_at else self.status

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "agreement": self.agreement_id,
            "transition": self.transition,
            "requested_by": {"role": self.requester_role, "party": self.requester_party},
            "idempotency_key": self.idempotency_key,
            "command_digest": self.command_digest,
            "expect_version": self.expect_version,
            "preview": self.preview,
            "preview_digest": self.preview_digest,
            "status": self.status,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
            "decided_at": self.decided_at,
            "decided_by": self.decided_by,
            "proof_digest": self.proof_digest,
            "event_id": self.event_id,
            "grants": [dict(g) for g in self.grants],
            "recorded": self.recorded,
            "intact": self.problem is None,
        }


def decision_statement(request_id: str, digest: str, decision: str) -> dict[str, str]:
    """The canonical statement an approver signs: this request, this preview digest, this decision."""
    return {"approval": request_id, "preview_digest": digest, "decision": decision}


def refuse(code: str, message: str, **where: str | None) -> EffectError:
    return EffectError(message, code=code, **where)


def _text(value: object) -> str:
    return bytes(value).decode("utf-8", "replace") if isinstance(value, bytes | memoryview) else str(value)


def _problem(request: ApprovalRequest, command_text: str, preview_text: str) -> str | None:
    """Why a stored request disagrees with itself, or None: the row, its preview and its command agree."""
    if hash_bytes(preview_text.encode("utf-8")) != request.preview_digest:
        return "its preview does not hash to its preview digest"
    if hash_bytes(command_text.encode("utf-8")) != request.command_digest:
        return "its command does not hash to its command digest"
    p, c = request.preview, request.command
    actor = {"role": request.requester_role, "party": request.requester_party}
    checks = {
        "format": p.get("format") == PREVIEW_FORMAT,
        "agreement": p.get("agreement") == request.agreement_id,
        "transition": p.get("operation", {}).get("transition") == request.transition == c.get("transition"),
        "requested_by": p.get("requested_by") == actor == c.get("actor"),
        "command_digest": p.get("command_digest") == request.command_digest,
        "requested_at": p.get("requested_at") == request.created_at,
        "expires_at": p.get("expires_at") == request.expires_at,
        "params": isinstance(c.get("params"), dict),
    }
    wrong = [name for name, ok in checks.items() if not ok]
    return f"its row and its preview disagree on {', '.join(wrong)}" if wrong else None


def from_row(row: Sequence[Any]) -> ApprovalRequest:
    try:
        (rid, aid, transition, role, party, key, command, cdigest, version, preview, pdigest, status, expires,
         created, decided_at, decided_by, proof_digest, event_id, grants) = row  # fmt: skip
        command_text, preview_text = _text(command), _text(preview)
        request = ApprovalRequest(
            id=str(rid), agreement_id=str(aid), transition=str(transition), requester_role=str(role),
            requester_party=str(party), idempotency_key=str(key), command={}, command_digest=str(cdigest),
            expect_version=int(version), preview={}, preview_digest=str(pdigest), status=str(status),
            expires_at=int(expires), created_at=int(created),
            decided_at=None if decided_at is None else int(decided_at),
            decided_by=None if decided_by is None else str(decided_by),
            proof_digest=None if proof_digest is None else str(proof_digest),
            event_id=None if event_id is None else str(event_id),
        )  # fmt: skip
    except (TypeError, ValueError):
        raise refuse("PW609", f"the stored approval request `{row[0]}` is malformed") from None
    try:
        parsed_command, parsed_preview = rows.loads(command_text, "command"), rows.loads(preview_text, "preview")
    except PactwrightError:
        return replace(request, problem="its command or preview is not canonical JSON")
    if not isinstance(parsed_command, dict) or not isinstance(parsed_preview, dict):
        return replace(request, problem="its command or preview is not a JSON object")
    request = replace(request, command=parsed_command, preview=parsed_preview)
    if grants is not None:
        try:
            parsed_grants = rows.loads(_text(grants), "grants")
        except PactwrightError:
            return replace(request, problem="its grants are not canonical JSON")
        if not isinstance(parsed_grants, list) or not all(_grant_shape(g) for g in parsed_grants):
            return replace(request, problem="its grants are not a list of grants")
        request = replace(request, grants=tuple(parsed_grants))
    return replace(request, problem=_problem(request, command_text, preview_text))


def _grant_shape(grant: object) -> bool:
    return (isinstance(grant, dict) and set(grant) == {"role", "party", "proof_digest", "granted_at"}
            and all(isinstance(grant[k], str) for k in ("role", "party", "proof_digest"))
            and isinstance(grant["granted_at"], int))  # fmt: skip


def intact(request: ApprovalRequest) -> ApprovalRequest:
    if request.problem is not None:
        raise refuse(
            "PW609",
            f"approval request `{request.id}` was altered in the store: {request.problem}",
            field="approval",
            hint="nobody may decide it; submit the command again with a new key",
        )
    return request
