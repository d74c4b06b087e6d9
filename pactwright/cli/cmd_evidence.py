"""`pactwright evidence AGREEMENT --store URL` and `pactwright evidence verify AGREEMENT --store URL`.

The first prints what the agreement claims happened, what supports it and
what it does not prove (`pactwright.runtime.evidence`); the second re-walks
its hash chain and exits 1 on any edited, deleted or reordered record,
printing each with its code (PW580-PW588). Both only read. An agreement
named `verify` is shown with `pactwright evidence -- verify`.
"""

from __future__ import annotations

import argparse
import json
import sys

from pactwright.cli._runtime_args import add_store, existing_store


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("words", nargs="+", metavar="[verify] AGREEMENT", help="an agreement id, or `verify` and one")
    add_store(parser)
    parser.add_argument("--head", metavar="HASH", help="verify: the head hash recorded earlier, outside the store")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _write(doc: object) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def run(args: argparse.Namespace) -> int:
    from pactwright.errors import UsageError
    from pactwright.runtime.evidence import evidence, verify_evidence

    words = list(args.words)
    verify = len(words) == 2 and words[0] == "verify"
    if len(words) > 2 or (len(words) == 2 and not verify):
        raise UsageError("use `pactwright evidence AGREEMENT` or `pactwright evidence verify AGREEMENT`")
    if args.head is not None and not verify:
        raise UsageError("`--head` belongs to `pactwright evidence verify`")
    agreement_id = words[-1]
    with existing_store(args.store, agreement_id) as store:
        if verify:
            check = verify_evidence(store, agreement_id, args.head)
            if args.format == "json":
                _write(check.to_json())
            elif check.ok:
                sys.stdout.write(f"evidence of {agreement_id} verifies: {check.count} records, head {check.head}\n")
            else:
                sys.stdout.write(f"evidence of {agreement_id} does NOT verify ({len(check.problems)} problems):\n")
                for problem in check.problems:
                    sys.stdout.write(f"  error[{problem.code}]: {problem.message}\n")
            return 0 if check.ok else 1
        report = evidence(store, agreement_id)
    if args.format == "json":
        _write(report.to_json())
    else:
        sys.stdout.write(report.text())
    return 0 if report.chain.ok else 1
