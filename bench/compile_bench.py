"""Compile benchmark: compile time of each reference policy and of a generated
policy with 500 transitions, and the ratio of compile time to check time on
the same policy, measured in the same process.

Run: `python bench/compile_bench.py`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate import large_policy

POLICIES = Path(__file__).resolve().parent.parent / "policies"


def _best(fn: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _measure(label: str, text: str) -> None:
    result = check_text(text)
    assert result.candidate is not None, result.diagnostics[:3]
    candidate, source_map = result.candidate, result.source_map
    check = _best(lambda: check_text(text))
    compile_time = _best(lambda: compile_candidate(candidate, source_map, f"{label}.pact"))
    files = compile_candidate(candidate, source_map, f"{label}.pact")
    size = sum(len(data) for data in files.values())
    print(
        f"{label:28} check {check * 1000:8.1f} ms  compile {compile_time * 1000:8.1f} ms  "
        f"compile/check {compile_time / check:5.2f}x  ({len(files)} files, {size:,} bytes)"
    )


def main() -> None:
    check_text((POLICIES / "marketplace_milestone.pact").read_text())  # build the grammar once
    for path in sorted(POLICIES.glob("*.pact")):
        _measure(path.stem, path.read_text())
    _measure("generated_500_transitions", large_policy(500))


if __name__ == "__main__":
    main()
