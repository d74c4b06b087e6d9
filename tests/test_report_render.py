"""report.json's schema, and the Markdown and HTML renderings drawn from it.

The reports are produced fresh from the reference policies (compiled in this
process, verified without z3 proofs), so the schema is checked against what
the verifier writes today, not against a stale copy. The renderings are
checked for content (each section says what the report says, and no more),
escaping, self-containment, and byte-for-byte determinism.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pactwright.canonical import canonical_bytes
from pactwright.verifier import _svg
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.render import report_files
from pactwright.verifier.render_html import inline, render_html
from pactwright.verifier.render_markdown import code, md, render_markdown
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests.bundles import reference_bundle

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "docs" / "report.schema.json"
POLICIES = ("unsafe_chargeback", "support_refund", "marketplace_milestone")
EUR = {"code": "EUR", "scale": 2, "asset": "EUR/2"}
# The unsafe fixture's first counterexample (`funds_available`): three commands commit, then the
# runtime refuses the chargeback at commit because escrow is empty. The second (`funds_not_stuck`)
# stops at `released`, where no command can ever commit while platform and seller hold money.
UNSAFE_PATH = ["fund", "deliver", "release"]
UNSAFE_EVENTS = [*UNSAFE_PATH, "refused chargeback"]

Json = dict[str, Any]


@pytest.fixture(scope="module")
def reports() -> dict[str, Json]:
    """report.json of each reference policy, as written (canonical bytes, parsed back)."""
    out = {}
    for name in POLICIES:
        report = verify_files(reference_bundle(name), VerifyOptions(bounds=Bounds(), proofs=False))
        out[name] = json.loads(canonical_bytes(report))
    return out


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture
def unsafe(reports: dict[str, Json]) -> Json:
    return copy.deepcopy(reports["unsafe_chargeback"])


def _counterexample_section(text: str, number: int) -> str:
    """The Markdown of counterexample `number` alone (the report has two)."""
    return text.split(f"### Counterexample {number}:", 1)[1].split("\n### ", 1)[0]


def _step_rows(section: str) -> list[str]:
    return [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]


def _errors(validator: jsonschema.Draft202012Validator, report: Json) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(report)]


def _with_fault_path(report: Json) -> Json:
    """The unsafe report with an effect fault path spliced in (a lost response, then a redelivery)."""
    report = copy.deepcopy(report)
    cx = report["counterexamples"][0]
    tail = cx["events"][-1]
    base = {
        "agreement": 1,
        "postings": [],
        "states_after": tail["states_after"],
        "balances_after": tail["balances_after"],
    }
    for step, kind, fault, phase in (
        (5, "fault", "lost_response", "uncertain"),
        (6, "runtime", None, "prepared"),
        (7, "dispatch", None, "acknowledged"),
    ):
        actor = "runtime" if kind == "runtime" else "worker"
        event = {"step": step, "kind": kind, "actor": actor, "fault": fault, "command": f"{kind} notify_buyer"}
        cx["events"].append({**event, "effect_phase": phase, **base})
    cx["length"] = len(cx["events"])
    report["coverage"]["effect_phases"] = {"chargeback:notify_buyer": ["prepared", "acknowledged", "uncertain"]}
    return report


# The schema -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", POLICIES)
def test_fresh_reports_match_the_schema(
    reports: dict[str, Json], validator: jsonschema.Draft202012Validator, name: str
) -> None:
    assert _errors(validator, reports[name]) == []


def test_schema_accepts_open_amount_entries(unsafe: Json, validator: jsonschema.Draft202012Validator) -> None:
    unsafe["amounts"] = [
        {
            "transition": "release",
            "posting": 0,
            "property": "portions sum to the amount",
            "verdict": "refuted",
            "witness": {"price": "1"},
            "witness_text": "price = 0.01",
            "detail": "10% of 0.01 rounds to 0.00",
            "solver_ms": 12,  # another field the proofs may add
        }
    ]
    unsafe["invariants"][0]["amounts"] = "violated at price = 1.00 (z3 smallest violating value)"
    unsafe["invariants"][0]["amount_witness"] = {"param": "price", "value": "100", "text": "1.00"}
    assert _errors(validator, unsafe) == []
    assert _errors(validator, _with_fault_path(unsafe)) == []


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("verdict",), "fial"),
        (("verdict",), "PASS"),
        (("invariants", 2, "verdict"), "holds_to_bound"),
        (("invariants", 2, "verdict"), "proven"),
        (("mutants", 0, "status"), "escaped"),
        (("exploration", "bound_hit"), "max_time"),
        (("candidate_hash",), "sha256:abc"),
        (("currency", "scale"), 9),
        (("counterexamples", 0, "events", 0, "balances_after", "escrow"), "1.00"),
    ],
)
def test_schema_rejects_a_misspelt_or_malformed_value(
    unsafe: Json, validator: jsonschema.Draft202012Validator, where: tuple[Any, ...], value: Any
) -> None:
    target: Any = unsafe
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    assert _errors(validator, unsafe), f"the schema accepted {where} = {value!r}"


@pytest.mark.parametrize(
    ("verdict", "complete", "allow_incomplete"),
    [("incomplete", True, False), ("incomplete", False, True), ("pass", False, False)],
)
def test_schema_ties_the_verdict_to_completeness(
    unsafe: Json, validator: jsonschema.Draft202012Validator, verdict: str, complete: bool, allow_incomplete: bool
) -> None:
    """`incomplete` is a run neither complete nor accepted; a pass over an incomplete run records the flag."""
    unsafe.update(verdict=verdict, complete=complete, allow_incomplete=allow_incomplete)
    assert _errors(validator, unsafe)


def test_schema_accepts_an_accepted_incomplete_pass(unsafe: Json, validator: jsonschema.Draft202012Validator) -> None:
    unsafe.update(verdict="pass", complete=False, allow_incomplete=True)
    for invariant in unsafe["invariants"]:
        invariant.update(verdict="holds-to-bound", counterexample=None)
    unsafe["counterexamples"] = []
    assert _errors(validator, unsafe) == []
    unsafe["exploration"]["unknown_queries"] = 2
    assert _errors(validator, unsafe) == []
    unsafe["exploration"]["unknown_queries"] = -1
    assert _errors(validator, unsafe)


def test_schema_objects_are_closed(unsafe: Json, validator: jsonschema.Draft202012Validator) -> None:
    for mutate in (
        lambda r: r.update(verdikt="pass"),
        lambda r: r.pop("currency"),
        lambda r: r.pop("complete"),
        lambda r: r.pop("allow_incomplete"),
        lambda r: r["bounds"].update(timeout=10),
        lambda r: r["invariants"][0].update(verdcit="violated"),
        lambda r: r["counterexamples"][0]["events"][0].update(colour="red"),
        lambda r: r["mutants"][0].update(note="x"),
    ):
        broken = copy.deepcopy(unsafe)
        mutate(broken)
        assert _errors(validator, broken)


def test_schema_ties_verdicts_to_counterexamples(unsafe: Json, validator: jsonschema.Draft202012Validator) -> None:
    violated = next(i for i in unsafe["invariants"] if i["verdict"] == "violated")
    violated["counterexample"] = None
    assert _errors(validator, unsafe)
    caught = copy.deepcopy(unsafe)
    caught["mutants"][0]["status"] = "caught"  # caught by nothing
    assert _errors(validator, caught)


# Markdown -------------------------------------------------------------------------------


def test_markdown_header_and_invariants_say_what_the_report_says(unsafe: Json) -> None:
    text = render_markdown(unsafe)
    assert text.startswith("## pactwright verify: FAIL — `marketplace.milestone.unsafe` 1.0.1\n")
    assert unsafe["candidate_hash"] in text
    assert "1 agreement, 1 fault per run, depth ≤ 64, ≤ 2,000,000 states" in text
    exploration = unsafe["exploration"]
    assert f"{exploration['states']} states, {exploration['transitions']} transitions" in text
    assert "state space exhausted" in text
    for invariant in unsafe["invariants"]:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{invariant['name']}`"))
        assert invariant["verdict"] in row
        assert invariant["method"] in row
    refused = next(line for line in text.splitlines() if line.startswith("| `funds_available` (built-in: "))
    assert refused.endswith("| — | **violated** | explicit-state search | #1 |")
    stuck = next(line for line in text.splitlines() if line.startswith("| `funds_not_stuck` (built-in: "))
    assert stuck.endswith("| — | **violated** | explicit-state search | #2 |")
    # The refused chargeback never commits: the policy's own invariants are not violated by it.
    for name in ("escrow_never_negative", "settles_once"):
        row = next(line for line in text.splitlines() if line.startswith(f"| `{name}` |"))
        assert "violated" not in row


def test_markdown_counterexample_is_a_numbered_event_table(unsafe: Json) -> None:
    text = render_markdown(unsafe)
    first, second = _counterexample_section(text, 1), _counterexample_section(text, 2)
    assert first.startswith(" `funds_available`\n")
    assert second.startswith(" `funds_not_stuck`\n")
    rows = _step_rows(first)
    assert [int(r.split("|")[1]) for r in rows] == [1, 2, 3, 4]
    assert [re.search(r"`([\w ]+)`", r)[1] for r in rows] == UNSAFE_EVENTS  # type: ignore[index]
    assert "| 3 | buyer | `release` | 4.1 | delivered → released |" in rows[2]
    # The refused command moves the agreement nowhere: no clause transition, no state change.
    assert rows[3].startswith("| 4 | arbiter | `refused chargeback` |  |  |")
    assert [re.search(r"`([\w ]+)`", r)[1] for r in _step_rows(second)] == UNSAFE_PATH  # type: ignore[index]
    assert "Parameters: fee = 10%, price = 1.00." in first
    assert "replayed against `transitions.json` and `ledger/*.num`" in text
    for violation in unsafe["counterexamples"][0]["violations"]:
        assert f"- `{violation['invariant']}`: " in text


def test_markdown_formats_money_with_the_reports_currency(unsafe: Json) -> None:
    assert unsafe["currency"] == EUR
    text = render_markdown(unsafe)
    rows = _step_rows(_counterexample_section(text, 1))  # columns: escrow, platform, seller, world
    assert rows[0].endswith("| **1.00** | 0.00 | 0.00 | **-1.00** |")
    assert rows[2].endswith("| **0.00** | **0.10** | **0.90** | -1.00 |")
    assert rows[3].endswith("| 0.00 | 0.10 | 0.90 | -1.00 |")  # the refused chargeback changes nothing
    assert "| money | EUR, 2 decimals |" in text
    assert "Balances after each step are in EUR" in text
    assert "- step 3: escrow:a1 → platform:fees 0.10" in text
    # A report without a currency (an older one) keeps minor units, and says so.
    del unsafe["currency"]
    text = render_markdown(unsafe)
    rows = _step_rows(_counterexample_section(text, 1))
    assert rows[2].endswith("| **0** | **10** | **90** | -100 |")
    assert rows[3].endswith("| 0 | 10 | 90 | -100 |")
    assert "| money | minor units (the report names no currency) |" in text
    assert "Balances after each step are in minor units" in text


def test_markdown_shows_faults_and_effect_phases(unsafe: Json) -> None:
    text = render_markdown(_with_fault_path(unsafe))
    row = next(line for line in text.splitlines() if line.startswith("| 5 |"))
    assert "`fault notify_buyer`" in row
    assert "| lost_response | uncertain |" in row
    assert "| `chargeback:notify_buyer` | prepared, acknowledged, uncertain |" in text


def test_markdown_lists_mutants_coverage_warnings_and_limits(unsafe: Json) -> None:
    unsafe["warnings"] = ["effect `notify` has no strategy"]
    unsafe["coverage"]["transitions_never_fired"] = ["refund"]
    text = render_markdown(unsafe)
    caught = [m for m in unsafe["mutants"] if m["status"] == "caught"]
    uncaught = [m for m in unsafe["mutants"] if m["status"] == "uncaught"]
    # `settles_once` is not violated by the unsafe policy itself, so it can catch a mutant.
    assert caught and uncaught
    assert all("settles_once" in m["caught_by"] for m in caught)
    assert f"{len(unsafe['mutants'])} mutants: {len(caught)} caught, {len(uncaught)} uncaught." in text
    for mutant in unsafe["mutants"]:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{mutant['id']}`"))
        assert f"| {mutant['clause']} |" in row
        assert all(f"`{name}`" in row for name in mutant["caught_by"])
    assert "invariants already violated above cannot catch one" in text
    assert "- Transitions never fired: `refund`" in text
    assert "- Clauses never exercised: 8.1" in text  # the chargeback is always refused
    assert "- effect `notify` has no strategy" in text
    limits = text.split("### What this report does not prove\n\n", 1)[1]
    for item in unsafe["does_not_prove"]:
        assert f"- {item}\n" in limits


def test_markdown_of_a_pass_claims_no_more_than_the_bounds(reports: dict[str, Json]) -> None:
    report = copy.deepcopy(reports["marketplace_milestone"])
    text = render_markdown(report)
    assert "**PASS**: no invariant violated in the whole state space within the bounds" in text
    assert "### Counterexample" not in text
    assert "proved 0 ·" in text
    assert "| proved |" not in text
    report["exploration"].update(exhausted=False, bound_hit="max_states")
    report["invariants"][0]["verdict"] = "unknown"
    text = render_markdown(report)
    assert "whole state space" not in text
    assert f"in the {report['exploration']['states']} states explored before the `max_states` bound" in text
    assert "1 `unknown` invariant" in text


def test_markdown_says_when_a_path_was_not_replayed(unsafe: Json) -> None:
    unsafe["counterexamples"][0]["replayed"] = False
    text = render_markdown(unsafe)
    assert "**Not replayed**" in text
    assert "replayed against" not in text.split("### Counterexample 1", 1)[1].split("###", 1)[0]


def test_markdown_amount_results(unsafe: Json) -> None:
    assert "The report has no amount results." in render_markdown(unsafe)
    proved = {"transition": "release", "posting": 0, "property": "portions sum to the amount", "verdict": "proved"}
    refuted = {"transition": "release", "posting": 0, "property": "fee ≤ cap", "verdict": "refuted"}
    unsafe["amounts"] = [
        {**proved, "witness": None, "witness_text": None, "detail": None},
        {**refuted, "witness": {"price": "3"}, "detail": "z3"},
    ]
    text = render_markdown(unsafe)
    assert "**FAIL**: 2 of 9 invariants violated; 2 counterexamples replayed against the compiled artifacts; " in text
    assert "; 1 refuted amount property.\n" in text
    assert "| `release` | 0 | portions sum to the amount | proved |  |  |" in text
    assert '| `release` | 0 | fee ≤ cap | **refuted** | {"price": "3"} | z3 |' in text


def test_markdown_escapes_what_would_break_a_table(unsafe: Json) -> None:
    assert md("a | b <script> x <= 1") == "a \\| b &lt;script> x <= 1"
    assert md("keep `a|b` as code") == "keep `a\\|b` as code"
    assert code("x`y") == "``x`y``"
    unsafe["warnings"] = ["pipe | and <img src=x onerror=alert(1)>"]
    unsafe["counterexamples"][0]["violations"][0]["explanation"] = "a | b\nc"
    text = render_markdown(unsafe)
    assert "<img" not in text
    assert "- pipe \\| and &lt;img src=x onerror=alert(1)>" in text
    assert ": a \\| b c\n" in text


# HTML -----------------------------------------------------------------------------------


class _Dom(HTMLParser):
    """Every start tag with its attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def _dom(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = _Dom()
    parser.feed(html)
    return parser.tags


def _classes(attrs: dict[str, str]) -> set[str]:
    return set(attrs.get("class", "").split())


def test_html_is_self_contained(reports: dict[str, Json]) -> None:
    for report in reports.values():
        html = render_html(report)
        tags = _dom(html)
        names = {tag for tag, _ in tags}
        assert not names & {"script", "link", "img", "iframe", "object", "embed", "base"}, names
        for tag, attrs in tags:
            for key in ("src", "href", "action", "srcset"):
                value = attrs.get(key, "")
                assert not value or value.startswith("#"), f"<{tag} {key}={value!r}> points off the page"
        assert "@import" not in html
        assert "@font-face" not in html
        assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", html)), (
            "only in-page url(#...) references"
        )


def test_html_escapes_names_and_messages(unsafe: Json) -> None:
    unsafe["warnings"] = ["<script>alert(1)</script> & `<b>code</b>`"]
    unsafe["pact"]["id"] = "x<y>"
    html = render_html(unsafe)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; <code>&lt;b&gt;code&lt;/b&gt;</code>" in html
    assert "x&lt;y&gt;" in html


def test_html_marks_the_counterexample_path_in_the_state_machine(unsafe: Json) -> None:
    tags = _dom(render_html(unsafe))
    svg = [attrs for tag, attrs in tags if tag == "svg" and "machine" in _classes(attrs)]
    assert [s["id"] for s in svg] == ["cx1-svg", "cx2-svg"]
    machine = {(t["id"], s) for t in unsafe["machine"]["transitions"] for s in t["from"]}
    for cx, steps in (("cx1", 4), ("cx2", 3)):
        edges = [a for t, a in tags if t == "g" and "edge" in _classes(a) and a["id"].startswith(f"{cx}-")]
        assert {(e["data-transition"], e["data-from"]) for e in edges} == machine
        on_path = sorted(e["data-transition"] for e in edges if "cx-path" in _classes(e))
        assert on_path == sorted(UNSAFE_PATH)  # the refused chargeback is not an edge taken
        states = {
            a["data-state"]: _classes(a)
            for t, a in tags
            if t == "g" and "node" in _classes(a) and a["id"].startswith(f"{cx}-")
        }
        assert set(states) == {s["name"] for s in unsafe["machine"]["states"]}
        assert "initial" in states["draft"]
        assert "cx-end" in states["released"]
        assert "cx-end" not in states["refunded"] and "final" in states["refunded"]
        rows = [a["data-step"] for t, a in tags if t == "tr" and a.get("id", "").startswith(f"cx-{cx[2:]}-step-")]
        assert rows == [str(n) for n in range(1, steps + 1)]
    badges = [a for t, a in tags if t == "g" and "step-badge" in _classes(a) and a["id"].startswith("cx1-")]
    assert [(b["data-step"], b.get("data-transition")) for b in badges[:3]] == [
        (str(n), name) for n, name in enumerate(UNSAFE_PATH, 1)
    ]
    assert (badges[3]["data-step"], badges[3]["data-kind"], badges[3]["data-state"]) == ("4", "refused", "released")


def test_html_puts_other_events_on_their_state(unsafe: Json) -> None:
    tags = _dom(render_html(_with_fault_path(unsafe)))
    badges = {
        a["data-step"]: a for t, a in tags if t == "g" and "step-badge" in _classes(a) and a["id"].startswith("cx1-")
    }
    assert sorted(badges, key=int) == [str(n) for n in range(1, 8)]
    assert badges["5"]["data-state"] == "released"  # where the refused chargeback left the agreement
    assert {"kind-fault", "has-fault"} <= _classes(badges["5"])


def test_html_of_a_pass_draws_the_machine_without_a_path(reports: dict[str, Json]) -> None:
    report = reports["marketplace_milestone"]
    html = render_html(report)
    tags = _dom(html)
    assert [a["id"] for t, a in tags if t == "svg" and "machine" in _classes(a)] == ["machine-svg"]
    assert not [a for t, a in tags if "cx-path" in _classes(a) or "step-badge" in _classes(a)]
    assert '<body class="verdict-pass">' in html
    for item in report["does_not_prove"]:
        assert f"<li>{inline(item)}</li>" in html


def test_html_money_uses_the_currency(unsafe: Json) -> None:
    html = render_html(unsafe)
    assert "balances after (EUR)" in html
    assert '<td class="num money changed">-1.00</td>' in html
    del unsafe["currency"]
    html = render_html(unsafe)
    assert "balances after (minor units)" in html
    assert '<td class="num money changed">-100</td>' in html


# Both, and the layout -------------------------------------------------------------------


def test_report_files_carry_all_three_renderings(unsafe: Json) -> None:
    files = report_files(unsafe)
    assert sorted(files) == ["report.html", "report.json", "report.md"]
    assert files["report.md"].decode("utf-8") == render_markdown(unsafe)
    assert files["report.html"].decode("utf-8") == render_html(unsafe)


def test_renderings_are_byte_stable_across_processes(unsafe: Json, tmp_path: Path) -> None:
    source = tmp_path / "report.json"
    source.write_bytes(canonical_bytes(unsafe))
    script = (
        "import hashlib, json, sys\n"
        "from pactwright.verifier.render_html import render_html\n"
        "from pactwright.verifier.render_markdown import render_markdown\n"
        "r = json.loads(open(sys.argv[1], 'rb').read())\n"
        "print(*(hashlib.sha256(f(r).encode()).hexdigest() for f in (render_markdown, render_html)))\n"
    )
    expected = " ".join(
        hashlib.sha256(text.encode()).hexdigest() for text in (render_markdown(unsafe), render_html(unsafe))
    )
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed, TZ="Pacific/Chatham", LC_ALL="C")
        out = subprocess.run(
            [sys.executable, "-c", script, str(source)], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == expected


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize("name", POLICIES)
def test_layout_keeps_states_and_labels_apart(reports: dict[str, Json], name: str) -> None:
    layout = _svg.layout(reports[name]["machine"])
    boxes = [(n.x, n.y, n.x + n.w, n.y + n.h) for n in layout.nodes]
    labels = [
        (
            e.label_at.x - e.label_w / 2,
            e.label_at.y - e.label_h / 2,
            e.label_at.x + e.label_w / 2,
            e.label_at.y + e.label_h / 2,
        )
        for e in layout.edges
    ]
    for i, a in enumerate(boxes + labels):
        for b in (boxes + labels)[i + 1 :]:
            assert not _overlap(a, b), (a, b)
    for box in boxes + labels:
        assert box[0] >= 0 and box[1] >= 0
        assert box[2] <= layout.width and box[3] <= layout.height
    initial = next(n for n in layout.nodes if n.initial)
    assert initial.x == min(n.x for n in layout.nodes)


def test_layout_handles_cycles_self_loops_and_unreachable_states() -> None:
    machine = {
        "states": [
            {"name": "open", "initial": True, "final": False},
            {"name": "held", "initial": False, "final": False},
            {"name": "closed", "initial": False, "final": True},
            {"name": "orphan", "initial": False, "final": False},
        ],
        "transitions": [
            {"id": "hold", "clause": "1", "from": ["open"], "to": "held"},
            {"id": "resume", "clause": "2", "from": ["held"], "to": "open"},
            {"id": "nudge", "clause": None, "from": ["held"], "to": "held"},
            {"id": "close", "clause": "3", "from": ["open", "held", "orphan"], "to": "closed"},
        ],
    }
    layout = _svg.layout(machine)
    x = {n.name: n.x for n in layout.nodes}
    assert x["open"] < x["held"] < x["closed"]
    resume = layout.edge("resume", "held")
    nudge = layout.edge("nudge", "held")
    assert resume is not None and resume.back
    assert nudge is not None and nudge.loop
    # A back edge is drawn from its own source: the path starts at the right end, at `held`.
    assert resume.d.startswith(f"M{_svg.fmt(x['held'])},")
    assert _svg.layout(machine) == layout
    diagram = _svg.diagram(layout, "t", [_svg.Step(1, "command", "hold", "open", "held", "held", None)])
    assert diagram.on_path == frozenset({("hold", "open")})
    assert [b.step for b in diagram.badges] == [1]
