"""The explorer: its fast cached search agrees with the plain definition of the model.

`Explorer.successors` is the model's definition over flat states; `explore`
is the optimized search over interned agreement blocks. A naive BFS over
`successors` must reach exactly the same states (up to agreement order),
with the same shortest violation depths, for every policy and several bounds.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import load_model

POLICIES = sorted((Path(__file__).resolve().parent.parent / "policies").glob("*.pact"))


def _model(path: Path) -> dict:  # type: ignore[type-arg]
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None
    files = compile_candidate(result.candidate, result.source_map, path.name)
    return json.loads(files["model.json"])


def _naive(explorer: Explorer, max_depth: int) -> tuple[int, dict[str, int]]:
    seen = {explorer.sorted_form(s) for s in explorer.initial_states()}
    queue = deque((s, 0) for s in explorer.initial_states())
    first: dict[str, int] = {}
    for state, depth in queue:
        for name, _ in explorer.check_state(state):
            first.setdefault(name, depth)
    while queue:
        state, depth = queue.popleft()
        if depth >= max_depth:
            continue
        for _, succ, edge in explorer.successors(state):
            if edge is not None:
                first.setdefault(edge, depth + 1)
            key = explorer.sorted_form(succ)
            if key in seen:
                continue
            seen.add(key)
            for name, _ in explorer.check_state(succ):
                first.setdefault(name, depth + 1)
            queue.append((succ, depth + 1))
    return len(seen), first


@pytest.mark.parametrize("path", POLICIES, ids=[p.stem for p in POLICIES])
@pytest.mark.parametrize(("agreements", "faults", "depth"), [(1, 0, 64), (1, 1, 64), (2, 1, 7)])
def test_fast_search_matches_the_plain_definition(path: Path, agreements: int, faults: int, depth: int) -> None:
    """Same states and violation depths; two agreements to a depth the naive search can afford."""
    doc = _model(path)
    bounds = Bounds(agreements=agreements, faults=faults, max_depth=depth)
    fast = Explorer(load_model(doc), bounds).explore()
    count, first = _naive(Explorer(load_model(doc), bounds), depth)
    assert len(fast.states) == count
    assert {name: fast.depths[v.state_id] for name, v in fast.violations.items()} == first


def test_symmetry_reduction_merges_interchangeable_agreements() -> None:
    # No deadlines: agreements do not share a clock, so the product formula is exact.
    doc = _model(next(p for p in POLICIES if p.stem == "unsafe_chargeback"))
    one = Explorer(load_model(doc), Bounds(agreements=1, faults=0)).explore()
    two = Explorer(load_model(doc), Bounds(agreements=2, faults=0)).explore()
    # Without symmetry reduction two agreements would give n*n states; with it, n*(n+1)/2.
    n = len(one.states)
    assert len(two.states) == n * (n + 1) // 2


def test_bounds_stop_the_search_and_say_so() -> None:
    doc = _model(next(p for p in POLICIES if p.stem == "support_refund"))
    capped = Explorer(load_model(doc), Bounds(max_states=50)).explore()
    assert not capped.exhausted
    assert capped.bound_hit == "max_states"
    assert len(capped.states) == 50
    shallow = Explorer(load_model(doc), Bounds(max_depth=2)).explore()
    assert shallow.bound_hit == "max_depth"
    assert shallow.depth_reached == 2


DEADLINES = """pact "t.deadlines" version "1"
currency EUR scale 2
role buyer
clock scheduler
param window: duration = 2d
param grace: duration = 1d
state open initial
state paid
state delivered final
state expired final
transition pay: open -> paid {
  by buyer
  stamp paid_at
}
transition deliver: paid -> delivered {
  by buyer
  stamp delivered_at
  when now - paid_at < window
}
transition expire: paid -> expired {
  by scheduler
  when now >= paid_at + window + grace
}
invariant never_expires: applied(expire) == 0
invariant delivered_in_time: reached(delivered) implies delivered_at < paid_at + window
"""


def _verify(text: str) -> dict:  # type: ignore[type-arg]
    from pactwright.verifier.verify import VerifyOptions, verify_files

    result = check_bytes(text.encode())
    assert result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, "t.pact")
    return verify_files(files, VerifyOptions(bounds=Bounds(), proofs=False, mutants=False))


def test_every_deadline_shape_is_reached_by_the_clock() -> None:
    """`now >= s + a + b` and `now - s < a` are deadlines too; none may be dropped."""
    report = _verify(DEADLINES)
    verdicts = {i["name"]: i["verdict"] for i in report["invariants"]}
    assert verdicts["never_expires"] == "violated"  # the clock reaches paid_at + 3d
    cx = report["counterexamples"][0]
    assert [e.get("command") for e in cx["events"]] in (
        ["pay", "time passes +3d", "expire"],
        ["pay", "time passes +3d1s", "expire"],
    )
    assert "expire" not in report["coverage"]["transitions_never_fired"]


def test_stamps_compared_with_each_other_keep_exact_ages() -> None:
    """`delivered_at < paid_at + window` holds; capped ages would report it violated."""
    report = _verify(DEADLINES)
    verdicts = {i["name"]: i["verdict"] for i in report["invariants"]}
    assert verdicts["delivered_in_time"] == "holds-to-bound"


def test_a_time_comparison_the_clock_cannot_place_is_refused() -> None:
    from pactwright.errors import VerifyError

    doc = _model(next(p for p in POLICIES if p.stem == "marketplace_milestone"))
    guard = next(t for t in doc["transitions"] if t["id"] == "auto_release")["guard"]
    # now >= delivered_at + funded_at: two stamps and now: no single deadline.
    guard["args"][1] = {
        "op": "+",
        "type": "time",
        "args": [guard["args"][1]["args"][0], {"op": "stamp", "type": "time", "name": "funded_at"}],
    }
    with pytest.raises(VerifyError) as caught:
        load_model(doc)
    assert caught.value.code == "PW303"
