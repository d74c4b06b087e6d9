"""`pactwright approve FILE_OR_BUNDLE --key K.key --approver NAME`: sign one candidate hash.

The approver approves the candidate (what the policy means), not a file: the
hash comes from checking the `.pact` (a policy with blockers is refused) or
from a bundle's `candidate.json`, whose hash must be the manifest's
candidate hash. The command prints the pact id, version and candidate hash
before writing, so the human sees exactly what they approve. The approval
goes into the bundle as `approval.json`, or beside the policy as
`<stem>.approval.json` for `build` to carry; the manifest is never touched.
With a trust file (`--trust`, or `./trust.json`), the key must be the one it
records under the `--approver` name (PW480): nobody approves in another
person's name.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


@dataclass(frozen=True)
class Subject:
    """What is being approved, and where its approval goes by default."""

    pact_id: str
    pact_version: str
    candidate_hash: str
    default_out: Path
    bundle: Path | None = None


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="FILE_OR_BUNDLE", help="a policy (.pact) or a bundle directory")
    parser.add_argument("--key", required=True, metavar="K.key", help="the approver's private key")
    parser.add_argument("--approver", required=True, metavar="NAME", help="who approves (recorded in the approval)")
    parser.add_argument("--out", metavar="PATH", help="where to write the approval (default: see above)")
    parser.add_argument("--trust", metavar="TRUST", help="trust.json whose names the approver must match "
                        "(default: ./trust.json when it exists)")  # fmt: skip
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _from_policy(path: str) -> Subject:
    from pactwright.approval import policy_approval_path
    from pactwright.cli._inputs import read_policy

    candidate = read_policy(path).candidate
    return Subject(candidate.pact.id, candidate.pact.version, candidate.hash(), policy_approval_path(path))


def _from_bundle(directory: Path) -> Subject:
    """The bundle's candidate: `candidate.json` must hash to the manifest's `candidate_hash`.

    `parse_manifest` refuses a manifest whose listing of `candidate.json`
    differs from its `candidate_hash`, and `read_artifact` refuses a file
    that differs from its listing, so the hash approved is the file's.
    """
    from pactwright.bundle_check import CANDIDATE_PATH, PASSING_VERDICT, read_artifact, read_manifest
    from pactwright.canonical import hash_bytes
    from pactwright.signing import APPROVAL_PATH

    manifest = read_manifest(directory)
    listed = next(a for a in manifest.artifacts if a.path == CANDIDATE_PATH)
    candidate_hash = hash_bytes(read_artifact(directory, listed))
    if manifest.report is not None and manifest.report.verdict != PASSING_VERDICT:
        verdict = manifest.report.verdict
        sys.stderr.write(f"warning: this bundle's report verdict is `{verdict}`; `sign` will refuse it\n")
    return Subject(manifest.pact_id, manifest.pact_version, candidate_hash, directory / APPROVAL_PATH, directory)


def _check_name(args: argparse.Namespace, public_key: Ed25519PublicKey) -> None:
    """Refuse (PW480) a key the trust file records under another name than `--approver`, before writing."""
    from pactwright.approval import check_approver_name, check_named_key
    from pactwright.signing import key_id
    from pactwright.trust import DEFAULT_TRUST_PATH, load_trust

    path = args.trust or (DEFAULT_TRUST_PATH if Path(DEFAULT_TRUST_PATH).is_file() else None)
    if path is None:
        return  # nothing to check against here; activation checks the approval against its trust file
    keyid = key_id(public_key)
    if not check_named_key(load_trust(path), keyid, check_approver_name(args.approver), path):
        sys.stderr.write(
            f"warning: `{path}` records no name for key `{keyid}`, so `--approver` is not checked against it; "
            f"record one with `pactwright trust add KEY.pub --role approver --name NAME --file {path}`\n"
        )


def run(args: argparse.Namespace) -> int:
    from pactwright._files import write_atomic
    from pactwright.approval import make_approval
    from pactwright.keys import load_private_key, too_open
    from pactwright.signing import SIGNATURES_PATH

    target = Path(args.target)
    private_key = load_private_key(args.key)
    if too_open(args.key):
        sys.stderr.write(f"warning: `{args.key}` is readable by other users; `chmod 600 {args.key}`\n")
    subject = _from_bundle(target) if target.is_dir() else _from_policy(args.target)
    _check_name(args, private_key.public_key())
    approval = make_approval(
        private_key,
        pact_id=subject.pact_id,
        pact_version=subject.pact_version,
        candidate_hash=subject.candidate_hash,
        approver=args.approver,
    )
    out = Path(args.out) if args.out else subject.default_out
    previous = out.read_bytes() if out.is_file() else None
    write_atomic(out, approval.data)
    if subject.bundle is not None and previous != approval.data and (subject.bundle / SIGNATURES_PATH).exists():
        sys.stderr.write(
            f"warning: `{subject.bundle / SIGNATURES_PATH}` binds the previous approval; "
            "those signatures no longer count until the bundle is signed again\n"
        )
    if args.format == "json":
        doc = {
            "approval": str(out),
            "approval_hash": approval.hash,
            "pact": {"id": subject.pact_id, "version": subject.pact_version},
            "candidate_hash": subject.candidate_hash,
            "approver": approval.approver,
            "keyid": approval.keyid,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"approved {subject.pact_id} {subject.pact_version}\n"
            f"  candidate {subject.candidate_hash}\n"
            f"  approver  {approval.approver}  key {approval.keyid}\n"
            f"wrote {out}\n"
        )
    return 0
