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
    from pactwright.canonical import hash_bytes
    from pactwright.cli._inputs import read_policy
    from pactwright.compiler.bundle import compile_candidate, with_manifest, write_bundle
    from pactwright.manifest import MANIFEST_PATH
    from pactwright.verifier.render import report_files
    from pactwright.verifier.render_text import render_summary
    from pactwright.verifier.verify import verify_files

    result = read_policy(args.file)
    files = compile_candidate(result.candidate, result.source_map, args.file)
    options = options_from(args)
    report = verify_files(files, options)
    if options.progress is not None:
        sys.stderr.write("\n")
    rendered = report_files(report)
    files = {path: data for path, data in files.items() if path != MANIFEST_PATH} | rendered
    bundle = with_manifest(
        files,
        result.candidate,
        result.candidate.hash(),
        report={"path": "report.json", "hash": hash_bytes(rendered["report.json"]), "verdict": report["verdict"]},
    )
    target = write_bundle(bundle, args.output)
    sys.stdout.write(render_summary(report, result.candidate.currency.scale, str(target / "report.html")))
    sys.stdout.write(f"bundle: {target}/  manifest {hash_bytes(bundle[MANIFEST_PATH])}\n")
    return exit_code(report, args.strict)
