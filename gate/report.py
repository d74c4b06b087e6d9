"""The gate's report in text, JSON or JUnit XML, rendered from the observations and the verdicts.

Every line that judges an expectation shows both sides: what the scenario
expected and what the runtime, the ledger, the evidence chain and the
simulator showed.
"""

from __future__ import annotations

import json
from typing import Any
from xml.etree import ElementTree as ET

from pactwright.gate.runner import GateRun, ScenarioResult

__all__ = ["FORMATS", "failure_lines", "render"]

FORMATS = ("text", "json", "junit")


def _show(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def failure_lines(run: GateRun) -> list[str]:
    """One `error[PWnnn]` line per failed expectation or step, naming the scenario (for stderr)."""
    lines = []
    for result in run.results:
        where = f"scenario `{result.scenario.name}` ({result.scenario.path})"
        if result.error is not None:
            lines.append(f"error[{result.error.code}]: {where}: {result.error.message}")
        for verdict in result.failed:
            lines.append(f"error[PW665]: {where}: expectation `{verdict.key}` failed: expected "
                         f"{_show(verdict.expected)}, observed {_show(verdict.observed)}")  # fmt: skip
    return lines


def _text_one(result: ScenarioResult) -> list[str]:
    seen = result.observed
    head = (
        f"{'PASS' if result.ok else 'FAIL'}  {result.scenario.name}  ({result.scenario.path}, {result.seconds:.1f} s)"
    )
    provider = seen["provider"]
    agreement = seen["agreement"]
    lines = [head, f"  provider: {provider['writes']} writes {_show(provider['effect_writes'])}, "
                   f"{provider['requests']} requests, {provider['lookups']} lookups"]  # fmt: skip
    if agreement is None:
        lines.append("  agreement: not opened")
    elif "unreadable" in agreement:
        lines.append(f"  agreement: cannot be read: [{agreement['unreadable']['code']}] "
                     f"{agreement['unreadable']['message']}")  # fmt: skip
    else:
        lines.append(f"  agreement: state {agreement.get('state')}, version {agreement.get('version')}, "
                     f"ledger {_show(agreement.get('ledger'))}")  # fmt: skip
    lines.append(f"  effects: {_show(seen['effects'])}")
    refusals = [f"step {r['step']} {r['what']}: {r['code']}" for r in seen["refusals"]]
    lines.append(f"  refusals: {_show(refusals)}")
    if result.error is not None:
        lines.append(f"  STEP ERROR [{result.error.code}] {result.error.message}")
    for verdict in result.verdicts:
        mark = "ok  " if verdict.ok else "FAIL"
        lines.append(f"  {mark} {verdict.key}: expected {_show(verdict.expected)}, observed {_show(verdict.observed)}")
    return lines


def _text(run: GateRun) -> str:
    lines: list[str] = []
    for result in run.results:
        lines += [*_text_one(result), ""]
    failed = sum(not r.ok for r in run.results)
    lines.append(f"gate: {len(run.results)} scenarios, {len(run.results) - failed} passed, {failed} failed "
                 f"({run.seconds:.1f} s)")  # fmt: skip
    return "\n".join(lines) + "\n"


def _junit(run: GateRun) -> str:
    failed = sum(not r.ok for r in run.results)
    suite = ET.Element("testsuite", name="pactwright gate", tests=str(len(run.results)), failures=str(failed),
                       errors="0", time=f"{run.seconds:.3f}")  # fmt: skip
    for result in run.results:
        case = ET.SubElement(suite, "testcase", classname=f"gate.{result.scenario.path.stem}",
                             name=result.scenario.name, time=f"{result.seconds:.3f}")  # fmt: skip
        if not result.ok:
            names = [v.key for v in result.failed] + (["step"] if result.error is not None else [])
            failure = ET.SubElement(case, "failure", message=f"failed: {', '.join(names)}", type="PW665")
            failure.text = "\n".join(line for line in _text_one(result) if "FAIL" in line or "STEP ERROR" in line)
        out = ET.SubElement(case, "system-out")
        out.text = "\n".join(_text_one(result))
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def render(run: GateRun, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(run.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if fmt == "junit":
        return _junit(run)
    return _text(run)
