"""Honest bounds: a search a bound stopped is `incomplete`, never a silent PASS.

A wallet whose top-ups and withdrawals can repeat forever has an infinite
state space, so only `--max-depth` or `--max-states` ends the search. The
run is then incomplete: exit 1, a warning naming the bound, the flag that
raises it and the cycles of transitions that pump the balance. With
`--allow-incomplete` it passes and the report records that it was accepted,
and `sign` accepts an incomplete report only then. Real processes, real
bundles, real keys; the completeness rule itself is also checked as a table.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.keys import generate_key_files
from pactwright.verifier._completeness import is_complete, verdict_of
from tests.test_keys_trust import code_of, run

FAST = ("--no-proofs", "--no-mutants")
NOW = "2026-11-30T12:00:00Z"
WALLET = """pact "test.wallet" version "1.0.0"

currency EUR scale 2

role owner

param unit: money = 10.00

account world  "world" external
account wallet "wallet:{agreement}"
account owner  "owners:{owner}:payable"

state open initial
state closed final

clause "1" transition top_up: open -> open {
  by owner
  transfer unit from world to wallet
}

clause "2" transition withdraw: open -> open {
  by owner
  when balance(wallet) >= unit
  transfer unit from wallet to owner
}

clause "3" transition close: open -> closed {
  by owner
  when balance(wallet) == 0
}

clause "4" invariant wallet_never_negative: balance(wallet) >= 0
"""
# Violated only after six top-ups: past a depth of 4, inside the default 64.
CAPPED = WALLET + 'clause "5" invariant wallet_capped: balance(wallet) <= 50.00\n'
CYCLES = ("`top_up -> top_up`", "`withdraw -> withdraw`", "`top_up -> withdraw -> top_up`")


@pytest.fixture
def policies(tmp_path: Path) -> Path:
    (tmp_path / "wallet.pact").write_text(WALLET, encoding="utf-8")
    (tmp_path / "capped.pact").write_text(CAPPED, encoding="utf-8")
    return tmp_path


def _report(stdout: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(stdout)
    return doc


# the verdict --------------------------------------------------------------------------


def test_a_loop_that_hits_max_depth_is_incomplete_and_exits_1(policies: Path) -> None:
    done = run("verify", "wallet.pact", *FAST, "--max-depth", "8", cwd=policies)
    assert done.returncode == 1, done.stderr
    assert "verdict: INCOMPLETE" in done.stdout
    warning = next(line for line in done.stdout.splitlines() if "`max_depth` bound" in line)
    assert "--max-depth N" in warning
    for cycle in CYCLES:
        assert cycle in warning
    assert "--allow-incomplete" in done.stdout
    report = _report(run("verify", "wallet.pact", *FAST, "--max-depth", "8", "--format", "json", cwd=policies).stdout)
    assert (report["verdict"], report["complete"], report["allow_incomplete"]) == ("incomplete", False, False)
    assert report["exploration"]["bound_hit"] == "max_depth"


def test_max_states_names_its_own_flag(policies: Path) -> None:
    done = run("verify", "wallet.pact", *FAST, "--max-states", "20", "--format", "json", cwd=policies)
    assert done.returncode == 1, done.stderr
    report = _report(done.stdout)
    assert report["verdict"] == "incomplete"
    assert any("`max_states` bound" in w and "--max-states N" in w for w in report["warnings"])


def test_a_violation_past_the_bound_is_incomplete_not_pass_and_found_with_a_larger_bound(policies: Path) -> None:
    """Defect 3: a bound that hides the violation must not print PASS."""
    short = run("verify", "capped.pact", *FAST, "--max-depth", "4", cwd=policies)
    assert short.returncode == 1, short.stderr
    assert "verdict: INCOMPLETE" in short.stdout
    assert "PASS" not in short.stdout
    deep = run("verify", "capped.pact", *FAST, "--format", "json", cwd=policies)
    assert deep.returncode == 1, deep.stderr
    report = _report(deep.stdout)
    assert report["verdict"] == "fail"
    assert {i["name"] for i in report["invariants"] if i["verdict"] == "violated"} == {"wallet_capped"}


def test_allow_incomplete_passes_and_every_output_says_so(policies: Path) -> None:
    args = ("verify", "wallet.pact", *FAST, "--max-depth", "8", "--allow-incomplete")
    done = run(*args, "--report-dir", "out", cwd=policies)
    assert done.returncode == 0, done.stderr
    assert "verdict: PASS (incomplete, allowed by --allow-incomplete)" in done.stdout
    report = load_json((policies / "out" / "report.json").read_bytes())
    assert (report["verdict"], report["complete"], report["allow_incomplete"]) == ("pass", False, True)
    assert any("allowed by --allow-incomplete" in w for w in report["warnings"])
    markdown = (policies / "out" / "report.md").read_text("utf-8")
    assert markdown.startswith("## pactwright verify: PASS (incomplete, allowed by --allow-incomplete) — ")
    html = (policies / "out" / "report.html").read_text("utf-8")
    assert '<span class="pill note" id="verdict-note">incomplete, allowed by --allow-incomplete</span>' in html
    junit = run(*args, "--format", "junit", cwd=policies)
    assert junit.returncode == 0, junit.stderr
    assert '<property name="verdict" value="pass (incomplete, allowed by --allow-incomplete)"/>' in junit.stdout


def test_an_incomplete_run_skips_the_undecided_invariants_in_junit(policies: Path) -> None:
    import xml.etree.ElementTree as ET

    done = run("verify", "wallet.pact", *FAST, "--max-depth", "8", "--format", "junit", cwd=policies)
    assert done.returncode == 1, done.stderr
    suite = ET.fromstring(done.stdout.encode("utf-8"))  # noqa: S314 - our own output, parsed to check it
    cases = suite.findall("testcase")
    assert cases and all(c.find("skipped") is not None for c in cases)  # nothing is proved with --no-proofs
    assert int(suite.get("skipped", "-1")) == len(cases)
    assert int(suite.get("failures", "-1")) == 0


def test_strict_still_exits_1_on_a_bound_even_when_allowed(policies: Path) -> None:
    done = run("verify", "wallet.pact", *FAST, "--max-depth", "8", "--allow-incomplete", "--strict", cwd=policies)
    assert done.returncode == 1, done.stderr
    assert "verdict: PASS (incomplete, allowed by --allow-incomplete)" in done.stdout


@pytest.mark.parametrize(
    ("exhausted", "unknown", "verdicts", "complete"),
    [
        (True, 0, ["holds-to-bound", "vacuous-suspect"], True),
        (True, 2, ["holds-to-bound"], False),  # an unknown solver answer leaves a gap
        (False, 0, ["holds-to-bound", "proved"], False),
        (False, 0, ["proved", "proved"], True),  # induction makes the bound irrelevant
        (False, 3, ["proved", "violated"], True),
        (False, 0, ["proved", "unknown"], False),
    ],
)
def test_completeness_rule(exhausted: bool, unknown: int, verdicts: list[str], complete: bool) -> None:
    invariants = [{"verdict": v} for v in verdicts]
    assert is_complete(exhausted, unknown, invariants) is complete
    failing = "violated" in verdicts
    assert verdict_of(invariants, complete, False) == ("fail" if failing else "pass" if complete else "incomplete")
    assert verdict_of(invariants, complete, True) == ("fail" if failing else "pass")


def _model(source: str) -> Any:
    from pactwright.compiler.bundle import compile_candidate
    from pactwright.compiler.pipeline import check_bytes
    from pactwright.verifier.model import load_model

    result = check_bytes(source.encode("utf-8"))
    assert result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, "policy.pact")
    return load_model(json.loads(files["model.json"]))


def test_pumping_cycles_are_named_shortest_first_from_the_control_graph() -> None:
    from pactwright.verifier.loops import describe, pumping_cycles

    cycles = pumping_cycles(_model(WALLET))
    assert cycles == [["top_up"], ["withdraw"], ["top_up", "withdraw"]]
    assert [f"`{describe(c)}`" for c in cycles] == list(CYCLES)
    assert pumping_cycles(_model(WALLET), limit=1) == [["top_up"]]


def test_an_acyclic_policy_has_no_pumping_cycle() -> None:
    from pactwright.verifier.loops import pumping_cycles
    from tests.bundles import POLICIES

    assert pumping_cycles(_model((POLICIES / "marketplace_milestone.pact").read_text("utf-8"))) == []


# build and sign -----------------------------------------------------------------------


@pytest.fixture
def keyed(policies: Path) -> Path:
    for name in ("alice", "ci"):
        generate_key_files(policies / name)
    return policies


def _build_and_approve(root: Path, name: str, *extra: str) -> tuple[Path, int]:
    built = run("build", "wallet.pact", "-o", name, *FAST, "--max-depth", "8", *extra, cwd=root)
    approved = run("approve", name, "--key", "alice.key", "--approver", "alice", cwd=root)
    assert approved.returncode == 0, approved.stderr
    return root / name, built.returncode


def _sign(root: Path, bundle: Path) -> Any:
    return run("sign", bundle, "--key", "ci.key", "--now", NOW, "--approver-key", "alice.pub", cwd=root)


def test_build_of_an_incomplete_run_exits_1_and_sign_refuses_it(keyed: Path) -> None:
    bundle, code = _build_and_approve(keyed, "incomplete")
    assert code == 1
    manifest = load_json((bundle / "manifest.json").read_bytes())
    assert manifest["report"]["verdict"] == "incomplete"
    result = _sign(keyed, bundle)
    assert (result.returncode, code_of(result)) == (1, "PW415")
    assert not (bundle / "signatures.json").exists()


def test_sign_accepts_an_incomplete_report_built_with_allow_incomplete(keyed: Path) -> None:
    bundle, code = _build_and_approve(keyed, "allowed", "--allow-incomplete")
    assert code == 0
    report = load_json((bundle / "report.json").read_bytes())
    assert (report["verdict"], report["complete"], report["allow_incomplete"]) == ("pass", False, True)
    result = _sign(keyed, bundle)
    assert result.returncode == 0, result.stderr
    assert (bundle / "signatures.json").is_file()


def test_sign_refuses_a_pass_over_an_incomplete_run_that_does_not_record_the_flag(keyed: Path) -> None:
    """A report edited to drop `allow_incomplete` (manifest rebound to it) is refused with PW419."""
    bundle, _ = _build_and_approve(keyed, "edited", "--allow-incomplete")
    report = load_json((bundle / "report.json").read_bytes())
    report["allow_incomplete"] = False
    data = canonical_bytes(report)
    (bundle / "report.json").write_bytes(data)
    manifest = load_json((bundle / "manifest.json").read_bytes())
    for entry in manifest["artifacts"]:
        if entry["path"] == "report.json":
            entry["sha256"], entry["size"] = hash_bytes(data), len(data)
    manifest["report"]["hash"] = hash_bytes(data)
    (bundle / "manifest.json").write_bytes(canonical_bytes(manifest))
    result = _sign(keyed, bundle)
    assert (result.returncode, code_of(result)) == (1, "PW419"), result.stderr
    assert not (bundle / "signatures.json").exists()
