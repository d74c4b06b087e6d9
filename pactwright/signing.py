"""Keys, statements and signatures: the documents that bind a human and CI to bytes.

Every signed thing is a *statement*, a small JSON object whose canonical
bytes (RFC 8785, from `pactwright.canonical`) are what ed25519 signs:

- an approval statement binds an approver's key to one candidate hash;
- a bundle-signature statement binds a signer's key to one manifest hash,
  one approval hash and an expiry.

A key id is `sha256:` of the raw 32-byte ed25519 public key. Signatures
travel as base64 of the 64 signature bytes. Both approve/sign (which create
these documents) and activation (which checks them) use this module, so the
bytes signed and the bytes checked cannot drift apart.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pactwright.canonical import canonical_bytes, hash_bytes

APPROVAL_FORMAT = "pactwright.approval/1"
SIGNATURES_FORMAT = "pactwright.signatures/1"
TRUST_FORMAT = "pactwright.trust/1"
APPROVAL_PATH = "approval.json"
SIGNATURES_PATH = "signatures.json"
ROLES = ("approver", "signer")


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """`sha256:` of the raw public key bytes: the identity trust files refer to."""
    return hash_bytes(raw_public_key(key))


def public_key_from_raw(data: bytes) -> Ed25519PublicKey:
    return Ed25519PublicKey.from_public_bytes(data)


_P = 2**255 - 19
_ORDER_8_Y = 2707385501144840649318225287225658788936804267575313519463743609750303402022
# The y coordinates of the eight points of small order: the identity (y = 1), the point of
# order 2 (y = -1), the two of order 4 (y = 0) and the four of order 8 (y = +-_ORDER_8_Y).
_SMALL_ORDER_Y = frozenset({0, 1, _P - 1, _ORDER_8_Y, _P - _ORDER_8_Y})


def weak_public_key(raw: bytes) -> bool:
    """Whether 32 raw bytes are an ed25519 public key nobody should trust.

    A point of small order verifies signatures that anyone can make without
    any private key (an all-zero signature, or one of a few others, for any
    statement, with a little grinding of the statement), and OpenSSL accepts
    such keys; a non-canonical encoding (y >= p) gives one point a second
    key id. Neither comes out of key generation; either can only be planted.
    """
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    return len(raw) != 32 or y >= _P or y in _SMALL_ORDER_Y


def encode_b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode_b64(text: str) -> bytes | None:
    """Strict base64 (no whitespace, correct padding), or None."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        return None


def approval_statement(
    *, pact_id: str, pact_version: str, candidate_hash: str, approver: str, keyid: str
) -> dict[str, Any]:
    return {
        "type": "approval",
        "pact": {"id": pact_id, "version": pact_version},
        "candidate_hash": candidate_hash,
        "approver": approver,
        "role": "approver",
        "keyid": keyid,
    }


def signature_statement(*, manifest_hash: str, approval_hash: str, expires: str, keyid: str) -> dict[str, Any]:
    """What a signer vouches for. `expires` is RFC 3339 UTC (`2027-01-31T00:00:00Z`)."""
    return {
        "type": "bundle-signature",
        "manifest_hash": manifest_hash,
        "approval_hash": approval_hash,
        "expires": expires,
        "keyid": keyid,
    }


def sign_statement(private_key: Ed25519PrivateKey, statement: dict[str, Any]) -> str:
    return encode_b64(private_key.sign(canonical_bytes(statement)))


def verify_statement(public_key: Ed25519PublicKey, statement: dict[str, Any], signature_b64: str) -> bool:
    """True only for a well-formed signature over exactly these canonical bytes."""
    signature = decode_b64(signature_b64)
    if signature is None or len(signature) != 64:
        return False
    try:
        public_key.verify(signature, canonical_bytes(statement))
    except InvalidSignature:
        return False
    return True
