"""JUnit XML for CI systems: one test case per invariant, failures carry the path.

CI dashboards show JUnit cases as passed, failed or skipped, so the
verdicts map onto those without claiming more: a violation is a failure;
an invariant a bound-limited run did not decide (verdict `incomplete`) is
skipped, not passed. Each case carries its verdict and vacuity as
properties, and the suite carries the counts every other rendering prints
(`_report_view.tally`), so a reader of the XML sees a proved invariant that
no mutant breaks as both.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from pactwright.verifier._report_view import VERDICT_MEANING, is_vacuous, strength, tally, verdict_label, verdict_note


def _properties(pairs: list[tuple[str, str]], indent: str) -> str:
    rows = "".join(f"{indent}  <property name={quoteattr(k)} value={quoteattr(v)}/>\n" for k, v in pairs)
    return f"{indent}<properties>\n{rows}{indent}</properties>"


def render_junit(report: dict[str, Any]) -> str:
    cases = []
    failures = skipped = 0
    incomplete = report["verdict"] == "incomplete"
    note = verdict_note(report)
    for invariant in report["invariants"]:
        name = quoteattr(invariant["name"])
        classname = quoteattr(f"{report['pact']['id']}.invariants")
        parts = [
            _properties(
                [
                    ("verdict", invariant["verdict"]),
                    ("strength", strength(invariant)),
                    ("vacuous_suspect", "true" if is_vacuous(invariant) else "false"),
                ],
                "      ",
            )
        ]
        if invariant["verdict"] == "violated":
            failures += 1
            cx = report["counterexamples"][invariant["counterexample"]]
            steps = "\n".join(f"{e['step']}. {e['actor']} {e.get('command', e['kind'])}" for e in cx["events"])
            parts.append(f'      <failure message="violated">{escape(steps)}</failure>')
        elif incomplete and strength(invariant) != "proved":
            skipped += 1
            why = "not decided: the run is incomplete (a bound stopped the search and no proof covers it)"
            parts.append(f"      <skipped message={quoteattr(why)}/>")
        label = verdict_label(invariant)
        if is_vacuous(invariant) or invariant["verdict"] == "unknown" or (note and strength(invariant) != "proved"):
            meaning = VERDICT_MEANING["vacuous-suspect" if is_vacuous(invariant) else invariant["verdict"]]
            text = f"{label}: {meaning}" + (f" ({note})" if note else "")
            parts.append(f"      <system-out>{escape(text)}</system-out>")
        body = "\n".join(parts)
        cases.append(f"    <testcase classname={classname} name={name}>\n{body}\n    </testcase>")
    extra, extra_failures, extra_skipped = _liveness_and_limits(report)
    cases += extra
    failures += extra_failures
    skipped += extra_skipped
    counts = tally(report["invariants"])
    suite_props = [("verdict", report["verdict"] + (f" ({note})" if note else ""))]
    suite_props += [(verdict, str(count)) for verdict, count in counts.items()]
    header = (
        f"<testsuite name={quoteattr('pactwright verify ' + report['pact']['id'])} "
        f'tests="{len(report["invariants"]) + len(extra)}" failures="{failures}" errors="0" skipped="{skipped}">'
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        + header
        + "\n"
        + _properties(suite_props, "    ")
        + "\n"
        + "\n".join(cases)
        + "\n</testsuite>\n"
    )


def _liveness_and_limits(report: dict[str, Any]) -> tuple[list[str], int, int]:
    """Cases for liveness properties and limits across agreements (new in 1.1); none for a report without.

    A violated one fails; a property the run could not decide (`incomplete`) and a limit not checked across
    agreements are skipped, never passed.
    """
    cases: list[str] = []
    failures = skipped = 0
    kinds = (("properties", "properties", "incomplete"), ("limits", "limits", "not-checked-across-agreements"))
    for key, suffix, undecided in kinds:
        for item in report.get(key, []):
            classname = quoteattr(f"{report['pact']['id']}.{suffix}")
            parts = [_properties([("verdict", item["verdict"])], "      ")]
            if item["verdict"] == "violated":
                failures += 1
                parts.append(f'      <failure message="violated">{escape(item.get("method", ""))}</failure>')
            elif item["verdict"] == undecided:
                skipped += 1
                parts.append(f"      <skipped message={quoteattr(item.get('method', undecided))}/>")
            body = "\n".join(parts)
            cases.append(
                f"    <testcase classname={classname} name={quoteattr(item['name'])}>\n{body}\n    </testcase>"
            )
    return cases, failures, skipped
