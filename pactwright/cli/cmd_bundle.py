"""`pactwright bundle inspect BUNDLE [--trust trust.json [--store URL]]`: what a bundle is and who vouches for it.

Without `--trust` this describes the bundle as it claims to be (pact,
version, hashes, files, approver, signers, report verdict) and verifies
nothing about who made those claims. With `--trust` it adds the activation
verdict: a dry run of activation's verification core, and with `--store`
the version check against the active version too, read-only. Exit 0 when
the bundle could be described (and, with `--trust`, would activate); 1 when
activation would refuse it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pactwright.errors import ActivationError, PactwrightError


def register(parser: argparse.ArgumentParser) -> None:
    from pactwright.cli.cmd_activate import add_limit_options

    sub = parser.add_subparsers(dest="bundle_command", metavar="ACTION", required=True)
    inspect = sub.add_parser("inspect", help="describe a bundle; with --trust, dry-run activation")
    inspect.add_argument("bundle", metavar="BUNDLE", help="bundle directory")
    inspect.add_argument("--trust", metavar="TRUST.json", help="dry-run activation against this trust file")
    inspect.add_argument("--store", metavar="URL", help="with --trust: include the version check (read-only)")
    inspect.add_argument("--now", metavar="DATE", help="trusted time for expiry (default: UTC now)")
    add_limit_options(inspect)
    inspect.add_argument("--format", choices=("text", "json"), default="text")


def _json(files: dict[str, bytes], path: str) -> Any:
    from pactwright.canonical import load_json

    if path not in files:
        return None
    try:
        return load_json(files[path])
    except PactwrightError:
        return None


def _get(doc: Any, *keys: str) -> Any:
    for key in keys:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def describe(files: dict[str, bytes]) -> dict[str, Any]:
    """What the bundle claims, read leniently: a field that is missing or malformed shows as null."""
    from pactwright.canonical import hash_bytes

    manifest = _json(files, "manifest.json")
    approval = _json(files, "approval.json")
    signatures = _get(_json(files, "signatures.json"), "signatures")
    report_path = _get(manifest, "report", "path")
    artifacts = _get(manifest, "artifacts")
    return {
        "pact": {"id": _get(manifest, "pact", "id"), "version": _get(manifest, "pact", "version")},
        "compiler": _get(manifest, "compiler"),
        "candidate_hash": _get(manifest, "candidate_hash"),
        "manifest_hash": hash_bytes(files["manifest.json"]) if "manifest.json" in files else None,
        "files": [
            {"path": _get(a, "path"), "size": _get(a, "size"), "sha256": _get(a, "sha256")}
            for a in (artifacts if isinstance(artifacts, list) else [])
        ],
        "approval": {
            "approver": _get(approval, "statement", "approver"),
            "keyid": _get(approval, "statement", "keyid"),
            "candidate_hash": _get(approval, "statement", "candidate_hash"),
        }
        if approval is not None
        else None,
        "signatures": [
            {"keyid": _get(s, "statement", "keyid"), "expires": _get(s, "statement", "expires")}
            for s in (signatures if isinstance(signatures, list) else [])
        ],
        "report": {
            "path": report_path,
            "verdict_in_manifest": _get(manifest, "report", "verdict"),
            "verdict": _get(_json(files, report_path), "verdict") if isinstance(report_path, str) else None,
        },
    }


def _verdict(args: argparse.Namespace, files: dict[str, bytes]) -> dict[str, Any]:
    from pactwright.cli.cmd_activate import now_from, read_trust
    from pactwright.runtime.activation import decide, verify_bundle
    from pactwright.runtime.store import open_store

    try:
        bundle = verify_bundle(files, read_trust(args.trust), now=now_from(args))
        action, previous = "activate", None
        if args.store:
            try:
                store = open_store(args.store, migrate_schema=False)
            except PactwrightError:
                store = None  # no store yet: nothing is active
            if store is not None:
                with store:
                    decision = decide(bundle, store.active(bundle.pact_id))
                action, previous = decision.action, decision.previous and decision.previous.pact_version
    except ActivationError as exc:
        return {"would_activate": False, "error": exc.to_json()}
    return {
        "would_activate": True,
        "action": action,
        "active_version": previous,
        "store_checked": bool(args.store),
        "approved_by": bundle.approver,
        "signed_by": list(bundle.signer_keyids),
    }


def _text(info: dict[str, Any], verdict: dict[str, Any] | None, bundle: str) -> str:
    pact = info["pact"]
    lines = [
        f"{pact['id']} {pact['version']}  ({bundle})",
        f"  candidate  {info['candidate_hash']}",
        f"  manifest   {info['manifest_hash']}",
        f"  compiler   {_get(info, 'compiler', 'name')} {_get(info, 'compiler', 'version')}",
        f"  files      {len(info['files'])} listed",
    ]
    lines += [f"    {f['size']:>8}  {f['path']}  {f['sha256']}" for f in info["files"]]
    approval = info["approval"]
    lines.append(
        f"  approved   by {approval['approver']} ({approval['keyid']})"
        if approval
        else "  approved   (no approval.json)"
    )
    lines += [f"  signed     by {s['keyid']}, expires {s['expires']}" for s in info["signatures"]] or [
        "  signed     (no signatures)"
    ]
    report = info["report"]
    lines.append(f"  report     {report['verdict']} ({report['path']}; manifest says {report['verdict_in_manifest']})")
    if verdict is None:
        lines.append("activation: not checked (pass --trust trust.json to dry-run it)")
    elif not verdict["would_activate"]:
        error = verdict["error"]
        lines.append(f"activation: would be refused: error[{error['code']}]: {error['message']}")
    else:
        scope = "" if verdict["store_checked"] else " (version not checked: pass --store)"
        what = {"activate": "would activate", "unchanged": "already active; activating changes nothing"}
        active = f"; active is {verdict['active_version']}" if verdict["active_version"] else ""
        lines.append(f"activation: {what[verdict['action']]}{active}{scope}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    from pactwright.cli.cmd_activate import limits_from
    from pactwright.errors import UsageError
    from pactwright.runtime.activation import read_bundle

    if args.store and not args.trust:
        raise UsageError("`--store` needs `--trust`: the version check is part of the activation dry run")
    try:
        files = read_bundle(args.bundle, limits_from(args))
    except ActivationError as exc:
        # The reader refused before reading: there is nothing safe to describe.
        sys.stderr.write(f"error[{exc.code}]: cannot inspect `{args.bundle}`: {exc.message}\n")
        return 1
    info = describe(files)
    verdict = _verdict(args, files) if args.trust else None
    if args.format == "json":
        sys.stdout.write(json.dumps({**info, "activation": verdict}, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(_text(info, verdict, args.bundle))
    return 1 if verdict is not None and not verdict["would_activate"] else 0
