"""Parse benchmark: `check` of a large generated policy against lark's bare parse.

Prints, for the same text in the same process: lark's bare LALR parse time,
the full `check` time (parse + syntax tree + checks + candidate + hash), the
ratio between them (target: within 3x), and lines per second. Also times
`pactwright check` on a reference policy in a fresh process (start-up
included; target under 0.3 s). Run: `python bench/parse_bench.py [TRANSITIONS]`.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

from pactwright.compiler.parser import bare_parser
from pactwright.compiler.pipeline import check_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import large_policy


def _best(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    transitions = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    text = large_policy(transitions)
    lines = text.count("\n")
    parser = bare_parser()
    check_text(text)  # warm caches (grammar build) outside the timings
    bare = _best(lambda: parser.parse(text), 3)
    full = _best(lambda: check_text(text), 3)
    result = check_text(text)
    assert result.ok, result.diagnostics[:3]
    print(f"policy: {lines} lines, {len(text)} bytes, {transitions} transitions")
    print(f"lark bare parse : {bare * 1000:8.1f} ms")
    print(f"pactwright check: {full * 1000:8.1f} ms   ({lines / full:,.0f} lines/s)")
    print(f"ratio check / bare parse: {full / bare:.2f}x (target <= 3x)")
    reference = Path(__file__).resolve().parent.parent / "policies" / "marketplace_milestone.pact"
    cli = [sys.executable, "-m", "pactwright.cli.main", "check", str(reference)]
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(cli, check=True, capture_output=True)
        runs.append(time.perf_counter() - start)
    median = statistics.median(runs) * 1000
    print(f"`pactwright check` on a reference policy, fresh process: median {median:.0f} ms (target < 300 ms)")


if __name__ == "__main__":
    main()
