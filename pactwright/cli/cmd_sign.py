"""`pactwright sign BUNDLE --key K.key`: vouch for a verified, approved bundle until an expiry.

Refuses (exit 1, a PW41x code, nothing written) unless every file is the
one the manifest lists, the report passed and binds this candidate and these
artifacts, and the approval is present, current and signed by the key it
names. The approver's public key comes from `--trust` or `--approver-key`:
a key id alone cannot verify anything.

Signing does not require the signer to be trusted (activation decides
that), but with `--trust` it warns when the signer or approver would not
count there and reports how many trusted signatures the bundle now has.
This is the only command that reads the clock, and only for the default
expiry; `--now` replaces it (tests, reproducible CI).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from pactwright.approval import Approval
    from pactwright.trust import Trust


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="a bundle directory written by `pactwright build`")
    parser.add_argument("--key", required=True, metavar="K.key", help="the signer's private key")
    parser.add_argument(
        "--expires", metavar="DATE", help="date (2027-01-31) or RFC 3339 time; default 90 days after --now"
    )
    parser.add_argument("--now", metavar="DATE", help="the current time (default: the system clock, UTC)")
    parser.add_argument("--trust", metavar="TRUST", help="trust.json: the approver's key, and warnings")
    parser.add_argument("--approver-key", metavar="PUB", help="the approver's public key, if not in --trust")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _approver_key(approval: Approval, trust: Trust | None, path: str | None) -> Ed25519PublicKey:
    from pactwright.errors import ActivationError
    from pactwright.keys import load_public_key

    if path is not None:
        return load_public_key(path)
    entry = trust.get(approval.keyid) if trust is not None else None
    if entry is None:
        why = "is not in the trust file" if trust is not None else "is unknown (no `--trust` or `--approver-key`)"
        raise ActivationError(
            f"cannot check the approval's signature: the approver's key `{approval.keyid}` {why}",
            code="PW409",
            file="approval.json",
            field="statement/keyid",
            hint="pass `--trust trust.json` listing the approver, or `--approver-key APPROVER.pub`",
        )
    return entry.key()


def _trust_warnings(trust: Trust, approval: Approval, signer: str, pact_id: str) -> list[str]:
    warnings = []
    for keyid, role, who in ((approval.keyid, "approver", "approver"), (signer, "signer", "signing key")):
        key = trust.get(keyid)
        if key is None or not key.may(role, pact_id):
            state = "not listed" if key is None else "revoked" if key.revoked else f"not a {role} for `{pact_id}`"
            warnings.append(f"the {who} `{keyid}` is {state} in the trust file; activation will not count it")
    return warnings


def run(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from pactwright._files import write_atomic
    from pactwright.approval import verify_approval
    from pactwright.bundle_check import read_bundle
    from pactwright.bundle_signing import (
        check_signable,
        expiry,
        format_time,
        merge_signature,
        parse_signatures,
        parse_time,
        sign_manifest,
        signatures_bytes,
        trusted_signers,
    )
    from pactwright.keys import load_private_key, too_open
    from pactwright.signing import SIGNATURES_PATH, key_id
    from pactwright.trust import load_trust

    private_key = load_private_key(args.key)
    now = parse_time(args.now, "--now") if args.now else datetime.now(UTC).replace(microsecond=0)
    expires = expiry(args.expires, now)
    trust = load_trust(args.trust) if args.trust else None
    bundle = read_bundle(args.bundle)
    approval = check_signable(bundle)
    verify_approval(approval, _approver_key(approval, trust, args.approver_key))
    existing = parse_signatures(bundle.signatures) if bundle.signatures is not None else ()

    manifest = bundle.manifest
    signature = sign_manifest(private_key, manifest_hash=manifest.hash, approval_hash=approval.hash, expires=expires)
    entries, dropped = merge_signature(existing, signature)
    write_atomic(bundle.root / SIGNATURES_PATH, signatures_bytes(entries))

    signer = key_id(private_key.public_key())
    warnings = [f"`{args.key}` is readable by other users; `chmod 600 {args.key}`"] if too_open(args.key) else []
    warnings += [f"dropped the signature by `{e.keyid}`: it binds another manifest or approval" for e in dropped]
    trusted = None
    if trust is not None:
        warnings += _trust_warnings(trust, approval, signer, manifest.pact_id)
        trusted = trusted_signers(
            entries,
            trust,
            pact_id=manifest.pact_id,
            manifest_hash=manifest.hash,
            approval_hash=approval.hash,
            now=now,
        )
    for warning in warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if args.format == "json":
        doc = {
            "bundle": str(bundle.root),
            "pact": {"id": manifest.pact_id, "version": manifest.pact_version},
            "manifest_hash": manifest.hash,
            "approval_hash": approval.hash,
            "keyid": signer,
            "expires": format_time(expires),
            "signatures": [e.keyid for e in entries],
            "trusted_signatures": trusted,
            "threshold": trust.threshold if trust is not None else None,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    sys.stdout.write(
        f"signed {manifest.pact_id} {manifest.pact_version}\n"
        f"  manifest  {manifest.hash}\n"
        f"  approval  {approval.hash} (candidate {approval.candidate_hash}, approved by {approval.approver})\n"
        f"  key       {signer}  expires {format_time(expires)}\n"
        f"{bundle.root / SIGNATURES_PATH}: {len(entries)} signature(s)"
    )
    if trust is not None and trusted is not None:
        sys.stdout.write(f"; {len(trusted)} trusted of threshold {trust.threshold} in {args.trust}")
    sys.stdout.write("\n")
    return 0
