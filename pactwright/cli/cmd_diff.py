"""`pactwright diff OLD NEW`: the semantic difference of two policies or bundles.

Exit 0 by default, whatever changed; `--exit-code` exits 1 on any change and
`--fail-on-downgrade` on any flagged safety downgrade, so CI can hold a pull
request that weakens a protection for a reviewer. `--format markdown` is the
form a pull-request comment shows (compiler/diff_markdown.py).
"""

from __future__ import annotations

import argparse
import json
import sys


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="OLD", help="policy file or bundle directory")
    parser.add_argument("new", metavar="NEW", help="policy file or bundle directory")
    parser.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    parser.add_argument("--exit-code", action="store_true", help="exit 1 when there are semantic changes")
    parser.add_argument(
        "--fail-on-downgrade",
        action="store_true",
        help="exit 1 when a safety downgrade is flagged (level downgrade or review)",
    )


def run(args: argparse.Namespace) -> int:
    from pactwright.canonical import hash_document
    from pactwright.cli._inputs import load_candidate_json
    from pactwright.compiler.semantic_diff import render_diff_text, semantic_diff

    old = load_candidate_json(args.old)
    new = load_candidate_json(args.new)
    diff = semantic_diff(old, new)
    diff["old"]["candidate_hash"] = hash_document(old)
    diff["new"]["candidate_hash"] = hash_document(new)
    if args.format == "json":
        sys.stdout.write(json.dumps(diff, indent=2) + "\n")
    elif args.format == "markdown":
        from pactwright.compiler.diff_markdown import render_diff_markdown

        sys.stdout.write(render_diff_markdown(diff, args.old, args.new))
    else:
        sys.stdout.write(
            f"--- {args.old}  {diff['old']['candidate_hash']}\n+++ {args.new}  {diff['new']['candidate_hash']}\n"
        )
        sys.stdout.write(render_diff_text(diff))
    if args.exit_code and diff["changes"]:
        return 1
    return 1 if args.fail_on_downgrade and diff["downgrades"] else 0
