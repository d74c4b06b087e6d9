"""Bearer tokens: who is calling, as which registered party, and what that party may do.

A token is issued to a party of the store's registry (runtime/parties.py)
and is shown once, as `pwt_<token_id>_<secret>`; the store keeps only the
SHA-256 of the secret (migration 7, table `tokens`), so a copy of the store
lets nobody act as anyone. `authenticate` turns an `Authorization: Bearer`
header into a `Principal`: the token's party and the roles the registry
gives that party at this moment (a role registered after the token was
issued counts; nothing is cached in the token).

Refusals are stable codes with an HTTP status (`http_status`): a missing or
malformed header is PW670 (401); an unknown token id, a wrong secret and a
revoked token are all PW671 (401) with one message, and take the same work:
the secret is always hashed and compared (`hmac.compare_digest`) against
the stored hash, or against a fixed dummy when the id is unknown, so
neither the answer nor its timing says which of the three it was. A role
the party does not hold is PW672 (403); a pact's clock role is never
available to a token, whatever the registry says (PW673, 403): the clock is
the runtime's scheduler, not a caller. Acting in a role on an agreement
also needs the agreement to bind that role to the token's party (PW508,
403). Reading an agreement (and its events, evidence, approvals, effects)
needs the token's party to be one of the agreement's parties, or to hold
`operator`; any other caller is answered as if the agreement did not exist
(PW501, 404).

Authentication only reads: a refused (or accepted) request writes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from pactwright.errors import PactwrightError, UsageError
from pactwright.runtime import _agreement as rows
from pactwright.runtime._agreement import clock_roles
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend
from pactwright.runtime.store._migrations import TOKEN_TABLES

__all__ = [
    "TOKEN_PREFIX",
    "AuthenticationError",
    "AuthorizationError",
    "IssuedToken",
    "Principal",
    "TokenInfo",
    "authenticate",
    "authorize",
    "clock_bindings",
    "issue_token",
    "list_tokens",
    "may_read",
    "pact_clock_roles",
    "readable",
    "require_readable",
    "require_role",
    "revoke_token",
]

TOKEN_PREFIX = "pwt_"  # noqa: S105 - a public marker, not a secret
_ID_BYTES = 8  # 16 hex characters: unique enough per store, and never secret
_SECRET_BYTES = 32
_SECRET_LENGTH = 43  # len(secrets.token_urlsafe(32)): 32 bytes in unpadded base64url
_MAX_HEADER = 256
_HEADER_RE = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +(?P<token>\S+) *")
_TOKEN_RE = re.compile(r"pwt_(?P<id>[0-9a-f]{16})_(?P<secret>[A-Za-z0-9_-]{43})")
# What an unknown token id is compared against: the hash of no secret anyone holds, so the
# unknown-id path does the same hash and constant-time compare as the wrong-secret path.
_DUMMY_HASH = hashlib.sha256(b"pactwright: no such token").hexdigest()
_NOT_VALID = "the bearer token is not valid: unknown, revoked or wrong"
OPERATOR = "operator"  # the registry's reserved role (runtime/parties.py): may read every agreement


class AuthenticationError(PactwrightError):
    """The caller is not authenticated: no usable bearer token (PW670) or not a valid one (PW671). HTTP 401."""

    code = "PW670"
    http_status: ClassVar[int] = 401


class AuthorizationError(PactwrightError):
    """The caller is authenticated but may not act in that role (PW672, PW673). HTTP 403."""

    code = "PW672"
    http_status: ClassVar[int] = 403


@dataclass(frozen=True)
class IssuedToken:
    """A newly issued token. `token` is the whole bearer text: shown once, stored nowhere."""

    token_id: str
    party: str
    token: str
    created_at: int

    def to_json(self) -> dict[str, Any]:
        return {"token_id": self.token_id, "party": self.party, "token": self.token, "created_at": self.created_at}


@dataclass(frozen=True)
class TokenInfo:
    """One stored token as anyone may see it: never the secret, nor its hash."""

    token_id: str
    party: str
    created_at: int
    revoked_at: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "token_id": self.token_id,
            "party": self.party,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the token's party and the registry's roles for it when the request came."""

    party: str
    roles: frozenset[str]
    token_id: str


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _roles(db: Backend, party: str) -> frozenset[str]:
    if not db.has_table("parties"):
        return frozenset()
    return frozenset(str(r) for (r,) in db.query("SELECT role FROM parties WHERE party = ?", (party,)))


def issue_token(store: Store, party: str, now: int) -> IssuedToken:
    """Issue a new token for `party`, which must hold at least one role in the registry (else PW674).

    The store is migrated to the token table first when it is older, but
    only once the party is known to be registered: a refused issue changes
    nothing.
    """
    with store.transaction(write=False) as db:
        known = _roles(db, party)
    if not known:
        raise UsageError(
            f"party `{party[:60]}` holds no role in the party registry: a token acts as a registered party",
            code="PW674",
            field="party",
            hint=f"register it first: `pactwright parties add {party[:60]} --role ROLE --store URL`",
        )
    if store.schema_version() < TOKEN_TABLES:
        store.migrate()
    token_id = secrets.token_hex(_ID_BYTES)
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    with store.transaction() as db:
        db.execute(
            "INSERT INTO tokens (token_id, party, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, NULL)",
            (token_id, party, _hash(secret), now),
        )
    return IssuedToken(token_id, party, f"{TOKEN_PREFIX}{token_id}_{secret}", now)


def _unknown_id(token_id: str) -> UsageError:
    return UsageError(
        f"no token `{token_id[:40]}` in the store",
        code="PW675",
        field="token_id",
        hint="`pactwright parties tokens --store URL` lists the token ids",
    )


def revoke_token(store: Store, token_id: str, now: int) -> None:
    """Revoke a token for good. Revoking a revoked token changes nothing (its first revocation time stays)."""
    if store.schema_version() < TOKEN_TABLES:
        raise _unknown_id(token_id)
    with store.transaction() as db:
        found = db.query("SELECT revoked_at FROM tokens WHERE token_id = ?", (token_id,))
        if not found:
            raise _unknown_id(token_id)
        if found[0][0] is None:
            db.execute("UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL", (now, token_id))


def list_tokens(store: Store) -> list[TokenInfo]:
    """Every token ever issued, revoked ones included, by creation time then id; no secrets."""
    with store.transaction(write=False) as db:
        if not db.has_table("tokens"):
            return []
        found = db.query("SELECT token_id, party, created_at, revoked_at FROM tokens ORDER BY created_at, token_id")
    return [TokenInfo(str(t), str(p), int(c), None if r is None else int(r)) for t, p, c, r in found]


def _parse(authorization: str | None) -> tuple[str, str]:
    """(token id, secret) from an `Authorization` header value, or PW670."""
    header = _HEADER_RE.fullmatch(authorization) if authorization and len(authorization) <= _MAX_HEADER else None
    token = _TOKEN_RE.fullmatch(header["token"]) if header is not None else None
    if token is None:
        missing = not authorization
        raise AuthenticationError(
            "no bearer token: the request has no `Authorization` header"
            if missing
            else "the `Authorization` header is not `Bearer pwt_<id>_<secret>`",
            field="authorization",
            hint="send `Authorization: Bearer TOKEN` with a token from `pactwright parties token NAME`",
        )
    return token["id"], token["secret"]


def authenticate(store: Store, authorization: str | None) -> Principal:
    """The principal an `Authorization` header value proves, or PW670 / PW671 (HTTP 401). Writes nothing."""
    token_id, secret = _parse(authorization)
    presented = _hash(secret).encode("ascii")
    with store.transaction(write=False) as db:
        found = (
            db.query("SELECT secret_hash, party, revoked_at FROM tokens WHERE token_id = ?", (token_id,))
            if db.has_table("tokens")
            else []
        )
        stored, party, revoked = found[0] if found else (_DUMMY_HASH, "", None)
        # Always one hash and one constant-time compare, whichever way the token is wrong.
        matches = hmac.compare_digest(presented, str(stored).encode("utf-8", "replace"))
        if not found or not matches or revoked is not None:
            raise AuthenticationError(_NOT_VALID, code="PW671", field="authorization")
        roles = _roles(db, str(party))
    return Principal(str(party), roles, token_id)


def require_role(principal: Principal, role: str, *, clock_roles: Collection[str] = ()) -> None:
    """Refuse unless `principal` may act as `role`: a clock role never (PW673), else the registry's (PW672).

    `clock_roles` are the pact's clock roles (`pact_clock_roles`); `authorize`
    passes them for an agreement. Both refusals are HTTP 403.
    """
    if role in clock_roles:
        raise AuthorizationError(
            f"`{role[:60]}` is the pact's clock role: only the runtime's scheduler acts as it, never a token",
            code="PW673",
            field="role",
            found=role[:60],
        )
    if role not in principal.roles:
        held = ", ".join(f"`{r}`" for r in sorted(principal.roles)) or "none"
        raise AuthorizationError(
            f"party `{principal.party}` does not hold the role `{role[:60]}`",
            field="role",
            expected=f"`{role[:60]}`",
            found=held,
            hint=f"an operator registers it: `pactwright parties add {principal.party} --role {role[:60]}`",
        )


def pact_clock_roles(store: Store, agreement_id: str) -> frozenset[str]:
    """The clock roles of the pact an agreement runs on (PW501 for an unknown agreement)."""
    with store.transaction(write=False) as db:
        agreement = rows.read(db, agreement_id, lock=False)
        bundle = rows.load_bundle(store, db, agreement, ())
    return frozenset(clock_roles(bundle))


def clock_bindings(store: Store, pact_id: str, parties: Mapping[str, str]) -> frozenset[str]:
    """The clock roles of the pact's active version, after refusing `parties` that name who the clock is.

    The runtime binds a clock role to the role's own name, and the
    scheduler acts as whatever party an agreement binds to it: a caller
    opening an agreement that binds the clock to itself or to anyone else
    would choose the clock's identity, so that is PW673 (HTTP 403) for every
    token, operators included. Stating the default (`scheduler: scheduler`)
    is allowed. An unknown pact answers what opening it answers.
    """
    with store.transaction(write=False) as db:
        bundle = rows.bundle_of(store.active_in(db, pact_id))
    roles = frozenset(clock_roles(bundle))
    for role in sorted(roles & set(parties)):
        if parties[role] != role:
            raise AuthorizationError(
                f"`{role[:60]}` is the pact's clock role: the runtime's scheduler acts as it, as `{role[:60]}`; "
                "no agreement binds it to a party",
                code="PW673",
                field=f"parties.{role[:60]}",
                found=parties[role][:60],
            )
    return roles


def authorize(store: Store, principal: Principal, agreement_id: str, role: str) -> None:
    """`require_role` for acting in `role` on one agreement, with that agreement's pact's clock roles, and
    the agreement binding `role` to the principal's party (PW508, HTTP 403). A
    caller the agreement does not bind at all (and not an operator) is
    answered exactly as for an unknown agreement (PW501, HTTP 404), as reads are.

    The command path checks the binding again when the command runs; it is
    checked here first so that a caller the agreement does not bind never
    reaches the idempotency key lookup, whose answer (a replay, or PW515 for
    another payload) would tell it which keys another party has used.
    """
    with store.transaction(write=False) as db:
        agreement = rows.read(db, agreement_id, lock=False)
        if not may_read(principal, agreement.parties):
            raise rows.unknown(agreement_id)  # as for reads: nothing says the agreement exists
        bundle = rows.load_bundle(store, db, agreement, ())
    require_role(principal, role, clock_roles=frozenset(clock_roles(bundle)))
    if agreement.parties.get(role) != principal.party:
        raise AuthorizationError(
            f"party `{principal.party}` does not hold role `{role}` in agreement `{agreement.id}`",
            code="PW508",
            field="actor",
            found=principal.party,
        )


def may_read(principal: Principal, parties: Mapping[str, str]) -> bool:
    """Whether the principal may read an agreement binding `parties` (role -> party): it is one of them,
    or it holds `operator`."""
    return OPERATOR in principal.roles or principal.party in parties.values()


def readable(store: Store, principal: Principal, agreement_ids: Iterable[str]) -> frozenset[str]:
    """The agreements among `agreement_ids` the principal may read (`may_read`); unknown ones are not."""
    wanted = sorted(set(agreement_ids))
    if not wanted:
        return frozenset()
    out: set[str] = set()
    with store.transaction(write=False) as db:
        for agreement_id in wanted:
            try:
                agreement = rows.read(db, agreement_id, lock=False)
            except PactwrightError as exc:
                if exc.code != "PW501":  # a row that cannot be read is the server's problem, not a hiding place
                    raise
                continue
            if may_read(principal, agreement.parties):
                out.add(agreement_id)
    return frozenset(out)


def require_readable(store: Store, principal: Principal, agreement_id: str) -> None:
    """Refuse an agreement the principal may not read exactly as an unknown one (PW501, HTTP 404), so that
    a token learns nothing, not even that the agreement exists, about agreements it is no party to."""
    if agreement_id not in readable(store, principal, (agreement_id,)):
        raise rows.unknown(agreement_id)
