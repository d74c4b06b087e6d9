"""What a token may see: reads are scoped to the agreements the token's party is a party to.

An agreement, its events, evidence, approval requests, effect calls and
review page are shown to a party the agreement binds (under any role) and
to a holder of `operator` (`tokens.may_read`). An approval request that
needs `approvals N by ROLE` is also shown to every holder of ROLE in the
party registry, who may grant it without being bound. Lists leave out what
the caller may not see; a single item it may not see is refused exactly as
an unknown one (PW501, PW601: 404, the same document), so a token cannot
even learn that it exists.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pactwright.errors import EffectError
from pactwright.runtime.store import Store
from pactwright.runtime.tokens import Principal, readable

__all__ = ["require_approval_visible", "unknown_approval", "visible_approvals", "visible_effects"]


def unknown_approval(request_id: str) -> EffectError:
    """The runtime's refusal of an unknown approval request (`approvals.get_request`), word for word."""
    return EffectError(f"there is no approval request `{request_id[:80]}` in the store", code="PW601",
                       field="approval", hint="list them with `pactwright approvals list --store URL`")  # fmt: skip


def _registry_approver(principal: Principal, preview: Any) -> bool:
    approval = preview.get("approval") if isinstance(preview, dict) else None
    return isinstance(approval, dict) and approval.get("registry") is True and approval.get("role") in principal.roles


def visible_approvals(store: Store, principal: Principal, found: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests (as `to_json` gives them) among `found` the principal may see, in their order."""
    agreements = readable(store, principal, (str(r["agreement"]) for r in found))
    return [r for r in found if r["agreement"] in agreements or _registry_approver(principal, r.get("preview"))]


def require_approval_visible(store: Store, principal: Principal, request_id: str) -> None:
    """Refuse a request the principal may not see as an unknown one (PW601), before anything else is read."""
    with store.transaction(write=False) as db:
        found = (
            db.query("SELECT agreement_id, preview FROM approval_requests WHERE id = ?", (request_id,))
            if "\x00" not in request_id and db.has_table("approval_requests")
            else []
        )
    if not found:
        return  # unknown: the runtime answers it (PW601) itself
    agreement_id, preview_text = str(found[0][0]), found[0][1]
    if agreement_id in readable(store, principal, (agreement_id,)):
        return
    try:
        preview = json.loads(preview_text if isinstance(preview_text, str) else bytes(preview_text).decode("utf-8"))
    except (ValueError, TypeError):
        preview = None
    if not _registry_approver(principal, preview):
        raise unknown_approval(request_id)


def visible_effects(store: Store, principal: Principal, found: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The effect calls (as `to_json` gives them) among `found` whose agreement the principal may read."""
    agreements = readable(store, principal, (str(r["agreement"]) for r in found))
    return [r for r in found if r["agreement"] in agreements]
