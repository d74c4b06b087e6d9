"""Mutation analysis: early stop and worker processes change its cost, never its result.

Two properties from the verifier's issue ("fast by default"):
- the report is byte-identical with `--jobs 1` (in process) and `--jobs 2`
  (worker processes, forced from the first mutant), for two policies;
- stopping each mutant's search early gives the same mutant statuses and the
  same vacuous-suspect invariants as searching every mutant in full (the old
  behaviour, kept as `early_stop=False`), for every reference policy.
The bookkeeping that decides whether a worker's speculative result may be
kept is checked on its own, case by case.
"""

from __future__ import annotations

import copy
import functools
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier import mutation
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.render import report_files
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests.conftest import REFERENCE_POLICIES, ROOT

PARALLEL_POLICIES = (ROOT / "policies" / "marketplace_milestone.pact", ROOT / "policies" / "refund_with_fee.pact")


@functools.cache
def _files(path: Path) -> dict[str, bytes]:
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None, result.diagnostics
    return compile_candidate(result.candidate, result.source_map, path.name)


def _report_bytes(path: Path, jobs: int) -> bytes:
    report = verify_files(_files(path), VerifyOptions(bounds=Bounds(), jobs=jobs))
    return report_files(report)["report.json"]


@pytest.mark.parametrize("path", PARALLEL_POLICIES, ids=lambda p: p.stem)
def test_report_is_byte_identical_for_one_and_two_jobs(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mutation, "PARALLEL_AFTER", 0.0)  # workers from the first mutant on
    in_process = _report_bytes(path, jobs=1)
    parallel = _report_bytes(path, jobs=2)
    assert load_json(in_process)["mutants"], "the policy has mutants to distribute"
    assert in_process == parallel


def _verified_invariants(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The model document and the invariant verdicts mutation analysis starts from (proofs on)."""
    files = _files(path)
    report = verify_files(files, VerifyOptions(bounds=Bounds(), mutants=False))
    return load_json(files["model.json"]), report["invariants"]


@pytest.mark.parametrize("path", REFERENCE_POLICIES, ids=lambda p: p.stem)
def test_early_stop_keeps_statuses_and_vacuity(path: Path) -> None:
    doc, invariants = _verified_invariants(path)
    full_invariants, early_invariants = copy.deepcopy(invariants), copy.deepcopy(invariants)
    full = mutation.run(doc, Bounds(), full_invariants, early_stop=False)
    early = mutation.run(doc, Bounds(), early_invariants, early_stop=True)
    assert [(m["id"], m["status"]) for m in early] == [(m["id"], m["status"]) for m in full]
    # What an early stop may drop: invariants seen after it, and states; never a status or a vacuity flag.
    for e, f in zip(early, full, strict=True):
        assert set(e["caught_by"]) <= set(f["caught_by"])
        assert e["states"] <= f["states"]
        assert f["exhausted"] or not e["exhausted"]
    assert early_invariants == full_invariants


def test_early_stop_explores_fewer_states_somewhere() -> None:
    """Not only equal results: the early stop must actually cut some search short."""
    total_early = total_full = 0
    for path in PARALLEL_POLICIES:
        doc, invariants = _verified_invariants(path)
        full = mutation.run(doc, Bounds(), copy.deepcopy(invariants), early_stop=False)
        early = mutation.run(doc, Bounds(), copy.deepcopy(invariants), early_stop=True)
        total_full += sum(m["states"] for m in full)
        total_early += sum(m["states"] for m in early)
    assert total_early < total_full


def _plan(candidates: set[str], baseline: frozenset[str] = frozenset()) -> mutation._Plan:
    return mutation._Plan(frozenset(candidates), baseline, early_stop=True)


def _outcome(*violations: str) -> mutation.Outcome:
    return mutation.Outcome(frozenset(violations), states=10, exhausted=False)


def test_speculative_result_kept_only_when_the_exact_stop_set_would_not_have_stopped_it() -> None:
    plan = _plan({"a", "b", "c"})
    plan.combine(_outcome("b", "c"))  # the mutant before credits b and c: the exact stop set is now {a}
    assert plan.stop() == frozenset({"a"})
    searched = frozenset({"a", "b", "c"})
    # Searched with a superset, and `a` was never violated: the exact search would not have stopped either.
    assert plan.keeps(_outcome("b"), searched)
    # `a` was violated: the exact search stops there, earlier; the result must be recomputed.
    assert not plan.keeps(_outcome("a"), searched)
    # Searched with the exact set: always kept.
    assert plan.keeps(_outcome("a"), frozenset({"a"}))


def test_empty_stop_set_means_first_violation_beyond_the_baseline() -> None:
    plan = _plan({"a"}, baseline=frozenset({"broken"}))
    plan.combine(_outcome("a"))
    assert plan.stop() == frozenset()
    searched = frozenset({"a"})
    assert plan.keeps(_outcome("broken"), searched)  # only the policy's own violation: searched in full either way
    assert not plan.keeps(_outcome("money_conserved"), searched)  # an empty stop set would have stopped there


def test_full_search_when_early_stop_is_off() -> None:
    plan = mutation._Plan(frozenset({"a"}), frozenset(), early_stop=False)
    assert plan.stop() is None
    assert plan.keeps(_outcome("a"), None)


def test_mutants_share_the_parent_document_except_what_they_change() -> None:
    doc, _ = _verified_invariants(PARALLEL_POLICIES[0])
    before = copy.deepcopy(doc)
    found = mutation.mutations(doc)
    assert len({m.id for m in found}) == len(found)
    for item in found:
        mutant = mutation.apply(doc, item)
        assert mutant != doc
        if item.kind != "strategy":
            pairs = list(zip(mutant["transitions"], doc["transitions"], strict=True))
            assert [i for i, (a, b) in enumerate(pairs) if a != b] == [item.index]
            assert all(a is b for i, (a, b) in enumerate(pairs) if i != item.index)
    assert doc == before, "building mutants must not modify the parent's model"


def test_cli_rejects_zero_jobs(cli: Path) -> None:
    done = subprocess.run(
        [str(cli), "verify", str(PARALLEL_POLICIES[0]), "--jobs", "0"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "--jobs" in done.stderr
    assert "Traceback" not in done.stderr
