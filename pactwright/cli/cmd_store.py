"""`pactwright store verify --store URL [--trust trust.json]`: re-verify everything the store holds.

Loads re-verify bytes one bundle at a time as the runtime uses them; this
checks every stored bundle, activation record and active pointer at once,
reports every problem (not just the first), and exits 1 if there is any.
With `--trust`, each active bundle also goes through activation's
verification core again (signatures, approval, report), at the time it was
activated: the check that catches a store rewritten consistently by someone
without the signers' keys, or a bundle signed by a key revoked since.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="store_command", metavar="ACTION", required=True)
    verify = sub.add_parser("verify", help="re-hash every stored bundle; exit 1 on tampering")
    verify.add_argument("--store", required=True, metavar="URL", help="SQLite file path or postgresql:// URL")
    verify.add_argument("--trust", metavar="TRUST.json", help="also re-verify active bundles' signatures and approval")
    verify.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.bundle_signing import parse_expires
    from pactwright.cli.cmd_activate import read_trust
    from pactwright.errors import ActivationError
    from pactwright.runtime.activation import Refusal, verify_bundle
    from pactwright.runtime.store import Finding, open_store

    trust = read_trust(args.trust) if args.trust else None
    with open_store(args.store, migrate_schema=False) as store:
        findings = store.verify_all()
        actives = store.actives() if store.schema_version() else []
        history = store.history() if store.schema_version() else []
        broken = {f.subject for f in findings}
        if trust is not None:
            for active in actives:
                if f"active version of {active.pact_id}" in broken:
                    continue
                stored = store.load_active(active.pact_id)
                subject = f"active version of {active.pact_id}"
                try:
                    when = parse_expires(stored.activation.activated_at)
                except ActivationError:
                    findings.append(Finding("PW707", "the recorded activation time is not an RFC 3339 time", subject))
                    continue
                try:
                    verify_bundle(stored.files, trust, now=when)
                except Refusal as exc:
                    message = f"no longer passes activation: error[{exc.code}]: {exc.message}"
                    findings.append(Finding("PW708", message, subject))
    if args.format == "json":
        out = {
            "ok": not findings,
            "active": [
                {"pact_id": a.pact_id, "version": a.pact_version, "manifest_hash": a.manifest_hash} for a in actives
            ],
            "activations": len(history),
            "findings": [{"code": f.code, "subject": f.subject, "message": f.message} for f in findings],
        }
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
        return 1 if findings else 0
    for finding in findings:
        sys.stderr.write(f"error[{finding.code}]: {finding.subject}: {finding.message}\n")
    failed = {f.subject for f in findings}
    for active in actives:
        if f"active version of {active.pact_id}" not in failed:
            sys.stdout.write(f"ok  {active.pact_id} {active.pact_version}  {active.manifest_hash}\n")
    checked = "bytes, signatures and approvals" if trust is not None else "bytes"
    summary = f"store {store.backend}: {len(actives)} active, {len(history)} activation(s); {checked} re-verified"
    sys.stdout.write(f"{summary}: {len(findings)} problem(s)\n" if findings else f"{summary}: ok\n")
    return 1 if findings else 0
