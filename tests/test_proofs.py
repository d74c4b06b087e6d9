"""Amounts for ALL values in range, invariants for ALL depths, never more.

Scenario tests on real compiled bundles (reference policies and fixture
copies under tests/fixtures/proofs/), run through the verifier pipeline.
Ranged params are symbols in the search itself, so a violation anywhere in
a range is found by the search, with z3's witness values in the
counterexample's params. Every refutation is checked against a concrete
exploration pinned at the witness value and at its neighbour, every proof
against a policy where the same claim would be false, and forced solver
`unknown`s must never turn into `proved` or `pass`.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import z3

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier import _z3_induction, _z3_transfers, proofs, symbolic
from pactwright.verifier._z3_induction import Machine
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.model import Model, load_model
from pactwright.verifier.verify import VerifyOptions, counterexamples, verify_files

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "proofs"
POLICIES = ROOT / "policies"
Json = dict[str, Any]


@cache
def _bundle(path: Path) -> dict[str, bytes]:
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None, result.diagnostics
    return compile_candidate(result.candidate, result.source_map, path.name)


def _model(path: Path) -> Model:
    return load_model(json.loads(_bundle(path)["model.json"]))


@cache
def _report(path: Path, max_depth: int = 64, proofs_on: bool = True) -> Json:
    options = VerifyOptions(bounds=Bounds(max_depth=max_depth), mutants=False, proofs=proofs_on)
    return verify_files(_bundle(path), options)


def _invariant(report: Json, name: str) -> Json:
    found: Json = next(i for i in report["invariants"] if i["name"] == name)
    return found


def _violated_at(path: Path, invariant: str, **values: int) -> bool:
    """Whether a concrete search with these param values (minor units) violates `invariant`."""
    explorer = Explorer(_model(path), Bounds(), pinned=values)
    assert not explorer.symbolic
    return invariant in explorer.explore().violations


def _minor(text: str) -> int:
    """`400.01` -> 40001 (the fixtures' currencies have two decimals)."""
    whole, _, cents = text.partition(".")
    return int(whole) * 100 + int(cents)


def _counterexample(report: Json, name: str) -> Json:
    entry = _invariant(report, name)
    assert entry["verdict"] == "violated", entry
    cx: Json = report["counterexamples"][entry["counterexample"]]
    assert cx["replayed"] is True
    assert name in cx["invariants"]
    return cx


# -- transfers for all values ---------------------------------------------------------------


def test_reference_split_sums_and_is_bounded_for_every_price() -> None:
    report = _report(FIXTURES / "seller_share.pact")
    settling = ("release", "auto_release", "rule_for_seller")
    for transition in settling:
        entries = [a for a in report["amounts"] if a["transition"] == transition]
        assert {a["kind"]: a["verdict"] for a in entries if a["kind"] != "share_range"} == {
            "sum": "proved",
            "non_negative": "proved",
        }
        shares = {a["account"]: (a["verdict"], a["min_text"], a["max_text"]) for a in entries if "account" in a}
        # platform = floor(10%) plus the leftover unit; seller = floor(90%) of 1.00 .. 10000.00
        assert shares == {
            "platform": ("proved", "0.10", "1000.00"),
            "seller": ("proved", "0.90", "9000.00"),
        }
    assert all(a["verdict"] == "proved" for a in report["amounts"])


def test_seller_keeps_85_percent_of_every_price() -> None:
    path = FIXTURES / "seller_share.pact"
    # The search alone covers every price (a symbol, not samples) ...
    searched = _report(path, proofs_on=False)
    entry = _invariant(searched, "seller_keeps_85_percent")
    assert entry["verdict"] == "holds-to-bound"
    assert (
        entry["method"] == "explicit-state search, state space exhausted, for every value of price in 1.00 .. 10000.00"
    )
    assert searched["verdict"] == "pass"
    # ... and k-induction proves it at every depth.
    entry = _invariant(_report(path), "seller_keeps_85_percent")
    assert entry["verdict"] == "proved"
    assert entry["method"].startswith("k-induction (k=")


def test_flat_fee_breaks_85_percent_and_the_witness_is_the_lowest_price() -> None:
    path = FIXTURES / "fixed_fee_share.pact"
    cx = _counterexample(_report(path), "seller_keeps_85_percent")
    # seller = price - min(0.50, price) and 100 * seller < 85 * price  <=>  price < 3.34;
    # the witness is pulled to the range's lower bound, where it still fails.
    assert cx["params"][0]["price"] == "1.00"
    assert [e["command"] for e in cx["events"]] == ["fund", "deliver", "release"]
    assert _violated_at(path, "seller_keeps_85_percent", price=100)
    assert _violated_at(path, "seller_keeps_85_percent", price=333)
    assert not _violated_at(path, "seller_keeps_85_percent", price=334)
    seller = next(a for a in _report(path)["amounts"] if a["transition"] == "release" and a.get("account") == "seller")
    assert (seller["min_text"], seller["max_text"]) == ("0.50", "9999.50")


def test_transfer_refutations_carry_the_smallest_rechecked_witness() -> None:
    amounts = proofs.transfer_properties(_model(FIXTURES / "refund_ceiling.pact"))
    by_kind = {a["kind"]: a for a in amounts if a["transition"] == "issue" and a["kind"] != "share_range"}
    assert by_kind["sum"]["verdict"] == "proved"
    negative = by_kind["non_negative"]
    assert (negative["verdict"], negative["witness"], negative["witness_text"]) == ("refuted", "-99", "-0.99")
    assert negative["witness_params"] == {"amount": "1"}
    ceiling = by_kind["ceiling"]
    assert (ceiling["verdict"], ceiling["witness"], ceiling["witness_text"]) == ("refuted", "45001", "450.01")


def test_a_negative_transfer_is_a_refused_command_in_the_search() -> None:
    """`amount - 1.00` is negative below 1.00: the ledger refuses `issue`, and the search says so.

    The runtime never commits the refused command, so the counterexample ends
    with it as a `refused` event, at the lowest amount (pulled to 0.01).
    """
    path = FIXTURES / "refund_ceiling.pact"
    report = _report(path)
    assert report["verdict"] == "fail"
    cx = _counterexample(report, "funds_available")
    assert cx["params"][0]["amount"] == "0.01"
    assert [(e["kind"], e["command"]) for e in cx["events"]][-1] == ("refused", "refused issue")
    assert all(e["postings"] == [] for e in cx["events"])  # nothing reached the ledger
    assert "negative amount" in cx["violations"][0]["explanation"]
    assert _violated_at(path, "funds_available", amount=99)
    assert not _violated_at(path, "funds_available", amount=100)
    # The policy's own invariants are judged only on runs the runtime executes.
    assert _invariant(report, "refund_within_ceiling")["verdict"] != "violated"


# -- invariants over amounts ------------------------------------------------------------------


def test_refund_desk_limit_is_refuted_above_400_00_and_only_there() -> None:
    path = FIXTURES / "refund_cap.pact"
    cx = _counterexample(_report(path), "refund_within_desk_limit")
    # 0.01 (the lower bound) does not break the limit, so the witness is z3's: any refund above 400.00.
    witness = _minor(cx["params"][0]["amount"])
    assert 40001 <= witness <= 50000
    assert _violated_at(path, "refund_within_desk_limit", amount=witness)
    assert _violated_at(path, "refund_within_desk_limit", amount=40001)
    assert not _violated_at(path, "refund_within_desk_limit", amount=40000)


def test_a_violation_between_the_samples_is_found_by_the_symbolic_search() -> None:
    """Only 400.01 .. 449.99 breaks `refund_outside_gap`; no boundary sample lands there.

    The search carries `amount` as a symbol, so it finds the violation by
    itself (no z3 proof stage), and the counterexample is a concrete run
    pinned at z3's witness, replayed.
    """
    path = FIXTURES / "refund_gap.pact"
    report = _report(path, proofs_on=False)
    assert report["verdict"] == "fail"
    cx = _counterexample(report, "refund_outside_gap")
    witness = _minor(cx["params"][0]["amount"])
    assert 40001 <= witness <= 44999
    assert _violated_at(path, "refund_outside_gap", amount=witness)
    assert not _violated_at(path, "refund_outside_gap", amount=40000)
    assert not _violated_at(path, "refund_outside_gap", amount=45000)
    assert _report(path)["verdict"] == "fail"  # and the proof stage does not undo it
    # The same run, step by step, through the public functions.
    files = _bundle(path)
    explorer = Explorer(_model(path), Bounds())
    result = explorer.explore()
    assert explorer.symbolic
    violation = result.violations["refund_outside_gap"]
    assert violation.witness is not None
    assert 40001 <= violation.witness["amount"] <= 44999
    programs = {p: d.decode("utf-8") for p, d in files.items() if p.startswith("ledger/")}
    found, index_of = counterexamples(explorer, result, load_json(files["transitions.json"]), programs)
    pinned = found[index_of["refund_outside_gap"]]
    assert pinned["replayed"] is True
    assert _minor(pinned["params"][0]["amount"]) == violation.witness["amount"]


def test_nothing_is_claimed_beyond_a_bound_that_stopped_the_search() -> None:
    report = _report(FIXTURES / "deep_counter.pact", max_depth=8)
    entry = _invariant(report, "pings_stay_small")
    assert entry["verdict"] == "holds-to-bound"
    assert entry["method"].startswith("explicit-state search to depth 8, for every value of amount in 1.00 .. 100.00")
    assert "exhausted" not in entry["method"]
    assert (report["verdict"], report["complete"], report["allow_incomplete"]) == ("incomplete", False, False)
    assert report["does_not_prove"][0].startswith("states beyond depth 8")
    assert any("`--max-depth N`" in w and "`ping -> pong -> ping`" in w for w in report["warnings"])
    # An invariant k-induction proves does not depend on the bound.
    assert _invariant(report, "pool_holds_one_amount")["verdict"] == "proved"


# -- k-induction ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["escrow_never_negative", "escrow_empty_when_final", "settles_once"])
def test_reference_invariants_are_proved_for_all_depths(name: str) -> None:
    entry = _invariant(_report(POLICIES / "marketplace_milestone.pact"), name)
    assert entry["verdict"] == "proved"
    assert entry["method"].startswith("k-induction (k=")
    assert "flow conservation" in entry["method"]


def test_an_invariant_false_only_beyond_the_bound_is_not_proved() -> None:
    path = FIXTURES / "deep_counter.pact"
    shallow = _invariant(_report(path, max_depth=8), "pings_stay_small")
    assert shallow["verdict"] == "holds-to-bound"
    assert "k-induction: step case not inductive" in shallow["method"]
    deep = _invariant(_report(path), "pings_stay_small")
    assert deep["verdict"] == "violated"  # it really is false, six pings in
    # a true invariant of the same cyclic machine is proved beyond the bound
    assert _invariant(_report(path, max_depth=8), "pongs_follow_pings")["verdict"] == "proved"


POLICY_FILES = sorted(POLICIES.glob("*.pact")) + sorted(FIXTURES.glob("*.pact"))


@pytest.mark.parametrize("path", POLICY_FILES, ids=lambda p: p.stem)
def test_k_induction_never_proves_what_the_search_refutes(path: Path) -> None:
    model = _model(path)
    result = Explorer(model, Bounds()).explore()
    machine = Machine(model, proofs.DEFAULT_TIMEOUT_MS)
    for spec in model.invariants:
        outcome = machine.prove(spec["expr"], 4)
        if spec["name"] in result.violations:
            assert not outcome.proved, spec["name"]


# -- unknown is unknown -----------------------------------------------------------------------


def test_a_tiny_timeout_never_becomes_a_proof() -> None:
    path = POLICIES / "marketplace_milestone.pact"
    model = _model(path)
    explorer = Explorer(model, Bounds())
    result = explorer.explore()
    invariants = [
        {"name": s["name"], "clause": s["clause"], "builtin": False, "verdict": "holds-to-bound", "method": "search"}
        for s in model.invariants
    ]
    proofs.upgrade(model, explorer, result, invariants, timeout_ms=1)
    assert not [i["name"] for i in invariants if i["verdict"] != "holds-to-bound"]
    assert any("unknown" in i["method"] for i in invariants)
    for entry in proofs.transfer_properties(model, timeout_ms=1):
        assert entry["verdict"] in ("proved", "unknown")


class _Undecided:
    """A z3 solver that answers `unknown` to every check, as on a timeout."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def check(self, *args: Any) -> Any:
        return z3.unknown

    def reason_unknown(self) -> str:
        return "timeout"


def test_forced_unknown_answers_are_reported_as_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    def undecided_solver(timeout_ms: int) -> _Undecided:
        return _Undecided(z3.Solver())

    def undecided_optimizer(timeout_ms: int) -> _Undecided:
        return _Undecided(z3.Optimize())

    for module in (_z3_transfers, _z3_induction):
        monkeypatch.setattr(module, "make_solver", undecided_solver)
        if hasattr(module, "make_optimizer"):
            monkeypatch.setattr(module, "make_optimizer", undecided_optimizer)
    model = _model(FIXTURES / "seller_share.pact")
    for entry in proofs.transfer_properties(model):
        assert entry["verdict"] == "unknown", entry
        assert entry["witness"] is None
    explorer = Explorer(model, Bounds())
    result = explorer.explore()
    invariants = [
        {"name": s["name"], "clause": s["clause"], "builtin": False, "verdict": "holds-to-bound", "method": "search"}
        for s in model.invariants
    ]
    proofs.upgrade(model, explorer, result, invariants)
    for entry in invariants:
        assert entry["verdict"] == "holds-to-bound"
        assert "unknown" in entry["method"]
        if "amounts" in entry:
            assert entry["amounts"].startswith("unknown")


def test_unknown_answers_in_the_symbolic_search_make_the_run_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no solver budget every query the search sends to z3 is `unknown`: never a pass.

    refund_gap.pact is violated only inside 400.01 .. 449.99, which only the
    solver can tell apart from the rest of the range.
    """
    monkeypatch.setattr(symbolic, "RLIMIT", 1)
    path = FIXTURES / "refund_gap.pact"
    options = VerifyOptions(bounds=Bounds(), mutants=False, proofs=False)
    report = verify_files(_bundle(path), options)
    assert (report["verdict"], report["complete"]) == ("incomplete", False)
    assert report["exploration"]["exhausted"] is True
    assert any("gave no answer (unknown)" in w for w in report["warnings"])
    assert any("of unknown" in item and "solver answer" in item for item in report["does_not_prove"])
    assert all(i["verdict"] not in ("proved", "vacuous-suspect") for i in report["invariants"])
    allowed = verify_files(
        _bundle(path), VerifyOptions(bounds=Bounds(), mutants=False, proofs=False, allow_incomplete=True)
    )
    assert (allowed["verdict"], allowed["complete"], allowed["allow_incomplete"]) == ("pass", False, True)


def test_an_invariant_behind_unknown_answers_is_not_claimed_for_every_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """`refund_outside_gap` is violated; with the solver undecided the search cannot tell.

    Then its entry must not say it held "for every value of amount": the
    method names the unknown answers, as k-induction's does.
    """
    monkeypatch.setattr(symbolic, "RLIMIT", 1)
    options = VerifyOptions(bounds=Bounds(), mutants=False, proofs=False)
    report = verify_files(_bundle(FIXTURES / "refund_gap.pact"), options)
    entry = _invariant(report, "refund_outside_gap")
    assert entry["verdict"] == "holds-to-bound"
    assert "unknown" in entry["method"], entry["method"]


# -- isolation --------------------------------------------------------------------------------


def test_each_proof_run_solves_in_a_fresh_z3_context(monkeypatch: pytest.MonkeyPatch) -> None:
    """z3 heuristics depend on the ids of terms seen before; a report must not.

    In the shared global context, proving one policy's transfers first once
    made another policy's nonlinear share minimum time out.
    """
    outside = z3.main_ctx()
    seen: list[Any] = []
    original = _z3_transfers.TransferProver.run

    def spy(self: _z3_transfers.TransferProver) -> list[Json]:
        seen.append(z3.main_ctx())
        return original(self)

    monkeypatch.setattr(_z3_transfers.TransferProver, "run", spy)
    restocking = _model(POLICIES / "refund_with_fee.pact")  # a percent param: nonlinear shares
    first = proofs.transfer_properties(restocking)
    assert proofs.transfer_properties(restocking) == first
    assert len(seen) == 2
    assert seen[0] is not outside
    assert seen[1] is not outside
    assert seen[0] is not seen[1]
    assert z3.main_ctx() is outside


def test_importing_the_proofs_module_does_not_load_z3() -> None:
    import subprocess
    import sys

    code = "import sys, pactwright.verifier.proofs; sys.exit('z3' in sys.modules or 'networkx' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
