#!/usr/bin/env bash
# mypy sees the source rooms under the import names they install as
# (pactwright.compiler for compiler/, ...), through a tree of symlinks; then the
# benchmark scripts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
stage="$root/build/typecheck"
rm -rf "$stage" && mkdir -p "$stage/pactwright"
for entry in "$root"/pactwright/*; do ln -s "$entry" "$stage/pactwright/$(basename "$entry")"; done
for room in compiler verifier runtime templates gate service; do ln -s "$root/$room" "$stage/pactwright/$room"; done
cd "$stage"
"${PYTHON:-python}" -m mypy --config-file "$root/pyproject.toml" -p pactwright "$@"
# The benchmarks import the package as users do; checked apart, as scripts.
"${PYTHON:-python}" -m mypy --config-file "$root/pyproject.toml" "$root"/bench/*.py
