"""Activation checks on who vouches for a bundle: signatures, threshold, approval.

The approval is parsed by the kernel (`pactwright.approval.parse_approval`,
as `approve` and `sign` do). `signatures.json` is read here rather than with
`bundle_signing.parse_signatures` for two reasons: that parser refuses a
key's second entry as malformed before anything is counted, where
activation first counts distinct keys against the threshold (PW449) and
then refuses the repeat (PW450); and it accepts non-canonical base64, which
would let `signatures.json` change without any check noticing. Each
statement is rebuilt with `pactwright.signing` and must equal what the file
holds. Signatures are checked strictly: one bad entry refuses the bundle
even if the others would meet the threshold (DESIGN.md: a signature
invalid or by an untrusted key is a refusal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pactwright.approval import Approval, check_named_key, parse_approval
from pactwright.bundle_check import Manifest
from pactwright.bundle_signing import format_time, parse_expires
from pactwright.canonical import is_hash
from pactwright.errors import ActivationError
from pactwright.runtime._checks_files import load_document
from pactwright.runtime._refusal import Refusal, show
from pactwright.signing import (
    APPROVAL_PATH,
    SIGNATURES_FORMAT,
    SIGNATURES_PATH,
    decode_b64,
    encode_b64,
    signature_statement,
    verify_statement,
)
from pactwright.trust import Trust, TrustedKey


@dataclass(frozen=True)
class SignatureEntry:
    index: int
    statement: dict[str, Any]
    signature: str

    @property
    def keyid(self) -> str:
        return str(self.statement["keyid"])


def _strings(statement: Any, names: tuple[str, ...]) -> dict[str, str] | None:
    """The named fields of `statement` when all are strings, else None."""
    if not isinstance(statement, dict) or not all(isinstance(statement.get(name), str) for name in names):
        return None
    return {name: str(statement[name]) for name in names}


def load_signatures(files: Mapping[str, bytes]) -> list[SignatureEntry]:
    """`signatures.json`: present, canonical, the documented shape, sorted, not empty."""
    if SIGNATURES_PATH not in files:
        raise Refusal(
            "PW436",
            "the bundle has no `signatures.json`",
            file=SIGNATURES_PATH,
            hint="sign the bundle with `pactwright sign`",
        )
    doc = load_document(files, SIGNATURES_PATH)

    def bad(field: str, what: str) -> Refusal:
        return Refusal("PW437", f"`signatures.json` is malformed: {what}", file=SIGNATURES_PATH, field=field)

    if not isinstance(doc, dict) or set(doc) != {"format", "signatures"}:
        raise bad("", "expected exactly the fields `format` and `signatures`")
    if doc["format"] != SIGNATURES_FORMAT:
        raise bad("format", f"format `{show(str(doc['format']))}` is not `{SIGNATURES_FORMAT}`")
    if not isinstance(doc["signatures"], list):
        raise bad("signatures", "`signatures` must be a list")
    if not doc["signatures"]:
        raise Refusal("PW438", "`signatures.json` holds no signatures", file=SIGNATURES_PATH, field="signatures")
    entries = []
    for index, item in enumerate(doc["signatures"]):
        field = f"signatures/{index}"
        if not isinstance(item, dict) or set(item) != {"statement", "signature"}:
            raise bad(field, "each entry needs exactly `statement` and `signature`")
        fields = _strings(item["statement"], ("manifest_hash", "approval_hash", "expires", "keyid"))
        if fields is None or item["statement"] != signature_statement(**fields):
            raise bad(f"{field}/statement", "the statement is not a bundle-signature statement")
        if not all(is_hash(fields[name]) for name in ("manifest_hash", "approval_hash", "keyid")):
            raise bad(f"{field}/statement", "`manifest_hash`, `approval_hash` and `keyid` must be hashes")
        try:
            parse_expires(fields["expires"])
        except ActivationError as exc:
            raise bad(f"{field}/statement/expires", exc.message) from None
        if not isinstance(item["signature"], str):
            raise bad(f"{field}/signature", "`signature` must be a string")
        entries.append(SignatureEntry(index, item["statement"], item["signature"]))
    keyids = [e.keyid for e in entries]
    if keyids != sorted(keyids):
        raise bad("signatures", "entries must be sorted by keyid")
    return entries


def load_approval(files: Mapping[str, bytes]) -> Approval:
    """`approval.json`: present, canonical, the documented shape (the kernel's `parse_approval`)."""
    if APPROVAL_PATH not in files:
        raise Refusal(
            "PW439",
            "the bundle has no `approval.json`",
            file=APPROVAL_PATH,
            hint="a human approves the candidate hash with `pactwright approve`; put its approval.json in the bundle",
        )
    try:
        return parse_approval(files[APPROVAL_PATH])
    except ActivationError as exc:
        load_document(files, APPROVAL_PATH)  # not canonical JSON at all: PW425, before PW440
        raise Refusal("PW440", exc.message, file=APPROVAL_PATH, field=exc.field) from None


def _scope(key: TrustedKey) -> str:
    return "any pact" if key.scope is None else ", ".join(f"`{s}`" for s in key.scope)


def _verifies(key: TrustedKey, statement: dict[str, Any], signature: str) -> bool:
    # Canonical base64 only: otherwise two encodings of one signature (the
    # unused low bits of the last character) would make signatures.json
    # malleable without any check noticing.
    raw = decode_b64(signature)
    return raw is not None and encode_b64(raw) == signature and verify_statement(key.key(), statement, signature)


def _signer(entry: SignatureEntry, trust: Trust, pact_id: str) -> TrustedKey:
    field = f"signatures/{entry.index}"
    key = trust.get(entry.keyid)
    if key is None:
        raise Refusal(
            "PW441",
            f"signature {entry.index} is by key `{entry.keyid}`, which the trust file does not list",
            file="signatures.json",
            field=f"{field}/statement/keyid",
            hint="add the signer's public key with `pactwright trust add KEY.pub --role signer`",
        )
    if key.revoked:
        raise Refusal(
            "PW442",
            f"signature {entry.index} is by key `{key.keyid}`, which the trust file revokes",
            file="signatures.json",
            field=f"{field}/statement/keyid",
            hint="have a current signer sign the bundle",
        )
    if "signer" not in key.roles:
        raise Refusal(
            "PW443",
            f"signature {entry.index} is by key `{key.keyid}`, which is not trusted to sign",
            file="signatures.json",
            field=f"{field}/statement/keyid",
            expected="role `signer`",
            found=", ".join(f"`{r}`" for r in sorted(key.roles)) or "no roles",
            labels=("needed", "trust file"),
        )
    if not (key.scope is None or pact_id in key.scope):
        raise Refusal(
            "PW444",
            f"signature {entry.index} is by key `{key.keyid}`, which may not sign `{pact_id}`",
            file="signatures.json",
            field=f"{field}/statement/keyid",
            expected=f"`{pact_id}`",
            found=_scope(key),
            labels=("pact", "key scope"),
        )
    return key


def check_signatures(
    entries: list[SignatureEntry],
    trust: Trust,
    manifest: Manifest,
    *,
    manifest_hash: str,
    approval_hash: str,
    now: datetime,
) -> tuple[str, ...]:
    """Every entry trusted, valid, bound to these bytes and unexpired; then the threshold.

    Returns the distinct signer key ids, sorted.
    """
    for entry in entries:
        field = f"signatures/{entry.index}"
        key = _signer(entry, trust, manifest.pact_id)
        if not _verifies(key, entry.statement, entry.signature):
            raise Refusal(
                "PW445",
                f"signature {entry.index} by `{key.keyid}` does not verify over its statement",
                file="signatures.json",
                field=f"{field}/signature",
            )
        for name, actual, what, code in (
            ("manifest_hash", manifest_hash, "manifest.json", "PW446"),
            ("approval_hash", approval_hash, "approval.json", "PW447"),
        ):
            if entry.statement[name] != actual:
                raise Refusal(
                    code,
                    f"signature {entry.index} by `{key.keyid}` vouches for another `{what}` than this bundle's",
                    file="signatures.json",
                    field=f"{field}/statement/{name}",
                    expected=actual,
                    found=entry.statement[name],
                    labels=(what, "signature"),
                    hint="signatures from one bundle do not carry over to another; sign this bundle",
                )
        if now >= parse_expires(entry.statement["expires"]):
            raise Refusal(
                "PW448",
                f"signature {entry.index} by `{key.keyid}` expired",
                file="signatures.json",
                field=f"{field}/statement/expires",
                expected=entry.statement["expires"],
                found=format_time(now),
                labels=("expires", "now"),
                hint="have the signers sign the bundle again with a later expiry",
            )
    distinct = tuple(sorted({e.keyid for e in entries}))
    if len(distinct) < trust.threshold:
        raise Refusal(
            "PW449",
            f"{len(distinct)} distinct trusted key(s) signed; the trust file requires {trust.threshold}",
            file="signatures.json",
            field="signatures",
            expected=f"{trust.threshold} distinct signer keys",
            found=f"{len(distinct)} ({', '.join(distinct)})",
            labels=("threshold", "signed by"),
        )
    if len(distinct) != len(entries):
        repeated = next(k for k in distinct if sum(e.keyid == k for e in entries) > 1)
        raise Refusal(
            "PW450",
            f"key `{repeated}` signed more than once; `signatures.json` holds one entry per key",
            file="signatures.json",
            field="signatures",
        )
    return distinct


def check_approval(approval: Approval, trust: Trust, manifest: Manifest) -> None:
    """By a trusted approver for this pact, validly signed, for this candidate."""
    statement = approval.statement
    key = trust.get(statement["keyid"])
    why = None
    if key is None:
        why = "the trust file does not list it"
    elif key.revoked:
        why = "the trust file revokes it"
    elif "approver" not in key.roles:
        why = "it does not have the `approver` role"
    elif not (key.scope is None or manifest.pact_id in key.scope):
        why = f"its scope ({_scope(key)}) does not include `{manifest.pact_id}`"
    if key is None or why is not None:
        raise Refusal(
            "PW451",
            f"the approval is by key `{statement['keyid']}` ({show(statement['approver'])}), "
            f"which is not trusted to approve: {why}",
            file=APPROVAL_PATH,
            field="statement/keyid",
            hint="add the approver's key with `pactwright trust add KEY.pub --role approver`",
        )
    if not _verifies(key, statement, approval.signature):
        raise Refusal(
            "PW452",
            f"the approval by `{show(statement['approver'])}` does not verify over its statement",
            file=APPROVAL_PATH,
            field="signature",
        )
    _check_approver_name(trust, str(statement["keyid"]), str(statement["approver"]))
    approved = (statement["candidate_hash"], statement["pact"]["id"], statement["pact"]["version"])
    if approved != (manifest.candidate_hash, manifest.pact_id, manifest.pact_version):
        raise Refusal(
            "PW453",
            f"the approval by `{show(statement['approver'])}` is for another candidate: it is stale",
            file=APPROVAL_PATH,
            field="statement/candidate_hash",
            expected=f"{manifest.candidate_hash} ({manifest.pact_id} {manifest.pact_version})",
            found=f"{approved[0]} ({show(approved[1])} {show(approved[2])})",
            labels=("manifest", "approval"),
            hint="the approver must approve this exact candidate hash again",
        )


TRUST_SOURCE = "trust.json"


def _check_approver_name(trust: Trust, keyid: str, approver: str) -> None:
    """The name an approval gives is the name the trust file records for its key (PW480), as `approve` checks.

    `approve` refuses such an approval when it is made; activation checks it
    again, so an approval written by other means (or made where no trust
    file was at hand) cannot put one person's name on another's key.
    """
    try:
        check_named_key(trust, keyid, approver, TRUST_SOURCE)
    except ActivationError as exc:
        raise Refusal("PW480", str(exc.args[0]), file=APPROVAL_PATH, field="statement/approver",
                      expected=exc.expected, found=exc.found) from None  # fmt: skip
