"""`pactwright report`: write the review page of a bundle or of an agreement as one HTML file.

`report BUNDLE_DIR [--source FILE.pact] [--out FILE.html]` renders the
bundle's page (every clause with its source lines, transitions, ledger
programs, verdicts and counterexamples); `report --store URL --agreement ID
[--ledger URL] [--out FILE.html]` the agreement's (path taken, events,
balances, effects, evidence, ledger postings). These are the pages `serve`
answers under `/review/`. Without `--out` the page goes to standard output.
Reads only; the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pactwright.errors import UsageError


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE_DIR", nargs="?", help="bundle directory to review")
    parser.add_argument("--source", metavar="FILE.pact", help="the policy the bundle was built from: show its lines")
    parser.add_argument("--store", metavar="URL", help="with --agreement: the store holding the agreement")
    parser.add_argument("--agreement", metavar="ID", help="review this agreement instead of a bundle")
    parser.add_argument("--ledger", metavar="URL", help="with --agreement: the ledger to compare postings with "
                        "(default: the store's sibling ledger when it exists)")  # fmt: skip
    parser.add_argument("--out", metavar="FILE.html", help="write the page here (default: standard output)")


def _page(args: argparse.Namespace) -> str:
    if args.agreement is None:
        if args.bundle is None or args.store is not None or args.ledger is not None:
            raise UsageError("give a bundle directory, or `--store URL --agreement ID`")
        from pactwright.service.review import render_bundle_page

        return render_bundle_page(Path(args.bundle), None if args.source is None else Path(args.source))
    if args.bundle is not None or args.source is not None or args.store is None:
        raise UsageError("`--agreement ID` needs `--store URL` and takes no bundle directory or `--source`")
    from pactwright.cli._runtime_args import existing_store
    from pactwright.cli.cmd_show import _ledger
    from pactwright.service.review import render_agreement_page

    with existing_store(args.store, args.agreement) as store, _ledger(args) as ledger:
        return render_agreement_page(store, args.agreement, ledger)


def run(args: argparse.Namespace) -> int:
    page = _page(args)
    if args.out is None:
        sys.stdout.write(page)
        return 0
    from pactwright._files import write_atomic

    write_atomic(args.out, page.encode("utf-8"))
    sys.stdout.write(f"review page: {args.out}\n")
    return 0
