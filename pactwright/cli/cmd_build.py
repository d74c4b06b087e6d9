"""`pactwright build FILE -o DIR`: check, compile and verify in one, into one bundle.

The report files go into the bundle and the manifest records the report's
hash and verdict, so a signer later vouches for exactly what was verified.
A failing verification still writes the bundle (reviewers read its report)
but exits 1; `sign` refuses such a bundle.
"""

from __future__ import annotations

import argparse
import sys

from pactwright.cli.cmd_verify import add_bound_options, exit_code, options_from


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="policy file (.pact)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="bundle directory to write")
    add_bound_options(parser)


def run(args: argparse.Namespace) -> int:
    from pactwright.cli._build import build_bundle
    from pactwright.verifier.render_text import render_summary

    options = options_from(args)
    built = build_bundle(args.file, args.output, options)
    if options.progress is not None:
        sys.stderr.write("\n")
    sys.stdout.write(render_summary(built.report, built.scale, str(built.target / "report.html")))
    sys.stdout.write(f"bundle: {built.target}/  manifest {built.manifest_hash}\n")
    return exit_code(built.report, args.strict)
