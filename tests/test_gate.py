"""The safety gate: the shipped scenarios pass; unsafe and malformed scenarios are caught.

The gate runs each scenario against a real runtime (a temporary SQLite store,
its own ledger, a provider simulator on loopback, real OS processes for
crashes and races). These tests run the real command, as CI does, and a few
scenarios written here: one whose expectation does not hold (exit 1, naming
the scenario and the expectation, with the observed side taken from the
simulator), and malformed ones (exit 2, with the code, line and key).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from pactwright.cli.main import main

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "policies" / "scenarios"
SAFE = SCENARIOS / "safe_refund_committed_once.toml"


def _gate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pactwright.cli.main", "gate", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def _variant(tmp_path: Path, name: str, old: str, new: str, source: Path = SAFE) -> Path:
    """A copy of a shipped scenario with one line changed, its policy path still resolving."""
    text = source.read_text("utf-8")
    assert old in text, old
    text = text.replace(old, new).replace('policy = "../', f'policy = "{SCENARIOS.parent}/')
    text = text.replace('policy = "policies/', f'policy = "{SCENARIOS}/policies/')
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return path


def test_every_shipped_scenario_passes_the_gate(tmp_path: Path) -> None:
    started = time.monotonic()
    out = tmp_path / "gate.json"
    result = _gate("--format", "json", "--output", str(out))
    assert result.returncode == 0, result.stderr + out.read_text()
    assert time.monotonic() - started < 60
    report = json.loads(out.read_text())
    assert report["format"] == "pactwright.gate/1" and report["ok"] is True
    files = sorted(Path(r["file"]).name for r in report["results"])
    assert files == sorted(p.name for p in SCENARIOS.glob("*.toml"))
    assert len(files) >= 13
    for scenario in report["results"]:
        assert scenario["ok"] and all(e["ok"] for e in scenario["expectations"]), scenario["name"]


def test_the_report_comes_from_what_happened(tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    assert main(["gate", str(SAFE), "--format", "json", "--output", str(out)]) == 0
    (result,) = json.loads(out.read_text())["results"]
    seen = result["observed"]
    assert seen["provider"]["writes"] == 1 and seen["provider"]["effect_writes"] == {"refund_payment": 1}
    assert seen["agreement"]["ledger"]["customer"] == "64.90"
    assert [a["status"] for a in seen["approvals"]] == ["consumed"]
    (refund,) = [c for c in seen["effect_calls"] if c["effect"] == "refund_payment"]
    assert refund["phase"] == "acknowledged" and refund["provider_ref"] == "sim_1"
    assert seen["agreement"]["evidence"]["verifies"] is True


UNSAFE = [
    # (file name, line replaced, replacement, the expectation that must be named)
    ("two_writes_expected_one.toml", "writes = 1\n", "writes = 0\n", "writes"),
    ("refusal_that_never_happens.toml", "refusals = []\n", 'refusals = ["PW602"]\n', "refusals"),
    ("wrong_balance.toml", 'customer = "64.90"', 'customer = "64.91"', "ledger"),
]


@pytest.mark.parametrize(("name", "old", "new", "key"), UNSAFE, ids=[u[0] for u in UNSAFE])
def test_an_unsafe_scenario_fails_the_gate_naming_the_expectation(
    tmp_path: Path, name: str, old: str, new: str, key: str
) -> None:
    path = _variant(tmp_path, name, old, new)
    result = _gate(str(path), str(SAFE))
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if "error[PW665]" in ln]
    assert "scenario `safe refund committed once`" in line and name in line
    assert f"expectation `{key}` failed" in line
    assert "FAIL" in result.stdout and "PASS" in result.stdout  # the other scenario still passed


def test_a_scenario_expecting_a_second_write_that_the_provider_never_made_fails(tmp_path: Path) -> None:
    """The duplicate resend is deduplicated by the simulator: a scenario claiming two writes is contradicted."""
    path = _variant(tmp_path, "dup.toml", "writes = 1\n", "writes = 2\n", SCENARIOS / "duplicate_retry_one_write.toml")
    result = _gate(str(path))
    assert result.returncode == 1
    assert "expectation `writes` failed: expected 2, observed 1" in result.stderr


def test_a_step_that_cannot_run_fails_the_scenario(tmp_path: Path) -> None:
    path = _variant(tmp_path, "nogrant.toml", 'request = "issue"', 'request = "never-parked"')
    result = _gate(str(path))
    assert result.returncode == 1
    assert "error[PW666]" in result.stderr and "never-parked" in result.stderr


MALFORMED = [
    # (change, code, text the message must contain)
    (("writes = 1\n", "writse = 1\n"), "PW661", "`expect.writse`: unknown key"),
    (("writes = 1\n", 'writes = "1"\n'), "PW662", "`expect.writes`: must be an integer"),
    (('do = "drain"', 'do = "sleep"'), "PW662", "unknown step kind `sleep`"),
    (('as = "assistant:bot"', 'as = "bot"'), "PW662", "must be `ROLE:PARTY`"),
    (('key = "assess"', ""), "PW661", "`steps[1].key`: missing required key"),
    (("[expect]", "[expect"), "PW660", "not a TOML scenario"),
]


@pytest.mark.parametrize(("change", "code", "text"), MALFORMED, ids=[m[1] + "-" + m[2][:20] for m in MALFORMED])
def test_a_malformed_scenario_exits_2_with_its_code_and_line(
    tmp_path: Path, change: tuple[str, str], code: str, text: str
) -> None:
    path = _variant(tmp_path, "bad.toml", *change)
    result = _gate(str(path), str(SAFE))
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"error[{code}]" in result.stderr and text in result.stderr
    if code != "PW660":
        assert f"{path}:" in result.stderr  # file:line
    assert "PASS" not in result.stdout  # nothing ran


def test_the_line_named_is_the_key_s_line(tmp_path: Path) -> None:
    path = _variant(tmp_path, "bad.toml", "writes = 1\n", "writse = 1\n")
    number = next(n for n, ln in enumerate(path.read_text().splitlines(), 1) if ln.startswith("writse"))
    result = _gate(str(path))
    assert f"{path}:{number}: `expect.writse`" in result.stderr


def test_no_scenarios_is_a_usage_error(tmp_path: Path) -> None:
    result = _gate(str(tmp_path))
    assert result.returncode == 2 and "error[PW664]" in result.stderr


def test_junit_and_json_outputs_parse(tmp_path: Path) -> None:
    bad = _variant(tmp_path, "bad_writes.toml", "writes = 1\n", "writes = 3\n")
    junit = tmp_path / "gate.xml"
    assert main(["gate", str(SAFE), str(bad), "--format", "junit", "--output", str(junit)]) == 1
    suite = ET.parse(junit).getroot()  # noqa: S314 - the gate's own output
    assert suite.tag == "testsuite" and suite.get("tests") == "2" and suite.get("failures") == "1"
    cases = suite.findall("testcase")
    failing = [c for c in cases if c.find("failure") is not None]
    assert len(failing) == 1 and failing[0].get("classname") == "gate.bad_writes"
    failure = failing[0].find("failure")
    assert failure is not None and "writes" in (failure.get("message") or "")
    assert "expected 3, observed 1" in (failure.text or "")
    out = tmp_path / "gate.json"
    assert main(["gate", str(bad), "--format", "json", "--output", str(out)]) == 1
    doc = json.loads(out.read_text())
    (verdict,) = [e for e in doc["results"][0]["expectations"] if not e["ok"]]
    assert verdict == {"key": "writes", "expected": 3, "observed": 1, "ok": False}
