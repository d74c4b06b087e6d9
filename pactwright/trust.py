"""`trust.json`: which keys may approve or sign, for which pacts, and how many signers it takes.

The trust file is what activation trusts, so it is read as strictly as any
signed document: canonical bytes only (a hand edit that re-indents it is
refused, so its hash means its content), a known format, key ids that are
the hash of the public key beside them, no key twice, a threshold of at
least one. `parse_trust` takes bytes and does no I/O, so the runtime can
check a trust file it got from anywhere; the editing functions return new
`Trust` values and `write_trust` replaces the file in one rename.

A bad trust file is a configuration error, not a finding about a bundle, so
every refusal here exits 2 (a `UsageError` carrying its PW40x code), as
activation's reading of the same file does.

A revoked key stays listed with `"revoked": true`, and cannot be re-added:
a refusal can then say "revoked" rather than "unknown", and a leaked key
cannot be brought back by a careless `trust add`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from pactwright._files import read_input, write_atomic
from pactwright.canonical import canonical_bytes, hash_bytes, is_hash, load_json
from pactwright.errors import PactwrightError, UsageError
from pactwright.signing import (
    ROLES,
    TRUST_FORMAT,
    decode_b64,
    encode_b64,
    public_key_from_raw,
    raw_public_key,
    weak_public_key,
)

DEFAULT_TRUST_PATH = "trust.json"
_KEY_FIELDS = {"keyid", "public_key", "roles", "scope", "revoked"}
MAX_NAME_LENGTH = 200
_TOP_FIELDS = {"format", "threshold", "keys"}


@dataclass(frozen=True)
class TrustedKey:
    """One key of the trust file; `scope` None means any pact; `name` whose key it is (None: not recorded).

    A name binds the key to one person: `approve --approver NAME` refuses a
    key recorded under another name (PW480). Entries without a name omit
    the field, so a trust file written before names keeps its bytes.
    """

    keyid: str
    public_key: bytes
    roles: tuple[str, ...]
    scope: tuple[str, ...] | None = None
    revoked: bool = False
    name: str | None = None

    def key(self) -> Ed25519PublicKey:
        return public_key_from_raw(self.public_key)

    def may(self, role: str, pact_id: str) -> bool:
        """Whether this key, unrevoked, holds `role` for `pact_id`."""
        return not self.revoked and role in self.roles and (self.scope is None or pact_id in self.scope)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "keyid": self.keyid,
            "public_key": encode_b64(self.public_key),
            "roles": list(self.roles),
            "scope": list(self.scope) if self.scope is not None else None,
            "revoked": self.revoked,
        }
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class Trust:
    """A whole trust file: keys sorted by key id, and the signer threshold."""

    threshold: int = 1
    keys: tuple[TrustedKey, ...] = field(default_factory=tuple)

    def get(self, keyid: str) -> TrustedKey | None:
        return next((k for k in self.keys if k.keyid == keyid), None)

    def named(self, name: str) -> tuple[TrustedKey, ...]:
        """The keys recorded under `name`, revoked ones included."""
        return tuple(k for k in self.keys if k.name == name)

    def to_json(self) -> dict[str, Any]:
        return {"format": TRUST_FORMAT, "threshold": self.threshold, "keys": [k.to_json() for k in self.keys]}

    def to_bytes(self) -> bytes:
        """The canonical bytes written to disk (and the only bytes `parse_trust` accepts)."""
        return canonical_bytes(self.to_json())

    def active_signers(self) -> int:
        return sum(1 for k in self.keys if not k.revoked and "signer" in k.roles)


def _invalid(source: str, message: str, field_name: str | None = None, code: str = "PW403") -> UsageError:
    return UsageError(
        f"`{source}` is not a valid trust file: {message}",
        code=code,
        file=source,
        field=field_name,
        hint="edit the trust file only with `pactwright trust add|revoke|threshold`",
    )


def _sorted_unique_strings(value: Any) -> bool:
    return (
        isinstance(value, list) and all(isinstance(v, str) and v != "" for v in value) and value == sorted(set(value))
    )


def valid_name(name: object) -> bool:
    """A person's name as the trust file records it: 1 to 200 printable characters, not only spaces."""
    return (
        isinstance(name, str)
        and bool(name.strip())
        and len(name) <= MAX_NAME_LENGTH
        and all(c.isprintable() for c in name)
    )


def _parse_key(entry: Any, index: int, source: str) -> TrustedKey:
    where = f"keys/{index}"
    if not isinstance(entry, dict) or set(entry) - {"name"} != _KEY_FIELDS:
        raise _invalid(source, f"`{where}` must have exactly the fields {sorted(_KEY_FIELDS)} (and `name`)", where)
    name = entry.get("name")
    if "name" in entry and not valid_name(name):
        raise _invalid(source, f"`{where}/name` must be 1 to {MAX_NAME_LENGTH} printable characters", f"{where}/name")
    keyid, public_b64 = entry["keyid"], entry["public_key"]
    if not isinstance(keyid, str) or not is_hash(keyid):
        raise _invalid(source, f"`{where}/keyid` is not a `sha256:` key id", f"{where}/keyid", "PW405")
    raw = decode_b64(public_b64) if isinstance(public_b64, str) else None
    if raw is None or len(raw) != 32 or encode_b64(raw) != public_b64:
        raise _invalid(
            source, f"`{where}/public_key` is not base64 of a 32-byte ed25519 key", f"{where}/public_key", "PW405"
        )
    if weak_public_key(raw):
        raise _invalid(
            source,
            f"`{where}/public_key` is a point of small order or a non-canonical encoding: anyone could sign for it",
            f"{where}/public_key",
            "PW405",
        )
    if hash_bytes(raw) != keyid:
        error = _invalid(source, f"`{where}/keyid` is not the hash of its public key", f"{where}/keyid", "PW405")
        error.expected, error.found = hash_bytes(raw), keyid
        raise error
    roles, scope, revoked = entry["roles"], entry["scope"], entry["revoked"]
    if not _sorted_unique_strings(roles) or not roles or not set(roles) <= set(ROLES):
        raise _invalid(source, f"`{where}/roles` must be a sorted, non-empty subset of {list(ROLES)}", f"{where}/roles")
    if scope is not None and (not _sorted_unique_strings(scope) or not scope):
        raise _invalid(source, f"`{where}/scope` must be null or a sorted list of pact ids", f"{where}/scope")
    if not isinstance(revoked, bool):
        raise _invalid(source, f"`{where}/revoked` must be true or false", f"{where}/revoked")
    return TrustedKey(keyid, raw, tuple(roles), tuple(scope) if scope is not None else None, revoked, name)


def parse_trust(data: bytes, source: str = DEFAULT_TRUST_PATH) -> Trust:
    """Validate trust-file bytes; raises `UsageError` (PW403 to PW406, exit 2) naming what is wrong."""
    try:
        doc = load_json(data, require_canonical=True)
    except PactwrightError as exc:
        raise _invalid(source, exc.message) from None
    if not isinstance(doc, dict) or doc.get("format") != TRUST_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise _invalid(source, f"unknown format `{found}`; expected `{TRUST_FORMAT}`", "format")
    if set(doc) != _TOP_FIELDS:
        raise _invalid(source, f"the document must have exactly the fields {sorted(_TOP_FIELDS)}")
    threshold = doc["threshold"]
    if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
        raise _invalid(source, f"threshold `{threshold}` must be an integer of at least 1", "threshold", "PW406")
    if not isinstance(doc["keys"], list):
        raise _invalid(source, "`keys` must be a list", "keys")
    keys = [_parse_key(entry, i, source) for i, entry in enumerate(doc["keys"])]
    seen: set[str] = set()
    for key in keys:
        if key.keyid in seen:
            raise _invalid(source, f"key `{key.keyid}` is listed twice", "keys", "PW404")
        seen.add(key.keyid)
    # Canonical bytes fix key order inside objects, not list order: keep keys sorted too.
    if [k.keyid for k in keys] != sorted(seen):
        raise _invalid(source, "`keys` must be sorted by key id", "keys")
    return Trust(threshold, tuple(keys))


def load_trust(path: str | os.PathLike[str]) -> Trust:
    """Read and validate a trust file (a missing file is a usage error, exit 2)."""
    return parse_trust(read_input(path), os.fspath(path))


def write_trust(path: str | os.PathLike[str], trust: Trust) -> None:
    write_atomic(path, trust.to_bytes())


def add_key(
    trust: Trust,
    public_key: Ed25519PublicKey,
    roles: Iterable[str],
    scope: Iterable[str] | None = None,
    name: str | None = None,
) -> Trust:
    """Add a key, or merge roles and scope into the entry it already has.

    Merging only widens what the key may do: roles are a union, and scoped
    pact ids are added to the key's list (a key already allowed any pact
    stays so). Omitting `scope` for a listed key keeps its scope. `name`
    records whose key it is; a recorded name is never replaced by another
    (PW403), since approvals made under it would then name someone else.
    """
    if name is not None and not valid_name(name):
        raise UsageError(f"a key's name is 1 to {MAX_NAME_LENGTH} printable characters", code="PW403", field="name")
    raw = raw_public_key(public_key)
    keyid = hash_bytes(raw)
    if weak_public_key(raw):
        raise UsageError(
            f"key `{keyid}` is a point of small order or a non-canonical encoding: anyone could sign for it",
            code="PW405",
            field="keys",
            hint="generate a real key with `pactwright keygen`",
        )
    new_roles = set(roles)
    if not new_roles or not new_roles <= set(ROLES):
        raise UsageError(f"roles must be a non-empty subset of {list(ROLES)}", code="PW403", field="roles")
    new_scope = None if scope is None else set(scope)
    if new_scope is not None and (not new_scope or any(not s for s in new_scope)):
        raise UsageError("a scope must name at least one pact id", code="PW403", field="scope")
    existing = trust.get(keyid)
    if existing is None:
        entry = TrustedKey(
            keyid, raw, tuple(sorted(new_roles)), tuple(sorted(new_scope)) if new_scope else None, name=name
        )
        return replace(trust, keys=tuple(sorted((*trust.keys, entry), key=lambda k: k.keyid)))
    if existing.revoked:
        raise UsageError(
            f"key `{keyid}` is revoked; a revoked key cannot be trusted again",
            code="PW407",
            field="keys",
            hint="generate a new key with `pactwright keygen` and add that one",
        )
    scope_out = existing.scope
    if existing.scope is not None and new_scope is not None:
        scope_out = tuple(sorted(set(existing.scope) | new_scope))
    if name is not None and existing.name is not None and name != existing.name:
        raise UsageError(
            f"key `{keyid}` is recorded as `{existing.name}`'s; a key's name is never replaced",
            code="PW480",
            field="name",
            expected=existing.name,
            found=name,
            hint="a key belongs to one person: generate a new key with `pactwright keygen` for another",
        )
    merged = replace(
        existing,
        roles=tuple(sorted(set(existing.roles) | new_roles)),
        scope=scope_out,
        name=existing.name if name is None else name,
    )
    return replace(trust, keys=tuple(merged if k.keyid == keyid else k for k in trust.keys))


def revoke_key(trust: Trust, keyid: str) -> Trust:
    """Mark a key revoked; it stays listed so refusals can say why it no longer counts."""
    if trust.get(keyid) is None:
        raise UsageError(
            f"no key `{keyid}` in the trust file",
            code="PW407",
            field="keys",
            hint="`pactwright trust list` shows the key ids",
        )
    return replace(trust, keys=tuple(replace(k, revoked=True) if k.keyid == keyid else k for k in trust.keys))


def set_threshold(trust: Trust, threshold: int) -> Trust:
    if threshold < 1:
        raise UsageError(f"threshold `{threshold}` must be at least 1", code="PW406", field="threshold")
    return replace(trust, threshold=threshold)
