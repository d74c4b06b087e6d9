"""`pactwright compile FILE -o DIR`: a checked policy into a byte-stable bundle."""

from __future__ import annotations

import argparse
import json
import sys


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="policy file (.pact)")
    parser.add_argument("-o", "--output", required=True, metavar="DIR", help="bundle directory to write")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.canonical import hash_bytes
    from pactwright.cli._inputs import read_policy
    from pactwright.compiler.bundle import compile_candidate, write_bundle
    from pactwright.manifest import MANIFEST_PATH

    result = read_policy(args.file)
    files = compile_candidate(result.candidate, result.source_map, args.file)
    target = write_bundle(files, args.output)
    manifest_hash = hash_bytes(files[MANIFEST_PATH])
    if args.format == "json":
        out = {
            "bundle": str(target),
            "candidate_hash": result.candidate.hash(),
            "manifest_hash": manifest_hash,
            "artifacts": sorted(files),
        }
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"compiled {args.file} -> {target}/ ({len(files)} files)\n"
            f"  candidate {result.candidate.hash()}\n  manifest  {manifest_hash}\n"
        )
    return 0
