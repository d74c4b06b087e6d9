"""What one `call EFFECT` sends: its exact body, digest, idempotency key and destination, fixed at commit.

The same function computes a call for an approval's preview and for the
commit, so the digest an approver saw is the digest of the bytes the worker
later sends (the worker sends the stored bytes; it never re-renders them).
The body holds the intent only: the agreement, the effect, the amount it
carries and the agreement's params in their normalized text form. No
instance id, attempt count or time enters it, so a retry sends the same
bytes.

The idempotency key is one per call instance, over the effect's protected
fields (`key order_id, amount`) too: every retry of a call sends the same
key, no other call ever sends it, and a change in a protected field is a
new key. Retry metadata (attempts, times) is never part of it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.money import format_money
from pactwright.runtime._agreement import Agreement, Bundle
from pactwright.runtime._evaluate import evaluate

__all__ = ["DEFAULT_TIMEOUT_S", "PlannedCall", "display_params", "idempotency_key", "planned_calls"]

DEFAULT_TIMEOUT_S = 10
_PLACEHOLDER_RE = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


@dataclass(frozen=True)
class PlannedCall:
    """One effect call as it will be sent, and what an approver is shown about it."""

    index: int
    effect: str
    strategy: str
    compensation: str | None
    method: str
    url: str
    idempotency_key: str
    body: bytes
    payload_digest: str
    amount: int | None
    timeout_s: int
    reversibility: str | None
    risk: str
    consequence: str | None
    money_moving: bool

    def to_json(self, scale: int, code: str) -> dict[str, Any]:
        return {
            "index": self.index,
            "effect": self.effect,
            "strategy": self.strategy,
            "destination": f"{self.method} {self.url}",
            "idempotency_key": self.idempotency_key,
            "payload_digest": self.payload_digest,
            "amount": None if self.amount is None else f"{format_money(self.amount, scale)} {code}",
            "reversibility": self.reversibility,
            "risk": self.risk,
            "consequence": self.consequence,
        }


def display_params(bundle: Bundle, params: Mapping[str, str]) -> dict[str, str]:
    """The params as a person reads them: money as exact decimal text at the currency's scale."""
    kinds = {str(p["name"]): str(p["type"]) for p in bundle.doc["params"]}
    return {
        name: format_money(int(value), bundle.scale) if kinds.get(name) == "money" else str(value)
        for name, value in sorted(params.items())
    }


def idempotency_key(pact_id: str, effect: Mapping[str, Any], shown: Mapping[str, str], instance: str) -> str:
    """`pw-` and 40 hex digits over the call instance and its protected fields.

    One key per call: every retry of the call sends it, and no other call
    ever does, so one acknowledged call is one write at the provider and the
    evidence of each agreement matches what the provider did (the verifier
    deduplicates per call instance too). The protected fields (`key order_id,
    amount`) are part of it, so a call whose protected fields differ can
    never be answered with another's write.
    """
    fields = {str(f): shown.get(str(f)) for f in effect.get("key", [])}
    basis = {"pact": pact_id, "effect": effect["name"], "instance": instance, "fields": fields}
    return "pw-" + hashlib.sha256(canonical_bytes(basis)).hexdigest()[:40]


def _render(template: str | None, shown: Mapping[str, str], money: set[str], code: str) -> str | None:
    """The policy's `consequence` with the normalized params: the policy's text and validated values only."""
    if template is None:
        return None

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in shown:
            return match.group(0)
        return f"{shown[name]} {code}" if name in money else shown[name]

    return _PLACEHOLDER_RE.sub(value, template)


def planned_calls(bundle: Bundle, agreement: Agreement, transition: Mapping[str, Any], now: int,
                  seq: int) -> tuple[PlannedCall, ...]:  # fmt: skip
    """Every call of `transition` as committing it at `now` (as event `seq`) would send it."""
    calls = transition.get("effects", [])
    if not calls:
        return ()
    effects = {str(e["name"]): e for e in bundle.doc.get("effects", [])}
    shown = display_params(bundle, agreement.params)
    money = {str(p["name"]) for p in bundle.doc["params"] if p["type"] == "money"}
    code = str(bundle.doc["currency"]["code"])
    view = agreement.view(bundle, now)
    out = []
    for index, call in enumerate(calls):
        effect = effects[str(call["effect"])]
        carried = None if call.get("amount") is None else evaluate(call["amount"], view)
        amount = carried if isinstance(carried, int) else None
        body_doc: dict[str, Any] = {"agreement": agreement.id, "effect": effect["name"], "params": shown,
                                    "currency": code}  # fmt: skip
        if amount is not None:
            body_doc["amount"] = str(amount)
        body = canonical_bytes(body_doc)
        # An effect that declares no egress may be sent nowhere: the adapter refuses it (PW620) unsent.
        egress = effect["egress"][0] if effect["egress"] else {"method": "", "url": ""}
        strategy = call.get("strategy") or effect.get("strategy") or {"kind": "once"}  # as the verifier reads it
        out.append(
            PlannedCall(
                index=index,
                effect=str(effect["name"]),
                strategy=str(strategy["kind"]),
                compensation=strategy.get("compensation"),
                method=str(egress["method"]),
                url=str(egress["url"]),
                idempotency_key=idempotency_key(agreement.pact_id, effect, shown, f"{agreement.id}/{seq}/e{index}"),
                body=body,
                payload_digest=hash_bytes(body),
                amount=amount,
                timeout_s=int(effect.get("timeout") or DEFAULT_TIMEOUT_S),
                reversibility=effect.get("reversibility"),
                risk=str(effect["risk"]),
                consequence=_render(effect.get("consequence"), shown, money, code),
                money_moving=bool(effect.get("money_moving")),
            )
        )
    return tuple(out)
