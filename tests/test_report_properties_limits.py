"""The report renderings (HTML, Markdown, text, JUnit) list liveness properties and limits (new in 1.1).

A reviewer signs what the report says: a property or a limit that only the
JSON mentions would be a claim nobody reads. The text summary, Markdown and
HTML of the 1.1 reference policies each name every property and limit with
its verdict; a report without them renders as before (the golden and
byte-stability tests cover that).
"""

from __future__ import annotations

from pathlib import Path

from pactwright.canonical import load_json
from pactwright.verifier.render_text import render_summary
from tests.signed_bundles import compile_verified

ROOT = Path(__file__).resolve().parent.parent


def _files(name: str) -> dict[str, bytes]:
    path = ROOT / "policies" / f"{name}.pact"
    return compile_verified(path.read_bytes(), path.name)[0]


def test_properties_are_listed_with_their_verdicts_in_every_rendering() -> None:
    files = _files("escrow_liveness")
    report = load_json(files["report.json"])
    names = [p["name"] for p in report["properties"]]
    assert names == ["funded_is_settled", "refund_is_answered"]
    markdown, html = files["report.md"].decode(), files["report.html"].decode()
    text = render_summary(report, 2)
    assert "### Liveness properties" in markdown
    for prop in report["properties"]:
        assert f"| `{prop['name']}` | {prop['clause']} | {prop['verdict']} |" in markdown
        assert f'data-property="{prop["name"]}" data-verdict="{prop["verdict"]}"' in html
        assert f"{prop['verdict'].upper()} property {prop['name']}" in text


def test_limits_are_listed_and_one_agreement_is_not_called_a_check() -> None:
    files = _files("desk_limit")
    report = load_json(files["report.json"])
    (limit,) = report["limits"]
    assert limit["verdict"] == "not-checked-across-agreements"  # one agreement explored: never "holds"
    markdown, html = files["report.md"].decode(), files["report.html"].decode()
    assert "### Limits across agreements" in markdown and "not-checked-across-agreements" in markdown
    assert f'data-limit="{limit["name"]}" data-verdict="not-checked-across-agreements"' in html
    assert f"NOT-CHECKED-ACROSS-AGREEMENTS {limit['name']}" in render_summary(report, 2)


def test_junit_has_a_case_per_property_and_limit_and_never_passes_an_unchecked_limit() -> None:
    import xml.etree.ElementTree as ET

    from pactwright.verifier.render_junit import render_junit

    liveness = load_json(_files("escrow_liveness")["report.json"])
    suite = ET.fromstring(render_junit(liveness))  # noqa: S314 - our own output, parsed to check it
    cases = {c.get("name"): c for c in suite.iter("testcase") if c.get("classname", "").endswith(".properties")}
    assert sorted(cases) == ["funded_is_settled", "refund_is_answered"]
    assert all(c.find("failure") is None and c.find("skipped") is None for c in cases.values())
    assert int(suite.get("tests", "0")) == len(liveness["invariants"]) + 2
    limits = load_json(_files("desk_limit")["report.json"])
    suite = ET.fromstring(render_junit(limits))  # noqa: S314 - our own output, parsed to check it
    (case,) = [c for c in suite.iter("testcase") if c.get("classname", "").endswith(".limits")]
    assert case.find("skipped") is not None  # one agreement explored: not checked, so not a pass
    assert int(suite.get("skipped", "0")) >= 1
