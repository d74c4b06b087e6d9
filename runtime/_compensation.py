"""The one compensation a call may have, derived from the bundle and the call alone.

A call whose effect declares `strategy compensate with E` is undone by one
call of E, row `ID/c`. Everything about that row (its effect, strategy,
destination, idempotency key, body and amount) is a function of the
agreement's bundle and of the call it undoes, so nothing in it needs to be
taken on the row's word: the effect worker creates the row from this
derivation, checks it against the same derivation before any byte leaves
(an inserted or edited row is refused unsent, PW644), and the evidence
replay (runtime/_evidence_tables.py) expects exactly this row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.runtime import _agreement as rows

__all__ = ["Compensation", "compensation_body", "derive"]


@dataclass(frozen=True)
class Compensation:
    """The compensation row a call must have, field for field."""

    effect: str
    strategy: str
    method: str
    url: str
    idempotency_key: str
    body: bytes
    amount: str | None

    @property
    def destination(self) -> str:
        return f"{self.method} {self.url}"

    @property
    def payload_digest(self) -> str:
        return hash_bytes(self.body)


def compensation_body(agreement_id: str, instance: str, key: str, payload: str, amount: str | None,
                      name: str) -> tuple[bytes, str]:  # fmt: skip
    """The exact body and key of the compensation `name` of call `instance` (its key, payload and amount)."""
    params = rows.loads(payload, "effect payload").get("params")
    body = canonical_bytes({"agreement": agreement_id, "effect": name, "compensates": instance, "amount": amount,
                            "params": params})  # fmt: skip
    digest = hashlib.sha256(canonical_bytes({"compensates": key, "effect": name})).hexdigest()
    return body, "pw-" + digest[:40]


def derive(doc: Mapping[str, Any], agreement_id: str, instance: str, effect: str, key: str, payload: str,
           amount: str | None) -> Compensation | None:  # fmt: skip
    """The compensation of call `instance` of `effect`, or None when the effect declares none.

    The call site's strategy is its effect's (compiler/lower.py `_call_json`
    copies it), so the effect alone names the compensation. Raises
    PactwrightError when `payload` is not the JSON object a call's body is.
    """
    effects = {str(e["name"]): e for e in doc.get("effects", [])}
    strategy = (effects.get(effect) or {}).get("strategy") or {}
    name = strategy.get("compensation") if strategy.get("kind") == "compensate" else None
    if not isinstance(name, str) or name not in effects:
        return None
    undo = effects[name]
    body, derived_key = compensation_body(agreement_id, instance, key, payload, amount, name)
    egress = undo["egress"][0] if undo["egress"] else {"method": "", "url": ""}
    kind = str((undo.get("strategy") or {"kind": "once"})["kind"])  # as the verifier reads it
    return Compensation(name, kind, str(egress["method"]), str(egress["url"]), derived_key, body, amount)
