"""JUnit XML for CI systems: one test case per invariant, failures carry the path."""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr


def render_junit(report: dict[str, Any]) -> str:
    cases = []
    failures = 0
    for invariant in report["invariants"]:
        name = quoteattr(invariant["name"])
        classname = quoteattr(f"{report['pact']['id']}.invariants")
        body = ""
        if invariant["verdict"] == "violated":
            failures += 1
            cx = report["counterexamples"][invariant["counterexample"]]
            steps = "\n".join(f"{e['step']}. {e['actor']} {e.get('command', e['kind'])}" for e in cx["events"])
            body = f'<failure message="violated">{escape(steps)}</failure>'
        elif invariant["verdict"] in ("vacuous-suspect", "unknown"):
            body = f"<system-out>{escape(invariant['verdict'])}</system-out>"
        cases.append(f"    <testcase classname={classname} name={name}>{body}</testcase>")
    header = (
        f"<testsuite name={quoteattr('pactwright verify ' + report['pact']['id'])} "
        f'tests="{len(report["invariants"])}" failures="{failures}" errors="0">'
    )
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + header + "\n" + "\n".join(cases) + "\n</testsuite>\n"
