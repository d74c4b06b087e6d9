"""The store's party registry: which party holds which role beyond one agreement, and its approval key.

An agreement binds its pact roles to party names when it is opened; the
registry says more about a party than an agreement can: the ed25519 public
key its approval grants must verify under (for a pact role such as
`refund_approver`), and the reserved role `operator`, held by whoever may
resolve parked effects. A key is registered once per (party, role) and never
replaced silently: registering the same key again changes nothing, another
key is refused (PW612).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pactwright.canonical import hash_bytes
from pactwright.errors import UsageError
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend
from pactwright.signing import decode_b64, encode_b64, weak_public_key

__all__ = ["OPERATOR", "Party", "add_party", "holds", "key_for", "list_parties"]

OPERATOR = "operator"
MAX_PARTY = 200
_ROLE_RE = re.compile(r"[a-z_][a-z0-9_]{0,63}")


@dataclass(frozen=True)
class Party:
    """One registry row: a party, a role it holds, and (for approvers) its raw public key in base64."""

    party: str
    role: str
    public_key: str | None
    added_at: int

    @property
    def keyid(self) -> str | None:
        raw = None if self.public_key is None else decode_b64(self.public_key)
        return None if raw is None else hash_bytes(raw)

    def to_json(self) -> dict[str, Any]:
        return {
            "party": self.party,
            "role": self.role,
            "public_key": self.public_key,
            "keyid": self.keyid,
            "added_at": self.added_at,
        }


def _check_names(party: str, role: str) -> None:
    if not party or len(party) > MAX_PARTY or not party.isprintable() or party.strip() != party or "\x00" in party:
        raise UsageError(f"a party name is 1-{MAX_PARTY} printable characters, without surrounding spaces",
                         code="PW611", field="party", found=party[:60])  # fmt: skip
    if _ROLE_RE.fullmatch(role) is None:
        raise UsageError(f"role `{role[:60]}` is not a role name (lower case letters, digits and `_`)",
                         code="PW611", field="role", found=role[:60])  # fmt: skip


def add_party(store: Store, party: str, role: str, public_key: bytes | None, now: int) -> Party:
    """Register that `party` holds `role`, with its raw 32-byte ed25519 public key (or none).

    Idempotent for the same key; a different key (or a key where none was
    registered, or none where one was) is PW612. A key that anyone could sign
    for (a point of small order, a non-canonical encoding) is PW613.
    """
    _check_names(party, role)
    encoded = None
    if public_key is not None:
        if weak_public_key(public_key):
            raise UsageError("the public key is not a usable raw ed25519 key (32 bytes, not of small order)",
                             code="PW613", field="public_key")  # fmt: skip
        encoded = encode_b64(public_key)
    with store.transaction() as db:
        found = db.query("SELECT public_key, added_at FROM parties WHERE party = ? AND role = ?", (party, role))
        if found:
            stored = None if found[0][0] is None else str(found[0][0])
            if stored != encoded:
                raise UsageError(
                    f"party `{party}` already holds `{role}` with another key; a registered key is never replaced",
                    code="PW612",
                    field="public_key",
                    hint="register the new key under a new party name, or restore the old key file",
                )
            return Party(party, role, stored, int(found[0][1]))
        db.execute(
            "INSERT INTO parties (party, role, public_key, added_at) VALUES (?, ?, ?, ?)", (party, role, encoded, now)
        )
    return Party(party, role, encoded, now)


def list_parties(store: Store) -> list[Party]:
    """Every registered (party, role), sorted by party then role."""
    with store.transaction(write=False) as db:
        if not db.has_table("parties"):
            return []
        found = db.query("SELECT party, role, public_key, added_at FROM parties")
    # Sorted here, by code point: ORDER BY on text follows the database's collation, which differs.
    return sorted((Party(str(p), str(r), None if k is None else str(k), int(a)) for p, r, k, a in found),
                  key=lambda party: (party.party, party.role))  # fmt: skip


def key_for(db: Backend, party: str, role: str) -> bytes | None:
    """The raw public key registered for (party, role), or None (not registered, no key, or unusable)."""
    found = db.query("SELECT public_key FROM parties WHERE party = ? AND role = ?", (party, role))
    if not found or found[0][0] is None:
        return None
    raw = decode_b64(str(found[0][0]))
    return None if raw is None or weak_public_key(raw) else raw


def holds(db: Backend, party: str, role: str) -> bool:
    """Whether the registry says `party` holds `role` (`operator` for resolving parked effects)."""
    return bool(db.query("SELECT 1 FROM parties WHERE party = ? AND role = ?", (party, role)))
