"""`approval.json`: a human's signed statement that one exact candidate hash is approved.

An approval binds an approver's key to a candidate hash, never to a file
name or a pact version alone, so a policy edited after review cannot ride
on the old approval: building, signing and activating all compare the hash
and refuse a stale approval. The document is canonical JSON
(docs/signing.md); `parse_approval` takes bytes and checks shape only, and
`verify_approval` checks the signature against a public key the caller
trusts for the key id the approval names (a key id alone proves nothing).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pactwright._files import read_input
from pactwright.canonical import canonical_bytes, hash_bytes, is_hash, load_json
from pactwright.errors import ActivationError, PactwrightError
from pactwright.signing import (
    APPROVAL_FORMAT,
    APPROVAL_PATH,
    approval_statement,
    decode_b64,
    encode_b64,
    key_id,
    sign_statement,
    verify_statement,
)
from pactwright.trust import DEFAULT_TRUST_PATH, Trust

POLICY_APPROVAL_SUFFIX = ".approval.json"
MAX_APPROVER_LENGTH = 200
_STATEMENT_FIELDS = {"type", "pact", "candidate_hash", "approver", "role", "keyid"}


@dataclass(frozen=True)
class Approval:
    """A parsed approval: its exact bytes (what signatures bind) and its statement."""

    data: bytes
    statement: dict[str, Any]
    signature: str

    @property
    def hash(self) -> str:
        return hash_bytes(self.data)

    @property
    def candidate_hash(self) -> str:
        value: str = self.statement["candidate_hash"]
        return value

    @property
    def keyid(self) -> str:
        value: str = self.statement["keyid"]
        return value

    @property
    def approver(self) -> str:
        value: str = self.statement["approver"]
        return value

    @property
    def pact_id(self) -> str:
        value: str = self.statement["pact"]["id"]
        return value

    @property
    def pact_version(self) -> str:
        value: str = self.statement["pact"]["version"]
        return value


def policy_approval_path(policy: str | os.PathLike[str]) -> Path:
    """Where an approval of a policy lives before the build: `<stem>.approval.json` beside it."""
    path = Path(policy)
    return path.with_name(path.stem + POLICY_APPROVAL_SUFFIX)


def check_approver_name(name: str) -> str:
    """An approver name fit to print in a refusal: non-empty, one line, no control characters."""
    if not name.strip() or len(name) > MAX_APPROVER_LENGTH or any(not c.isprintable() for c in name):
        raise ActivationError(
            f"approver name `{name!r}` must be 1 to {MAX_APPROVER_LENGTH} printable characters",
            code="PW408",
            field="statement/approver",
        )
    return name


def make_approval(
    private_key: Ed25519PrivateKey, *, pact_id: str, pact_version: str, candidate_hash: str, approver: str
) -> Approval:
    """Sign an approval of `candidate_hash` with `private_key`; returns the document and its bytes."""
    statement = approval_statement(
        pact_id=pact_id,
        pact_version=pact_version,
        candidate_hash=candidate_hash,
        approver=check_approver_name(approver),
        keyid=key_id(private_key.public_key()),
    )
    signature = sign_statement(private_key, statement)
    data = canonical_bytes({"format": APPROVAL_FORMAT, "statement": statement, "signature": signature})
    return Approval(data, statement, signature)


def _invalid(source: str, message: str, field_name: str | None = None) -> ActivationError:
    return ActivationError(
        f"`{source}` is not a valid approval: {message}",
        code="PW408",
        file=source,
        field=field_name,
        hint="approvals are written by `pactwright approve`; approve again",
    )


def parse_approval(data: bytes, source: str = APPROVAL_PATH) -> Approval:
    """Check an approval's shape (PW408); the signature is checked by `verify_approval`."""
    try:
        doc = load_json(data, require_canonical=True)
    except PactwrightError as exc:
        raise _invalid(source, exc.message) from None
    if not isinstance(doc, dict) or doc.get("format") != APPROVAL_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise _invalid(source, f"unknown format `{found}`; expected `{APPROVAL_FORMAT}`", "format")
    if set(doc) != {"format", "statement", "signature"}:
        raise _invalid(source, "the document must have exactly `format`, `statement` and `signature`")
    statement, signature = doc["statement"], doc["signature"]
    if not isinstance(statement, dict) or set(statement) != _STATEMENT_FIELDS:
        raise _invalid(source, f"the statement must have exactly the fields {sorted(_STATEMENT_FIELDS)}", "statement")
    if statement["type"] != "approval" or statement["role"] != "approver":
        raise _invalid(source, "the statement is not an approval by an approver", "statement/type")
    pact = statement["pact"]
    if (
        not isinstance(pact, dict)
        or set(pact) != {"id", "version"}
        or not all(isinstance(v, str) and v for v in pact.values())
    ):
        raise _invalid(source, "`statement/pact` must be `{id, version}` strings", "statement/pact")
    for name in ("candidate_hash", "keyid"):
        if not isinstance(statement[name], str) or not is_hash(statement[name]):
            raise _invalid(source, f"`statement/{name}` is not a `sha256:` hash", f"statement/{name}")
    if not isinstance(statement["approver"], str):
        raise _invalid(source, "`statement/approver` must be a string", "statement/approver")
    check_approver_name(statement["approver"])
    raw = decode_b64(signature) if isinstance(signature, str) else None
    # Canonical base64 only: the document's bytes (and so its hash) have one spelling.
    if raw is None or len(raw) != 64 or encode_b64(raw) != signature:
        raise _invalid(source, "`signature` is not base64 of a 64-byte ed25519 signature", "signature")
    return Approval(data, statement, signature)


def load_approval(path: str | os.PathLike[str]) -> Approval:
    return parse_approval(read_input(path), os.fspath(path))


def verify_approval(approval: Approval, public_key: Ed25519PublicKey, source: str = APPROVAL_PATH) -> None:
    """Refuse (PW409) unless `public_key` is the key the approval names and its signature holds."""
    if key_id(public_key) != approval.keyid:
        raise ActivationError(
            f"`{source}` is signed by another key than the one given to check it",
            code="PW409",
            file=source,
            field="statement/keyid",
            expected=approval.keyid,
            found=key_id(public_key),
        )
    if not verify_statement(public_key, approval.statement, approval.signature):
        raise ActivationError(
            f"the signature of `{source}` does not verify with key `{approval.keyid}`",
            code="PW409",
            file=source,
            field="signature",
            hint="the approval was altered after it was signed; approve again",
        )


def check_current(approval: Approval, candidate_hash: str, source: str = APPROVAL_PATH) -> None:
    """Refuse (PW410) an approval of another candidate: the policy changed after it was approved."""
    if approval.candidate_hash != candidate_hash:
        raise ActivationError(
            f"stale approval: `{source}` approves another candidate than this one",
            code="PW410",
            file=source,
            field="statement/candidate_hash",
            expected=candidate_hash,
            found=approval.candidate_hash,
            hint="review the changed policy and run `pactwright approve` again",
        )


def check_named_key(trust: Trust, keyid: str, approver: str, source: str = DEFAULT_TRUST_PATH) -> bool:
    """Refuse (PW480) an approval naming `approver` with a key the trust file does not record under that name.

    The key's recorded name must be `approver`; a key recorded under no
    name may not claim a name the trust file records for other keys.
    Returns whether the trust file binds this key to the name (False: the
    key has no recorded name and nobody's keys are recorded as `approver`,
    so there is nothing to check against; the caller warns).
    """
    entry = trust.get(keyid)
    if entry is not None and entry.name is not None:
        if entry.name != approver:
            raise ActivationError(
                f"key `{keyid}` is `{entry.name}`'s in `{source}`, not `{approver}`'s: "
                "an approval names the person whose key signs it",
                code="PW480",
                file=source,
                field="approver",
                expected=entry.name,
                found=approver,
            )
        return True
    owners = trust.named(approver)
    if owners:
        listed = ", ".join(f"`{k.keyid}`" for k in owners)
        raise ActivationError(
            f"`{source}` records `{approver}` with key {listed}, not `{keyid}`: "
            "an approval names the person whose key signs it",
            code="PW480",
            file=source,
            field="approver",
            expected=listed,
            found=f"`{keyid}`",
        )
    return False
