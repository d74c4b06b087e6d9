"""The verifier's cost grows with the policy, not exponentially with its params.

A payroll batch has N ranged `line_...` params summed in a guard (`line_001 +
... == total`) and in a transfer of the same sum. Each ranged param is one
symbol, yet the model loader once built the product of every param's
boundary samples (five each): 5^(N+1) tuples, 13.7 s and 700 MB at N = 8 and
an out-of-memory kill at N = 101. Here batches of 12 and 24 lines verify with
mutants and proofs in a few seconds, the invariant `balance(payroll) <=
total` is proved, and two planted mistakes (a guard that lets the sum exceed
the total by one cent, a transfer that pays one line twice) fail with a
replayed counterexample at the smallest witness values. A batch of 101
lines runs in a child process under an address-space limit and must finish
within 20 s and 1.5 GB of peak RSS.

What stays exponential is bounded: every combination of text param samples
is an initial state, and past `--max-states` only the first ones are
searched, the run is incomplete (never a pass by the search) and a warning
says why. The combinations are decoded from an index, never listed, in the
order a listed product had (so reports did not change).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_text
from pactwright.verifier._choices import Choices, initial_count
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import load_model
from pactwright.verifier.verify import VerifyOptions, verify_files

REPO = Path(__file__).resolve().parents[1]
LINE_MAX = 250000  # 2500.00 in minor units


def _names(n: int) -> list[str]:
    return [f"line_{i:03d}" for i in range(1, n + 1)]


def _sum(terms: list[str]) -> str:
    return " + ".join(terms)


def _batch(n: int, guard: str = "== total", paid: list[str] | None = None) -> str:
    """The payroll batch: N lines summed in the guard of `approve` and paid by `pay`."""
    names = _names(n)
    params = "\n".join(f"param {name}: money between 0.00 and 2500.00" for name in names)
    return f"""pact "payroll.batch" version "1.0.0"
currency EUR scale 2

role treasurer
role approver

param total: money between 0.00 and 250000.00
{params}

account treasury "treasury:main" external
account payroll "payroll:{{agreement}}"

state draft initial
state approved
state paid final

clause "1" transition approve: draft -> approved {{
  by approver
  when {_sum(names)} {guard}
}}

clause "2" transition pay: approved -> paid {{
  by treasurer
  transfer {_sum(paid if paid is not None else names)} from treasury to payroll
}}

clause "3" invariant batch_within_total: balance(payroll) <= total
"""


def _files(source: str) -> dict[str, bytes]:
    result = check_text(source)
    assert result.candidate is not None, result.diagnostics
    return compile_candidate(result.candidate, result.source_map, "batch.pact")


def _verify(source: str, **bounds: Any) -> tuple[dict[str, Any], float]:
    files = _files(source)
    started = time.perf_counter()
    report = verify_files(files, VerifyOptions(Bounds(**bounds), mutants=True, proofs=True, jobs=1))
    return report, time.perf_counter() - started


def _invariant(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(entry for entry in report["invariants"] if entry["name"] == name)


def _minor(text: str) -> int:
    whole, _, cents = text.partition(".")
    return int(whole) * 100 + int(cents or 0)


@pytest.mark.parametrize("n", [12, 24])
def test_a_wide_batch_is_proved_in_seconds(n: int) -> None:
    report, seconds = _verify(_batch(n))
    assert seconds < 10, f"{n} lines took {seconds:.1f} s"
    assert report["verdict"] == "pass" and report["complete"] is True
    assert report["exploration"]["exhausted"] is True
    entry = _invariant(report, "batch_within_total")
    assert entry["verdict"] == "proved", entry
    assert report["exploration"]["symbolic_params"] == [*_names(n), "total"]  # the model sorts params by name
    assert not report["counterexamples"]


@pytest.mark.parametrize(
    ("planted", "n"),
    [("slack", 24), ("paid_twice", 24), ("slack", 101)],
)
def test_a_planted_batch_fails_at_the_smallest_values(planted: str, n: int) -> None:
    """One cent of slack in the guard, or a line paid twice: violated, with the lowest witness
    (each param pulled to its least value in the model's order) replayed through the ledger."""
    names = _names(n)
    if planted == "slack":
        source = _batch(n, guard="<= total + 0.01")
        # total = 0 and every line 0 but the last, which carries the one cent the guard lets through
        expected = {"total": 0, **dict.fromkeys(names, 0), names[-1]: 1}
    else:
        source = _batch(n, paid=[*names, names[0]])
        # line_001 is paid twice: it must be above 0; the last line makes the sum equal the total
        expected = {"total": 1, **dict.fromkeys(names, 0), names[0]: 1}
    report, seconds = _verify(source)
    assert seconds < 15, f"{planted} with {n} lines took {seconds:.1f} s"
    assert report["verdict"] == "fail"
    assert _invariant(report, "batch_within_total")["verdict"] == "violated"
    counterexample = next(cx for cx in report["counterexamples"] if "batch_within_total" in cx["invariants"])
    assert [event["command"] for event in counterexample["events"] if event["kind"] == "command"] == ["approve", "pay"]
    shown = counterexample["params"][0]
    assert {name: _minor(value) for name, value in shown.items() if name in expected} == expected


def test_a_hundred_and_one_lines_finish_within_time_and_memory(tmp_path: Path) -> None:
    """In a child process under a 4 GB address-space limit, so a regression fails here
    instead of taking the machine down; its peak RSS is read with getrusage in the child."""
    policy = tmp_path / "batch.pact"
    policy.write_text(_batch(101), "utf-8")
    child = (
        "import json, resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "from pactwright.cli.main import main\n"
        "try:\n"
        "    code = main(['verify', sys.argv[1], '--format', 'json'])\n"
        "finally:\n"
        "    peak = max(resource.getrusage(r).ru_maxrss for r in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
        "    print(json.dumps({'peak_kb': peak}), file=sys.stderr)\n"
        "sys.exit(code)\n"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", child, str(policy)], capture_output=True, text=True, timeout=60, check=False
    )
    seconds = time.perf_counter() - started
    assert "Traceback" not in done.stderr, done.stderr
    peak_kb = json.loads(done.stderr.strip().splitlines()[-1])["peak_kb"]
    report = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert report["verdict"] == "pass"
    assert _invariant(report, "batch_within_total")["verdict"] == "proved"
    assert seconds < 20, f"101 lines took {seconds:.1f} s"
    assert peak_kb < 1_500_000, f"peak RSS {peak_kb:,} KB"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0  # the measure is a real one on this OS


def _texts(n: int, cap: str = "100.00") -> str:
    """N text params of three options each, all read by one guard: 3^N initial states."""
    params = "\n".join(f"param k_{i:03d}: one of aa, bb, cc" for i in range(1, n + 1))
    guard = " and ".join(f"k_{i:03d} == aa" for i in range(1, n + 1))
    return f"""pact "text.batch" version "1.0.0"
currency EUR scale 2
role approver
param amount: money between 0.00 and 100.00
{params}
account treasury "treasury:main" external
account payroll "payroll:{{agreement}}"
state draft initial
state paid final
transition pay: draft -> paid {{
  by approver
  when {guard}
  transfer amount from treasury to payroll
}}
invariant within: balance(payroll) <= {cap}
"""


def test_too_many_text_combinations_are_incomplete_with_the_reason() -> None:
    """3^40 combinations: the search starts from the first `max_states` only, says so, and
    the run is incomplete; it neither lists the combinations nor passes."""
    files = _files(_texts(40))
    started = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    options = VerifyOptions(Bounds(max_states=2000), mutants=False, proofs=False)
    report = verify_files(files, options)
    assert time.perf_counter() - started < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 300_000  # KB: nothing listed
    assert report["verdict"] == "incomplete" and report["complete"] is False
    assert report["exploration"]["bound_hit"] == "max_states"
    assert report["exploration"]["initial_states"] == 1000  # half the bound: room for their successors
    warning = next(w for w in report["warnings"] if "combinations of values" in w)
    assert f"{3**40:,} combinations" in warning and "--max-states N" in warning
    assert _invariant(report, "within")["verdict"] != "proved"


def test_a_violation_among_the_searched_combinations_still_fails() -> None:
    """A bound on the starts hides nothing it searched: `amount` up to 100.00 breaks a cap of
    99.99 from the first combination (every param `aa`), so the run fails with a counterexample."""
    report = verify_files(
        _files(_texts(30, "99.99")), VerifyOptions(Bounds(max_states=500), mutants=False, proofs=False)
    )
    assert report["verdict"] == "fail"
    assert _invariant(report, "within")["verdict"] == "violated"
    assert report["counterexamples"]


def test_choices_decode_in_product_order() -> None:
    lists: list[tuple[Any, ...]] = [("a", "b"), (1,), ("x", "y", "z"), (True, False)]
    choices = Choices(lists)
    assert choices.size == 12
    assert [choices[i] for i in range(choices.size)] == list(product(*lists))
    with pytest.raises(IndexError):
        choices[12]
    assert Choices([("a",)] * 3).size == 1 and Choices([("a", "b"), ()]).size == 0
    assert [initial_count(5, k) for k in (1, 2, 3)] == [5, 15, 35]


@pytest.mark.parametrize("agreements", [1, 2, 3])
def test_initial_states_are_the_sorted_multisets_of_combinations(agreements: int) -> None:
    """The lazily listed starts are the ones the listed product gave: every multiset of
    combinations once, sorted; a limit keeps a prefix of that order."""
    explorer = Explorer(load_model(json.loads(_files(_texts(2))["model.json"])), Bounds(agreements=agreements))
    width = explorer.layout.width
    starts = explorer.initial_states()
    assert len(starts) == explorer.initial_count() == initial_count(9, agreements)
    assert starts == sorted(set(starts))
    chosen = {tuple(sorted(s[1 + k * width + 1] for k in range(agreements))) for s in starts}
    assert chosen == {tuple(sorted(c)) for c in product(range(9), repeat=agreements)}
    assert explorer.initial_states(limit=4) == starts[:4]
