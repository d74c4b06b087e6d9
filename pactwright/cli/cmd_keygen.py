"""`pactwright keygen --out NAME`: an ed25519 pair, `NAME.key` (0600) and `NAME.pub`.

Prints the key id (what trust files and statements name) and the paths,
never the private key. Refuses to overwrite either file (exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, metavar="NAME", help="write NAME.key and NAME.pub")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    from pactwright.keys import generate_key_files

    written = generate_key_files(args.out)
    if args.format == "json":
        out = {"keyid": written.keyid, "private_key": str(written.private_path), "public_key": str(written.public_path)}
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
    else:
        sys.stdout.write(f"{written.keyid}\n")
        sys.stderr.write(
            f"wrote {written.private_path} (private, mode 0600: keep it secret) and {written.public_path}\n"
        )
    return 0
