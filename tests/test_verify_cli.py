"""`pactwright verify` and `pactwright build` as CI runs them: real processes, real files.

Covers the exit-code contract (0 pass, 1 violation, incomplete run or
blockers, 2 usage, `--strict` on a bound that stopped the search), the JSON and JUnit outputs, and the bundle
that `build` writes: its report, the manifest's binding to the report's hash
and verdict, and byte-identical reports across runs. No run may print a
traceback or an internal error. Tests assert codes and structure, not wording.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
MILESTONE = "policies/marketplace_milestone.pact"
UNSAFE = "policies/unsafe_chargeback.pact"
FAST = ("--no-proofs", "--no-mutants")
REPORT_KEYS = {
    "format",
    "verifier",
    "pact",
    "candidate_hash",
    "currency",
    "artifacts",
    "bounds",
    "exploration",
    "verdict",
    "complete",
    "allow_incomplete",
    "invariants",
    "counterexamples",
    "amounts",
    "mutants",
    "coverage",
    "machine",
    "warnings",
    "does_not_prove",
}
BLOCKED = """pact "cli.blocked" version "1.0.0"
currency EUR scale 2
role buyer
state open initial
state done final
transition finish: open -> done {
  by nobody
}
"""


def _command() -> list[str]:
    script = Path(sys.executable).with_name("pactwright")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "pactwright.cli.main"]


def pw(*args: str, cwd: Path = REPO, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `pactwright ARGS...`; every run must end without a traceback or an internal error."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"} | (env or {})
    done = subprocess.run(
        [*_command(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environment,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert "internal error" not in done.stderr, done.stderr
    assert done.returncode != 3, done.stderr
    return done


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(done.stdout)
    return report


# exit codes ------------------------------------------------------------------------


def test_a_passing_policy_exits_0() -> None:
    done = pw("verify", MILESTONE, *FAST)
    assert done.returncode == 0, done.stderr
    assert "PASS" in done.stdout


def test_a_violation_exits_1_with_the_counterexample() -> None:
    done = pw("verify", UNSAFE, *FAST)
    assert done.returncode == 1, done.stderr
    assert "FAIL" in done.stdout
    assert "4 events" in done.stdout
    assert "VIOLATED funds_available" in done.stdout
    assert "refused chargeback" in done.stdout


def test_the_full_verification_runs_by_default() -> None:
    """Proofs and mutation analysis included: still exit 1 on the unsafe fixture, 0 on the reference one."""
    assert pw("verify", UNSAFE).returncode == 1
    assert pw("verify", "policies/support_refund.pact").returncode == 0


@pytest.mark.parametrize("where", ["existing file", "below a file", "below /dev/null"])
def test_a_report_dir_that_cannot_be_a_directory_is_refused_before_verifying(where: str, tmp_path: Path) -> None:
    """Defect 8: `--report-dir FILE` was an internal error with a traceback; now PW307, exit 2, nothing written."""
    afile = tmp_path / "notes.txt"
    afile.write_text("keep me", "utf-8")
    target = {"existing file": afile, "below a file": afile / "out", "below /dev/null": Path("/dev/null/x")}[where]
    before = sorted(p.name for p in tmp_path.iterdir())
    done = pw("verify", MILESTONE, *FAST, "--report-dir", str(target))
    assert done.returncode == 2, done.stderr
    assert "error[PW307]" in done.stderr
    assert done.stdout == ""
    assert afile.read_text("utf-8") == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_report_dir_is_created_when_missing(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    done = pw("verify", MILESTONE, *FAST, "--report-dir", str(target))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in target.iterdir()) == ["report.html", "report.json", "report.md"]


@pytest.mark.parametrize("command", ["verify", "build"])
def test_a_policy_with_blockers_exits_1_and_produces_nothing(command: str, tmp_path: Path) -> None:
    policy = tmp_path / "blocked.pact"
    policy.write_text(BLOCKED, "utf-8")
    out = tmp_path / "bundle"
    extra = ["-o", str(out)] if command == "build" else []
    done = pw(command, str(policy), *extra, *FAST)
    assert done.returncode == 1
    assert "error[PW120]" in done.stderr
    assert done.stdout == ""
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("verify", MILESTONE, "--faults", "-1"),
        ("verify", MILESTONE, "--agreements", "0"),
        ("verify", MILESTONE, "--max-states", "0"),
        ("verify", MILESTONE, "--max-depth", "0"),
        ("verify", MILESTONE, "--faults", "one"),
        ("verify", MILESTONE, "--format", "yaml"),
        ("verify", "policies/no_such_policy.pact"),
        ("verify",),
        ("build", MILESTONE),
        ("build", "policies/no_such_policy.pact", "-o", "unused"),
    ],
    ids=" ".join,
)
def test_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    done = pw(*args)
    assert done.returncode == 2, done.stderr
    assert "error[PW001]" in done.stderr
    assert done.stdout == ""


def test_a_bound_that_stops_exploration_early_is_incomplete_not_pass() -> None:
    done = pw("verify", MILESTONE, *FAST, "--max-states", "10", "--format", "json")
    assert done.returncode == 1, done.stderr
    report = _json(done)
    assert (report["verdict"], report["complete"], report["allow_incomplete"]) == ("incomplete", False, False)
    assert report["exploration"]["exhausted"] is False
    assert report["exploration"]["bound_hit"] == "max_states"
    assert any("max_states" in w and "--max-states N" in w for w in report["warnings"])
    assert all(i["verdict"] != "proved" for i in report["invariants"])


def test_strict_exits_1_when_a_bound_stops_exploration_early_even_if_allowed() -> None:
    """`--strict` wants every search exhausted: it overrides `--allow-incomplete`."""
    allowed = pw("verify", MILESTONE, *FAST, "--max-states", "10", "--allow-incomplete", "--format", "json")
    assert allowed.returncode == 0, allowed.stderr
    report = _json(allowed)
    assert (report["verdict"], report["complete"], report["allow_incomplete"]) == ("pass", False, True)
    strict = pw("verify", MILESTONE, *FAST, "--max-states", "10", "--allow-incomplete", "--strict")
    assert strict.returncode == 1, strict.stderr


def test_strict_changes_nothing_when_the_space_is_exhausted() -> None:
    assert pw("verify", MILESTONE, *FAST, "--strict").returncode == 0


# machine-readable output -------------------------------------------------------------


@pytest.mark.parametrize(("policy", "code"), [(MILESTONE, 0), (UNSAFE, 1)])
def test_json_output_is_the_report(policy: str, code: int) -> None:
    done = pw("verify", policy, *FAST, "--format", "json")
    assert done.returncode == code
    report = _json(done)
    assert set(report) == REPORT_KEYS
    assert report["format"] == "pactwright.report/1"
    assert report["verdict"] == ("pass" if code == 0 else "fail")
    assert (report["complete"], report["allow_incomplete"]) == (True, False)
    assert report["bounds"] == {"agreements": 1, "faults": 1, "max_depth": 64, "max_states": 2_000_000}
    assert bool(report["counterexamples"]) == (code == 1)


def test_json_output_carries_the_bounds_given() -> None:
    report = _json(pw("verify", MILESTONE, *FAST, "--format", "json", "--faults", "0", "--agreements", "2"))
    assert report["bounds"]["faults"] == 0
    assert report["bounds"]["agreements"] == 2
    assert report["exploration"]["exhausted"] is True


@pytest.mark.parametrize(("policy", "code"), [(MILESTONE, 0), (UNSAFE, 1)])
def test_junit_has_one_testcase_per_invariant_and_failures_for_violations(policy: str, code: int) -> None:
    done = pw("verify", policy, *FAST, "--format", "junit")
    assert done.returncode == code
    suite = ET.fromstring(done.stdout.encode("utf-8"))  # noqa: S314 - our own output, parsed to check it is well-formed
    report = _json(pw("verify", policy, *FAST, "--format", "json"))
    assert suite.tag == "testsuite"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [i["name"] for i in report["invariants"]]
    assert int(suite.get("tests", "-1")) == len(cases)
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    violated = {i["name"] for i in report["invariants"] if i["verdict"] == "violated"}
    assert failed == violated
    assert int(suite.get("failures", "-1")) == len(failed)
    if code == 1:
        # The chargeback is refused at commit (escrow is empty): it never runs, so the
        # policy's own invariants hold; the refusal and the stranded money fail.
        assert failed == {"funds_available", "funds_not_stuck"}
        failure = next(c for c in cases if c.get("name") == "funds_available").find("failure")
        assert failure is not None
        assert (failure.text or "").splitlines()[-1].endswith("refused chargeback")


# build ---------------------------------------------------------------------------------


def _manifest(bundle: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((bundle / "manifest.json").read_bytes())
    return manifest


def test_build_writes_the_report_and_binds_it_in_the_manifest(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    done = pw("build", MILESTONE, "-o", str(bundle), *FAST)
    assert done.returncode == 0, done.stderr
    for name in ("report.json", "report.md", "report.html", "model.json", "transitions.json", "manifest.json"):
        assert (bundle / name).is_file(), name
    data = (bundle / "report.json").read_bytes()
    report = json.loads(data)
    assert report["verdict"] == "pass"
    assert _manifest(bundle)["report"] == {
        "path": "report.json",
        "hash": "sha256:" + hashlib.sha256(data).hexdigest(),
        "verdict": "pass",
    }
    # The bundle verifies as it was built.
    again = pw("verify", str(bundle), *FAST, "--format", "json")
    assert again.returncode == 0, again.stderr
    assert _json(again)["candidate_hash"] == report["candidate_hash"]


def test_build_of_a_violating_policy_still_writes_the_bundle_and_exits_1(tmp_path: Path) -> None:
    bundle = tmp_path / "unsafe"
    done = pw("build", UNSAFE, "-o", str(bundle), *FAST)
    assert done.returncode == 1, done.stderr
    data = (bundle / "report.json").read_bytes()
    assert json.loads(data)["verdict"] == "fail"
    manifest = _manifest(bundle)
    assert manifest["report"]["verdict"] == "fail"
    assert manifest["report"]["hash"] == "sha256:" + hashlib.sha256(data).hexdigest()


def test_build_reports_are_byte_identical_across_runs(tmp_path: Path) -> None:
    """Full verification (proofs and mutants): no timings, paths or seeds leak into report.json."""
    first, second = tmp_path / "first", tmp_path / "second"
    other_cwd = tmp_path / "elsewhere"
    other_cwd.mkdir()
    assert pw("build", MILESTONE, "-o", str(first), env={"PYTHONHASHSEED": "1"}).returncode == 0
    done = pw(
        "build",
        str(REPO / MILESTONE),
        "-o",
        str(second),
        cwd=other_cwd,
        env={"PYTHONHASHSEED": "4242", "TZ": "Pacific/Kiritimati"},
    )
    assert done.returncode == 0, done.stderr
    assert (first / "report.json").read_bytes() == (second / "report.json").read_bytes()
    assert _manifest(first)["report"] == _manifest(second)["report"]
