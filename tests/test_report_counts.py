"""One report, five renderings, the same counts: vacuity is never hidden by a proof.

Defect 7: invariants that report.json flags `vacuous_suspect` showed as green
`proved` with `vacuous-suspect: 0` in the text summary and report.html. A
small policy is verified in this process with proofs and mutants on, so that
some invariants are proved and yet no mutant breaks them; the report is then
rendered as the text summary, Markdown, HTML and JUnit, and each rendering
is parsed back on its own terms (its summary counts, and its per-invariant
rows) and compared with counts taken from report.json here, by the rule of
docs/reports.md, not through the renderers' shared code.
"""

from __future__ import annotations

import copy
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import pytest

from pactwright.canonical import canonical_bytes
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.render_html import render_html
from pactwright.verifier.render_junit import render_junit
from pactwright.verifier.render_markdown import render_markdown
from pactwright.verifier.render_text import render_summary
from pactwright.verifier.verify import VerifyOptions, verify_files

Json = dict[str, Any]
KINDS = ("proved", "holds-to-bound", "violated", "vacuous-suspect", "unknown")
# Seller and escrow can only be broken by bugs the mutants do not make: proved, and vacuous-suspect too.
POLICY = """pact "test.vacuous" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money = 25.00

account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{seller}:payable"

state draft initial
state funded
state paid final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition release: funded -> paid {
  by buyer
  transfer price from escrow to seller
}

clause "3.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "3.2" invariant seller_never_negative: balance(seller) >= 0
clause "3.3" invariant paid_once: applied(release) <= 1
"""


@pytest.fixture(scope="module")
def verified() -> Json:
    result = check_bytes(POLICY.encode("utf-8"))
    assert result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, "vacuous.pact")
    report = verify_files(files, VerifyOptions(bounds=Bounds()))
    doc: Json = json.loads(canonical_bytes(report))
    return doc


def _variants(report: Json) -> dict[str, Json]:
    """The verified report, and edits of it that exercise the other verdicts."""
    bounded = copy.deepcopy(report)
    # A bounded invariant no mutant breaks (the verdict mutation gives it), beside the proved-and-vacuous ones.
    target = next(i for i in bounded["invariants"] if i["name"] == "paid_once")
    target.update(verdict="vacuous-suspect", vacuous_suspect=True, method="explicit-state search")
    unknown = copy.deepcopy(report)
    unknown["invariants"][0].update(verdict="unknown", method="the solver gave no answer")
    unknown["invariants"][0].pop("vacuous_suspect", None)
    return {"verified": report, "bounded vacuous": bounded, "unknown": unknown}


def expected(report: Json) -> dict[str, int]:
    """Counts from report.json by the documented rule: vacuity is a flag beside the strength."""
    verdicts = [i["verdict"] for i in report["invariants"]]
    return {
        "proved": verdicts.count("proved"),
        "holds-to-bound": verdicts.count("holds-to-bound") + verdicts.count("vacuous-suspect"),
        "violated": verdicts.count("violated"),
        "vacuous-suspect": sum(
            1 for i in report["invariants"] if i["verdict"] == "vacuous-suspect" or i.get("vacuous_suspect") is True
        ),
        "unknown": verdicts.count("unknown"),
    }


def _proved_and_vacuous(report: Json) -> set[str]:
    return {i["name"] for i in report["invariants"] if i["verdict"] == "proved" and i.get("vacuous_suspect")}


# Parsing each rendering back ---------------------------------------------------------------


def text_counts(report: Json) -> tuple[dict[str, int], set[str]]:
    text = render_summary(report, 2)
    found = re.search(
        r"^proved: (\d+)   held to bound: (\d+)   violated: (\d+)   vacuous-suspect: (\d+)(?:   unknown: (\d+))?$",
        text,
        re.MULTILINE,
    )
    assert found is not None, text
    counts = dict(zip(KINDS, (int(g or 0) for g in found.groups()), strict=True))  # unknown: printed when not 0
    flagged = set(re.findall(r"^  proved        (\S+) \(vacuous-suspect\)$", text, re.MULTILINE))
    return counts, flagged


def _md_cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]]


def markdown_counts(report: Json) -> tuple[dict[str, int], set[str], dict[str, int]]:
    text = render_markdown(report)
    tally = re.search(
        r"^proved (\d+) · holds-to-bound (\d+) · violated (\d+) · vacuous-suspect (\d+) · unknown (\d+)$",
        text,
        re.MULTILINE,
    )
    assert tally is not None, text
    counts = dict(zip(KINDS, map(int, tally.groups()), strict=True))
    section = text.split("### Invariants", 1)[1].split("\n### ", 1)[0]
    rows = [_md_cells(line) for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) == len(report["invariants"])
    flagged, per_row = set(), dict.fromkeys(KINDS, 0)
    for row in rows:
        name, verdict = re.match(r"`([^`]+)`", row[0])[1], row[2].strip("*")  # type: ignore[index]
        strength = "holds-to-bound" if verdict.startswith("vacuous-suspect") else verdict.split(",")[0]
        per_row[strength] += 1
        if "vacuous-suspect" in verdict:
            per_row["vacuous-suspect"] += 1
            if strength == "proved":
                flagged.add(name)
    return counts, flagged, per_row


class _HtmlInvariants(HTMLParser):
    """The tally chips and the invariant rows' data attributes of report.html."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str | None]] = []
        self.chips: dict[str, int] = {}
        self._chip: str | None = None
        self._in_tally = False
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "ul" and "tally" in classes:
            self._in_tally = True
        elif tag == "li" and self._in_tally:
            self._chip, self._text = next(c[2:] for c in classes if c.startswith("v-")), ""
        elif tag == "tr" and "data-invariant" in attributes:
            self.rows.append(attributes)

    def handle_data(self, data: str) -> None:
        if self._chip is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "li" and self._chip is not None:
            self.chips[self._chip] = int(self._text.split()[0])
            self._chip = None
        elif tag == "ul":
            self._in_tally = False


def html_counts(report: Json) -> tuple[dict[str, int], set[str], dict[str, int]]:
    parser = _HtmlInvariants()
    parser.feed(render_html(report))
    counts = {kind: parser.chips[kind] for kind in KINDS}
    assert len(parser.rows) == len(report["invariants"])
    per_row = dict.fromkeys(KINDS, 0)
    flagged = set()
    for row in parser.rows:
        per_row[str(row["data-strength"])] += 1
        if row["data-vacuous"] == "true":
            per_row["vacuous-suspect"] += 1
            if row["data-strength"] == "proved":
                flagged.add(str(row["data-invariant"]))
    return counts, flagged, per_row


def junit_counts(report: Json) -> tuple[dict[str, int], set[str], dict[str, int]]:
    suite = ET.fromstring(render_junit(report).encode("utf-8"))  # noqa: S314 - our own output, parsed to check it
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    counts = {kind: int(str(props[kind])) for kind in KINDS}
    per_row = dict.fromkeys(KINDS, 0)
    flagged = set()
    cases = suite.findall("testcase")
    assert len(cases) == len(report["invariants"])
    for case in cases:
        case_props = {p.get("name"): p.get("value") for p in case.findall("properties/property")}
        per_row[str(case_props["strength"])] += 1
        if case_props["vacuous_suspect"] == "true":
            per_row["vacuous-suspect"] += 1
            if case_props["strength"] == "proved":
                flagged.add(str(case.get("name")))
    assert per_row["violated"] == int(suite.get("failures", "-1"))
    return counts, flagged, per_row


# The tests -------------------------------------------------------------------------------------


def test_the_policy_has_proved_invariants_that_no_mutant_breaks(verified: Json) -> None:
    """The premise of defect 7, from the verifier itself: some invariants are both proved and vacuous-suspect."""
    assert verified["verdict"] == "pass"
    assert _proved_and_vacuous(verified), [(i["name"], i["verdict"]) for i in verified["invariants"]]
    assert expected(verified)["vacuous-suspect"] >= 1


@pytest.mark.parametrize("variant", ["verified", "bounded vacuous", "unknown"])
def test_every_rendering_prints_the_counts_of_report_json(verified: Json, variant: str) -> None:
    report = _variants(verified)[variant]
    want = expected(report)
    proved_vacuous = _proved_and_vacuous(report)
    text, text_flagged = text_counts(report)
    assert text == want, "text summary"
    assert text_flagged == proved_vacuous, "text summary"
    for name, render in (("markdown", markdown_counts), ("html", html_counts), ("junit", junit_counts)):
        counts, flagged, per_row = render(report)
        assert counts == want, name
        assert per_row == want, f"{name}: the rows disagree with the summary"
        assert flagged == proved_vacuous, name


def test_a_proof_does_not_hide_vacuity_in_the_html_row(verified: Json) -> None:
    html = render_html(verified)
    for name in _proved_and_vacuous(verified):
        row = re.search(rf'<tr [^>]*data-invariant="{name}"[^>]*>.*?</tr>', html, re.DOTALL)
        assert row is not None
        assert 'data-verdict="proved"' in row[0]
        assert ">proved</span>" in row[0]
        assert ">vacuous-suspect</span>" in row[0]
