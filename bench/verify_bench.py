"""Verifier benchmark: explorer speed against a hand-specialised search, and default-flag verify times.

1. Explorer. `policies/marketplace_milestone.pact` with N agreements (default
   5: with the price a symbol, one agreement has 38 states, and five give
   850,668, the scale at which the search loop, not set-up, is measured; at 3
   agreements the whole run is 10k states in a few hundredths of a second)
   is explored by the verifier's explorer and by the hand-specialised
   breadth-first search of `_milestone_bfs.py` (packed states, one pass, a
   precomputed move table). Both must find the same number of distinct
   states and transitions, else the bench exits 1 (a differential check);
   states per second of both and their ratio are printed (target: the
   explorer at >= 0.5x the baseline).
2. Policies. Every policy in `policies/` and `tests/planted/` is verified in
   process with the default flags (mutants and proofs on, `--jobs` = the
   number of cores) and, as a baseline measured in the same run, with
   `--no-mutants --no-proofs`; each time, the ratio, and the slowest are
   printed (target: each under 5 s on a 2-core machine).

Run: `python bench/verify_bench.py` (both parts, a few minutes), or
`python bench/verify_bench.py --quick` (the explorer once, `policies/` only).
Times are wall-clock on a shared machine: compare runs on the same machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import load_model
from pactwright.verifier.verify import VerifyOptions, verify_files

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _milestone_bfs

ROOT = Path(__file__).resolve().parent.parent
MILESTONE = ROOT / "policies" / "marketplace_milestone.pact"
TARGET_RATIO = 0.5
TARGET_SECONDS = 5.0


def _files(path: Path) -> dict[str, bytes]:
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None, f"{path}: {result.diagnostics}"
    return compile_candidate(result.candidate, result.source_map, path.name)


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best wall time of `repeat` runs, and the last result."""
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def _verify(files: dict[str, bytes], options: VerifyOptions) -> tuple[float, Any]:
    """Wall time of one in-process verification, and its report."""
    start = time.perf_counter()
    report = verify_files(files, options)
    return time.perf_counter() - start, report


def explorer_part(agreements: int, repeat: int) -> bool:
    """Explorer against the hand-specialised search; False when their counts differ."""
    model = load_model(load_json(_files(MILESTONE)["model.json"]))
    bounds = Bounds(agreements=agreements, faults=1, max_depth=1000, max_states=50_000_000)
    ours, result = _best(lambda: Explorer(model, bounds).explore(), repeat)

    def hand() -> tuple[int, int]:
        succ, start = _milestone_bfs.local_graph()
        return _milestone_bfs.search(agreements, succ, start)

    theirs, (hand_states, hand_edges) = _best(hand, repeat)
    states, edges = len(result.states), result.edges
    ours_rate, hand_rate = states / ours, hand_states / theirs
    print(f"explorer: {MILESTONE.name}, {agreements} agreements, fault budget 1, best of {repeat}")
    for label, count, moves, seconds in (
        ("pactwright explorer ", states, edges, ours),
        ("hand-specialised BFS", hand_states, hand_edges, theirs),
    ):
        rate = count / seconds
        print(f"  {label}: {count:>10,} states, {moves:>11,} transitions, {seconds:7.3f} s, {rate:>11,.0f} states/s")
    ratio = ours_rate / hand_rate
    verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
    print(f"  explorer speed relative to the baseline: {ratio:.2f}x (target >= {TARGET_RATIO}x: {verdict})")
    if (states, edges) != (hand_states, hand_edges) or not result.exhausted:
        print(
            f"  MISMATCH: explorer {states} states / {edges} transitions (exhausted {result.exhausted}), "
            f"baseline {hand_states} / {hand_edges}"
        )
        return False
    print("  state and transition counts agree")
    return True


def policies_part(paths: list[Path], jobs: int, compare_jobs: bool) -> None:
    """Default-flag verification time of each policy, against `--no-mutants --no-proofs` in the same run."""
    print(f"\npolicies: default flags (mutants and proofs on, --jobs {jobs}) vs --no-mutants --no-proofs")
    header = f"  {'policy':<48} {'default':>8} {'baseline':>9} {'ratio':>7}"
    print(header + (f" {'--jobs 1':>9}" if compare_jobs else "") + "  verdict")
    rows: list[tuple[float, str]] = []
    for path in paths:
        name = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
        checked = check_bytes(path.read_bytes())
        if checked.candidate is None:
            print(f"  {name:<48} skipped: the policy does not check ({checked.diagnostics[0].code})")
            continue
        files = compile_candidate(checked.candidate, checked.source_map, path.name)
        base, _ = _verify(files, VerifyOptions(Bounds(), mutants=False, proofs=False))
        full, report = _verify(files, VerifyOptions(Bounds(), jobs=jobs))
        line = f"  {name:<48} {full:7.2f}s {base:8.2f}s {full / max(base, 1e-6):6.1f}x"
        if compare_jobs:
            single, _ = _verify(files, VerifyOptions(Bounds(), jobs=1))
            line += f" {single:8.2f}s"
        print(f"{line}  {report['verdict']}", flush=True)
        rows.append((full, name))
    if not rows:
        return
    slowest, name = max(rows)
    over = [n for t, n in rows if t >= TARGET_SECONDS]
    total = sum(t for t, _ in rows)
    print(f"  slowest: {name} {slowest:.2f} s; total {total:.2f} s over {len(rows)} policies")
    print(f"  target each < {TARGET_SECONDS:.0f} s: {'met' if not over else 'NOT met by ' + ', '.join(over)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agreements", type=int, default=5, help="agreements for the explorer part (default 5)")
    parser.add_argument("--repeat", type=int, default=2, help="explorer runs, best time kept (default 2)")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="--jobs for verification (default: cores)"
    )
    parser.add_argument("--quick", action="store_true", help="explorer once, policies/ only")
    parser.add_argument("--only", choices=("explorer", "policies"), help="run one part")
    parser.add_argument("--compare-jobs", action="store_true", help="also time each policy with --jobs 1")
    parser.add_argument(
        "policies", nargs="*", type=Path, help="policies to time (default: policies/ and tests/planted/)"
    )
    args = parser.parse_args(argv)
    ok = True
    if args.only in (None, "explorer"):
        ok = explorer_part(args.agreements, 1 if args.quick else args.repeat)
    if args.only in (None, "policies"):
        paths = [p.resolve() for p in args.policies] or sorted((ROOT / "policies").glob("*.pact"))
        if not args.policies and not args.quick:
            paths += sorted((ROOT / "tests" / "planted").glob("*.pact"))
        policies_part(paths, args.jobs, args.compare_jobs)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
