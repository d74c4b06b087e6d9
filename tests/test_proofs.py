"""z3 proofs: amounts for ALL values in range, invariants for ALL depths, never more.

Scenario tests on real compiled bundles (reference policies and fixture
copies under tests/fixtures/proofs/), run through the verifier pipeline. Every
refutation is checked against an independent concrete exploration at the
witness value and at its neighbour, every proof against a policy where the
same claim would be false, and forced solver `unknown`s must never turn into
`proved`.
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
from pactwright.verifier import _z3_amounts, _z3_induction, _z3_transfers, proofs
from pactwright.verifier._z3_amounts import explore_at
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


def _violated_at(path: Path, invariant: str, **values: str) -> bool:
    """Whether a fresh explicit-state search with these param values violates `invariant`."""
    _, result = explore_at(_model(path), Bounds(), values)
    return invariant in result.violations


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
    entry = _invariant(_report(FIXTURES / "seller_share.pact"), "seller_keeps_85_percent")
    assert entry["amounts"] == "proved for all values in range (z3)"
    assert entry["verdict"] == "proved"
    assert entry["method"].startswith("k-induction (k=")


def test_flat_fee_breaks_85_percent_and_z3_gives_the_smallest_price() -> None:
    path = FIXTURES / "fixed_fee_share.pact"
    entry = _invariant(_report(path), "seller_keeps_85_percent")
    assert entry["verdict"] == "violated"
    witness = entry["amount_witness"]
    # seller = price - min(0.50, price) and 100 * seller < 85 * price  <=>  price < 3.34
    assert (witness["param"], witness["value"], witness["text"]) == ("price", "100", "1.00")
    assert _violated_at(path, "seller_keeps_85_percent", price="100")
    assert _violated_at(path, "seller_keeps_85_percent", price="333")
    assert not _violated_at(path, "seller_keeps_85_percent", price="334")
    seller = next(a for a in _report(path)["amounts"] if a["transition"] == "release" and a.get("account") == "seller")
    assert (seller["min_text"], seller["max_text"]) == ("0.50", "9999.50")


def test_transfer_refutations_carry_the_smallest_rechecked_witness() -> None:
    # Called directly: the full pipeline cannot replay a negative posting through the ledger.
    amounts = proofs.transfer_properties(_model(FIXTURES / "refund_ceiling.pact"))
    by_kind = {a["kind"]: a for a in amounts if a["transition"] == "issue" and a["kind"] != "share_range"}
    assert by_kind["sum"]["verdict"] == "proved"
    negative = by_kind["non_negative"]
    assert (negative["verdict"], negative["witness"], negative["witness_text"]) == ("refuted", "-99", "-0.99")
    assert negative["witness_params"] == {"amount": "1"}
    ceiling = by_kind["ceiling"]
    assert (ceiling["verdict"], ceiling["witness"], ceiling["witness_text"]) == ("refuted", "45001", "450.01")


# -- invariants over amounts ------------------------------------------------------------------


def test_refund_desk_limit_is_refuted_at_exactly_400_01() -> None:
    path = FIXTURES / "refund_cap.pact"
    entry = _invariant(_report(path), "refund_within_desk_limit")
    assert entry["verdict"] == "violated"
    assert entry["amount_witness"]["value"] == "40001"
    assert entry["amount_witness"]["text"] == "400.01"
    assert entry["amounts"].startswith("violated at amount = 400.01 (z3 smallest violating value,")
    assert _violated_at(path, "refund_within_desk_limit", amount="40001")
    assert not _violated_at(path, "refund_within_desk_limit", amount="40000")


def test_a_violation_no_sample_hits_is_found_confirmed_and_replayed() -> None:
    path = FIXTURES / "refund_gap.pact"
    sampled = _invariant(_report(path, proofs_on=False), "refund_outside_gap")
    assert sampled["verdict"] == "holds-to-bound"
    report = _report(path)
    entry = _invariant(report, "refund_outside_gap")
    assert entry["verdict"] == "violated"
    assert entry["amount_witness"]["text"] == "400.01"
    assert report["verdict"] == "fail"
    # verify.py re-explores at the witness and attaches a replayed counterexample.
    cx = report["counterexamples"][entry["counterexample"]]
    assert cx["replayed"] is True
    assert "refund_outside_gap" in cx["invariants"]
    assert cx["params"][0]["amount"] == "400.01"
    # The same run, step by step, through the public functions.
    files = _bundle(path)
    model = _model(path)
    unattached = {**json.loads(json.dumps(entry)), "counterexample": None}
    runs = proofs.witness_explorations(model, Bounds(), [unattached])
    assert [name for name, _, _ in runs] == ["refund_outside_gap"]
    _, explorer, result = runs[0]
    programs = {p: d.decode("utf-8") for p, d in files.items() if p.startswith("ledger/")}
    found, index_of = counterexamples(explorer, result, load_json(files["transitions.json"]), programs)
    assert list(index_of) == ["refund_outside_gap"]
    assert found[0]["params"][0]["amount"] == "400.01"


def test_amounts_not_claimed_when_the_search_stopped_at_a_bound() -> None:
    entry = _invariant(_report(FIXTURES / "deep_counter.pact", max_depth=8), "pool_holds_one_amount")
    assert entry["amounts"].startswith("no violation for any amount 1.00 .. 100.00")
    assert "not proved for all values" in entry["amounts"]


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

    for module in (_z3_transfers, _z3_amounts, _z3_induction):
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
