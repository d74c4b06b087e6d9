"""`pactwright build FILE -o DIR`: check, compile and verify in one, into one bundle.

The report files go into the bundle and the manifest records the report's
hash and verdict, so a signer later vouches for exactly what was verified.
A failing or incomplete verification still writes the bundle (reviewers
read its report) but exits 1; `sign` refuses such a bundle. An incomplete
run passes only with `--allow-incomplete`, which the report records, and
`sign` accepts an incomplete report only then. An approval beside the policy
(`<stem>.approval.json`) is carried into the bundle only if it approves the
candidate just built; a stale one is left behind with a warning.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from pactwright.cli.cmd_verify import add_bound_options, exit_code, options_from

if TYPE_CHECKING:
    from pactwright.cli._build import Built


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="policy file (.pact)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="bundle directory to write")
    add_bound_options(parser)


def _carry_approval(policy: str, built: Built) -> None:
    """Copy the approval beside `policy` into the bundle if it approves the candidate just built.

    The candidate hash is known only once the policy is checked, so the
    approval joins the finished bundle; the manifest never lists it.
    """
    from pactwright._files import write_atomic
    from pactwright.approval import check_current, load_approval, policy_approval_path
    from pactwright.bundle_check import CANDIDATE_PATH
    from pactwright.canonical import hash_bytes
    from pactwright.errors import PactwrightError
    from pactwright.signing import APPROVAL_PATH

    path = policy_approval_path(policy)
    if not path.exists():
        return
    try:
        approval = load_approval(path)
        check_current(approval, hash_bytes(built.files[CANDIDATE_PATH]), str(path))
    except PactwrightError as exc:
        sys.stderr.write(f"warning[{exc.code}]: {exc.message}; it was not copied into the bundle\n")
        if exc.expected is not None:
            sys.stderr.write(f"  expected: {exc.expected}\n  found:    {exc.found}\n")
        return
    write_atomic(built.target / APPROVAL_PATH, approval.data)
    sys.stdout.write(f"approval: {path} (by {approval.approver}) copied into the bundle\n")


def run(args: argparse.Namespace) -> int:
    from pactwright.cli._build import build_bundle
    from pactwright.verifier.render_text import render_summary

    options = options_from(args)
    built = build_bundle(args.file, args.output, options)
    if options.progress is not None:
        sys.stderr.write("\n")
    sys.stdout.write(render_summary(built.report, built.scale, str(built.target / "report.html")))
    sys.stdout.write(f"bundle: {built.target}/  manifest {built.manifest_hash}\n")
    _carry_approval(args.file, built)
    return exit_code(built.report, args.strict)
