"""`pactwright activate BUNDLE --trust trust.json --store URL`: verify a signed bundle, then make it active.

The bundle is read and verified completely before the store is opened, so
a refused bundle never touches the store (not even to create it). This
command imports the runtime and the kernel only: a deploy host needs no
compiler, verifier, lark, jinja2, networkx or z3 (tests check it).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pactwright.errors import ActivationError, PactwrightError, StoreError, UsageError

_DEFAULT_FILE_BYTES = 16 * 1024 * 1024
_DEFAULT_TOTAL_BYTES = 64 * 1024 * 1024


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="signed bundle directory")
    parser.add_argument("--trust", required=True, metavar="TRUST.json", help="trusted keys, roles and threshold")
    parser.add_argument("--store", required=True, metavar="URL", help="SQLite file path or postgresql:// URL")
    parser.add_argument("--force-rollback", action="store_true", help="allow a lower or equal version (needs --reason)")
    parser.add_argument("--reason", metavar="TEXT", help="why the rollback is forced (recorded in the store)")
    parser.add_argument("--now", metavar="DATE", help="trusted time for expiry and the record (default: UTC now)")
    add_limit_options(parser)
    parser.add_argument("--format", choices=("text", "json"), default="text")


def add_limit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-file-bytes", type=int, default=_DEFAULT_FILE_BYTES, metavar="N")
    parser.add_argument("--max-total-bytes", type=int, default=_DEFAULT_TOTAL_BYTES, metavar="N")


def limits_from(args: argparse.Namespace) -> Any:
    from pactwright.runtime.activation import Limits

    if args.max_file_bytes < 1 or args.max_total_bytes < 1:
        raise UsageError("`--max-file-bytes` and `--max-total-bytes` must be positive")
    return Limits(max_file_bytes=args.max_file_bytes, max_total_bytes=args.max_total_bytes)


def now_from(args: argparse.Namespace) -> Any:
    """`--now` (a date, or RFC 3339 with an offset), else the host's UTC clock."""
    from pactwright.bundle_signing import parse_time
    from pactwright.runtime.activation import SystemClock

    if args.now is None:
        return SystemClock().now()
    try:
        return parse_time(args.now, "--now").replace(microsecond=0)
    except UsageError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None  # a usage error (PW001), not an expiry (PW418)


def read_trust(path: str) -> bytes:
    from pathlib import Path

    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read trust file `{path}`: {exc.strerror or exc}") from None


def still_active(url: str, pact_id: str) -> str:
    """`nothing was changed in the store (...)`, read without creating or migrating the store."""
    from pactwright.runtime.store import open_store

    try:
        with open_store(url, migrate_schema=False) as store:
            active = store.active(pact_id)
    except UsageError:
        return f"nothing was changed in the store (no version of {pact_id} is active)"  # no store yet
    except PactwrightError as exc:
        return f"nothing was changed in the store (which itself fails verification: error[{exc.code}])"
    if active is None:
        return f"nothing was changed in the store (no version of {pact_id} is active)"
    return f"nothing was changed in the store (active version is still {active.pact_version})"


def _refused(args: argparse.Namespace, exc: ActivationError | StoreError) -> int:
    pact = getattr(exc, "pact", None)
    target = f"{pact[0]} {pact[1]}" if pact else f"bundle `{args.bundle}`"
    unchanged = still_active(args.store, pact[0]) if pact else "nothing was changed in the store"
    if args.format == "json":
        out = {"status": "refused", "error": exc.to_json(), "store": unchanged}
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
        return 1
    from pactwright.runtime.activation import Refusal

    lines = [f"error[{exc.code}]: refused to activate {target}: {exc.message}"]
    if isinstance(exc, Refusal):
        lines += exc.detail_lines()
    elif exc.expected is not None or exc.found is not None:
        lines += [f"  expected: {exc.expected}", f"  found:    {exc.found}"]
    if exc.hint:
        lines.append(f"help: {exc.hint}")
    lines.append(unchanged)
    sys.stderr.write("\n".join(lines) + "\n")
    return 1


def run(args: argparse.Namespace) -> int:
    from pactwright.runtime.activation import activate, read_bundle, verify_bundle
    from pactwright.runtime.store import open_store

    if args.force_rollback != bool(args.reason and args.reason.strip()):
        raise UsageError("`--force-rollback` and a non-empty `--reason TEXT` go together")
    reason = args.reason.strip() if args.force_rollback else None
    limits = limits_from(args)
    now = now_from(args)
    trust = read_trust(args.trust)
    try:
        bundle = verify_bundle(read_bundle(args.bundle, limits), trust, now=now)
        with open_store(args.store) as store:
            result = activate(store, bundle, force_reason=reason)
    except (ActivationError, StoreError) as exc:
        return _refused(args, exc)
    decision = result.decision
    previous = decision.previous
    if args.format == "json":
        out = {
            "status": "unchanged" if decision.action == "unchanged" else "activated",
            "pact": {"id": bundle.pact_id, "version": bundle.pact_version},
            "manifest_hash": bundle.manifest_hash,
            "previous_version": previous.pact_version if previous else None,
            "forced": decision.forced,
            "reason": reason if decision.forced else None,
            "activation_id": result.activation_id,
            "activated_at": result.activated_at if result.activation_id else None,
            "approved_by": {"name": bundle.approver, "keyid": bundle.approver_keyid},
            "signed_by": list(bundle.signer_keyids),
            "expires": bundle.expires,
        }
        sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")
        return 0
    name = f"{bundle.pact_id} {bundle.pact_version}"
    if decision.action == "unchanged":
        sys.stdout.write(f"{name} is already active with this manifest; nothing was changed\n")
        return 0
    if decision.forced:
        head = f"activated {name} by forced rollback from {previous.pact_version if previous else '?'}"
        head += f"; reason recorded: {json.dumps(reason)}"
    else:
        head = f"activated {name}" + (f" (was {previous.pact_version})" if previous else " (first version)")
    lines = [
        head,
        f"  manifest  {bundle.manifest_hash}",
        f"  approved  by {bundle.approver} ({bundle.approver_keyid})",
        f"  signed    by {', '.join(bundle.signer_keyids)}; expires {bundle.expires}",
        f"  report    {bundle.report_verdict}",
        f"  recorded  activation {result.activation_id} at {result.activated_at}",
    ]
    if args.force_rollback and not decision.forced:
        lines.append("note: --force-rollback was not needed; this is a normal upgrade and is recorded as one")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
