"""`signatures.json`: signers vouching for one manifest, one approval, until an expiry.

A bundle signature is a statement binding the manifest hash (so every
artifact and the report's verdict), the approval hash (so the human's
approval of this candidate) and an expiry, signed by one key
(docs/signing.md). The file holds at most one signature per key, sorted by
key id: signing again with the same key replaces its entry, so a threshold
of distinct keys cannot be met by one key signing twice.

`check_signable` is the gate `sign` passes before anything is signed;
`parse_signatures` and `parse_expires` take text and bytes only, so
activation reads the file with the same rules. No function here reads the
clock: the caller passes the time, and only the `sign` command reads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.approval import Approval, check_current, parse_approval
from pactwright.bundle_check import Bundle, check_report
from pactwright.canonical import canonical_bytes, is_hash, load_json
from pactwright.errors import ActivationError, PactwrightError, UsageError
from pactwright.signing import (
    APPROVAL_PATH,
    SIGNATURES_FORMAT,
    SIGNATURES_PATH,
    decode_b64,
    encode_b64,
    key_id,
    sign_statement,
    signature_statement,
    verify_statement,
)
from pactwright.trust import Trust

DEFAULT_VALIDITY = timedelta(days=90)
# ASCII digits only: `\d` alone also matches `２` or `٢`, which `strptime` reads as digits, so
# `２０２７-01-31T00:00:00Z` would be a second spelling of an expiry that sorts after every ASCII one.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)
_EXPIRES = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z", re.ASCII)
_STATEMENT_FIELDS = {"type", "manifest_hash", "approval_hash", "expires", "keyid"}


def _bad_time(text: str, option: str) -> UsageError:
    return UsageError(
        f"`{option}` value `{text}` is not a date (`2027-01-31`) or an RFC 3339 time (`2027-01-31T12:00:00Z`)",
        code="PW418",
        field=option,
        hint="give a time zone: `Z` or an offset such as `+02:00`",
    )


def parse_time(text: str, option: str = "--expires") -> datetime:
    """A date (midnight UTC) or an RFC 3339 time with its offset, as UTC truncated to seconds.

    A time without an offset is refused: which midnight expires a signature
    must not depend on the signer's time zone.
    """
    try:
        if _DATE.fullmatch(text):
            return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
        match = _RFC3339.fullmatch(text)
        if match is None:
            raise _bad_time(text, option)
        date, time, offset = match.groups()
        moment = datetime.fromisoformat(f"{date}T{time}{'+00:00' if offset in 'Zz' else offset}")
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):  # OverflowError: an offset past year 1 or 9999 (`0001-01-01T00:00:00+01:00`)
        raise _bad_time(text, option) from None


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with `Z` and second precision: the only form `expires` takes."""
    utc = moment.astimezone(UTC)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}Z"


def parse_expires(text: str) -> datetime:
    """A statement's `expires` (`2027-01-31T00:00:00Z` exactly), as an aware UTC datetime."""
    if not _EXPIRES.fullmatch(text):
        raise ActivationError(f"`expires` `{text}` is not `YYYY-MM-DDTHH:MM:SSZ`", code="PW417", field="expires")
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        raise ActivationError(f"`expires` `{text}` is not a real time", code="PW417", field="expires") from None


def expiry(expires: str | None, now: datetime) -> datetime:
    """The expiry to sign: `--expires` if given, else `now` + 90 days; refused (PW418, exit 2) unless after `now`."""
    moment = parse_time(expires) if expires is not None else now + DEFAULT_VALIDITY
    moment = moment.replace(microsecond=0)
    if moment <= now:
        raise UsageError(
            "the expiry is not after the current time",
            code="PW418",
            field="--expires",
            expected=f"after {format_time(now)}",
            found=format_time(moment),
        )
    return moment


@dataclass(frozen=True)
class Signature:
    """One entry of `signatures.json`."""

    statement: dict[str, Any]
    signature: str

    @property
    def keyid(self) -> str:
        value: str = self.statement["keyid"]
        return value

    def binds(self, manifest_hash: str, approval_hash: str) -> bool:
        return self.statement["manifest_hash"] == manifest_hash and self.statement["approval_hash"] == approval_hash

    def to_json(self) -> dict[str, Any]:
        return {"statement": self.statement, "signature": self.signature}


def _bad_signatures(source: str, message: str, field_name: str | None = None) -> ActivationError:
    return ActivationError(
        f"`{source}` is not a valid signatures file: {message}",
        code="PW417",
        file=source,
        field=field_name,
        hint="remove it and sign again with `pactwright sign`",
    )


def _entry(entry: Any, index: int, source: str) -> Signature:
    where = f"signatures/{index}"
    if not isinstance(entry, dict) or set(entry) != {"statement", "signature"}:
        raise _bad_signatures(source, f"`{where}` must have exactly `statement` and `signature`", where)
    statement, signature = entry["statement"], entry["signature"]
    if not isinstance(statement, dict) or set(statement) != _STATEMENT_FIELDS:
        raise _bad_signatures(source, f"`{where}/statement` must have exactly {sorted(_STATEMENT_FIELDS)}", where)
    if statement["type"] != "bundle-signature":
        raise _bad_signatures(source, f"`{where}/statement/type` is not `bundle-signature`", where)
    for name in ("manifest_hash", "approval_hash", "keyid"):
        if not isinstance(statement[name], str) or not is_hash(statement[name]):
            raise _bad_signatures(source, f"`{where}/statement/{name}` is not a `sha256:` hash", where)
    if not isinstance(statement["expires"], str):
        raise _bad_signatures(source, f"`{where}/statement/expires` is not a string", where)
    try:
        parse_expires(statement["expires"])
    except ActivationError as exc:
        raise _bad_signatures(source, exc.message, f"{where}/statement/expires") from None
    raw = decode_b64(signature) if isinstance(signature, str) else None
    if raw is None or len(raw) != 64 or encode_b64(raw) != signature:
        raise _bad_signatures(source, f"`{where}/signature` is not base64 of a 64-byte ed25519 signature", where)
    return Signature(statement, signature)


def parse_signatures(data: bytes, source: str = SIGNATURES_PATH) -> tuple[Signature, ...]:
    """Validate `signatures.json` bytes (PW417): canonical, one entry per key id, sorted by key id."""
    try:
        doc = load_json(data, require_canonical=True)
    except PactwrightError as exc:
        raise _bad_signatures(source, exc.message) from None
    if not isinstance(doc, dict) or doc.get("format") != SIGNATURES_FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise _bad_signatures(source, f"unknown format `{found}`; expected `{SIGNATURES_FORMAT}`", "format")
    if set(doc) != {"format", "signatures"} or not isinstance(doc["signatures"], list):
        raise _bad_signatures(source, "the document must have exactly `format` and a `signatures` list")
    entries = tuple(_entry(entry, i, source) for i, entry in enumerate(doc["signatures"]))
    keyids = [e.keyid for e in entries]
    if keyids != sorted(set(keyids)):
        raise _bad_signatures(source, "signatures must be sorted by key id, one per key", "signatures")
    return entries


def signatures_bytes(entries: tuple[Signature, ...]) -> bytes:
    ordered = sorted(entries, key=lambda e: e.keyid)
    return canonical_bytes({"format": SIGNATURES_FORMAT, "signatures": [e.to_json() for e in ordered]})


def sign_manifest(
    private_key: Ed25519PrivateKey, *, manifest_hash: str, approval_hash: str, expires: datetime
) -> Signature:
    statement = signature_statement(
        manifest_hash=manifest_hash,
        approval_hash=approval_hash,
        expires=format_time(expires),
        keyid=key_id(private_key.public_key()),
    )
    return Signature(statement, sign_statement(private_key, statement))


def merge_signature(
    existing: tuple[Signature, ...], new: Signature
) -> tuple[tuple[Signature, ...], tuple[Signature, ...]]:
    """(entries, dropped): `new` replaces its key's entry; entries binding another manifest or approval go.

    Such entries vouch for bytes the bundle no longer has (it was rebuilt or
    re-approved); keeping them would only make activation refuse the bundle.
    """
    manifest_hash, approval_hash = new.statement["manifest_hash"], new.statement["approval_hash"]
    others = [e for e in existing if e.keyid != new.keyid]
    kept = tuple(e for e in others if e.binds(manifest_hash, approval_hash))
    dropped = tuple(e for e in others if not e.binds(manifest_hash, approval_hash))
    return tuple(sorted((*kept, new), key=lambda e: e.keyid)), dropped


def check_signable(bundle: Bundle) -> Approval:
    """Everything `sign` requires but the approver's signature: a passing, bound report and a current approval."""
    check_report(bundle)
    if bundle.approval is None:
        raise ActivationError(
            f"the bundle has no `{APPROVAL_PATH}`; a bundle is signed only after a human approved its candidate",
            code="PW411",
            file=APPROVAL_PATH,
            hint=f"run `pactwright approve {bundle.root} --key K.key --approver NAME`",
        )
    approval = parse_approval(bundle.approval)
    check_current(approval, bundle.manifest.candidate_hash)
    manifest = bundle.manifest
    if (approval.pact_id, approval.pact_version) != (manifest.pact_id, manifest.pact_version):
        raise ActivationError(
            f"`{APPROVAL_PATH}` names pact `{approval.pact_id}` {approval.pact_version} "
            f"but the bundle is `{manifest.pact_id}` {manifest.pact_version}",
            code="PW408",
            file=APPROVAL_PATH,
            field="statement/pact",
        )
    return approval


def trusted_signers(
    entries: tuple[Signature, ...],
    trust: Trust,
    *,
    pact_id: str,
    manifest_hash: str,
    approval_hash: str,
    now: datetime,
) -> list[str]:
    """Key ids whose entry binds these hashes, verifies, and has not expired at `now`, by an
    unrevoked signer trusted for `pact_id`.

    Each key counts once: the file holds one entry per key id, and a key id
    is the hash of one public key.
    """
    counted: list[str] = []
    for entry in entries:
        key = trust.get(entry.keyid)
        if key is None or not key.may("signer", pact_id) or not entry.binds(manifest_hash, approval_hash):
            continue
        if parse_expires(entry.statement["expires"]) <= now:
            continue
        if verify_statement(key.key(), entry.statement, entry.signature):
            counted.append(entry.keyid)
    return counted
