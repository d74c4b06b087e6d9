"""`pactwright diff --format markdown`: a pull-request comment that a Markdown renderer shows as intended.

The comment is rendered with markdown-it (CommonMark with GFM tables, as a
code host renders it) and read back as HTML: every table row has its seven
(or six) cells, the downgrades come before the changes, and a value holding
`|`, backticks or markup stays inside its one cell as literal code.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from pactwright.cli.main import main
from pactwright.compiler.diff_markdown import code, render_diff_markdown

ROOT = Path(__file__).resolve().parent.parent
FIXED = ROOT / "tests" / "planted" / "approval_less_payout.fixed.pact"
BUG = ROOT / "tests" / "planted" / "approval_less_payout.bug.pact"


class _Tables(HTMLParser):
    """The rendered tables as lists of rows of cell texts; `code` counts the code spans per cell."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.codes: list[list[list[int]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "table":
            self.tables.append([])
            self.codes.append([])
        elif tag == "tr":
            self.tables[-1].append([])
            self.codes[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
            self.codes[-1][-1].append(0)
        elif tag == "code" and self._cell is not None:
            self.codes[-1][-1][-1] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _render(markdown: str) -> tuple[str, _Tables]:
    html = MarkdownIt("commonmark").enable("table").render(markdown)
    tables = _Tables()
    tables.feed(html)
    return html, tables


def _diff(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code_ = main(["diff", str(FIXED), str(BUG), "--format", "markdown", *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code_, out


def test_the_comment_renders_downgrades_then_changes_as_tables(capsys: pytest.CaptureFixture[str]) -> None:
    status, markdown = _diff(capsys)
    assert status == 0
    html, tables = _render(markdown)
    assert html.index("Safety downgrades: 3 flagged") < html.index("3 changed")
    downgrades, changes = tables.tables
    assert downgrades[0] == ["Level", "Where", "Clause", "What", "Before", "After"]
    assert ["downgrade", "transition pay", "2", "approval dropped", "by supervisor not requester", "none"] in downgrades
    assert all(len(row) == 6 for row in downgrades)
    assert all(len(row) == 7 for row in changes)
    assert ["changed", "effects", "send_payout", "", "risk", "R3", "R2"] in changes
    # An added rule has no fields: its summary is what it now is, in the New column.
    assert ["added", "rules", "R2", "", "", "", "decision=allow, risk=R2"] in changes


def test_fail_on_downgrade_still_exits_1_with_the_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    status, markdown = _diff(capsys, "--fail-on-downgrade")
    assert status == 1
    assert "**Safety downgrades: 3 flagged**" in markdown


def test_no_changes_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(FIXED), str(FIXED), "--format", "markdown"]) == 0
    html, tables = _render(capsys.readouterr().out)
    assert "No semantic changes." in html
    assert "No safety downgrades." in html
    assert tables.tables == []


@pytest.mark.parametrize(
    "value",
    ["a | b", "`x`", "``y`` and `z`", "**bold** <b>raw</b> [link](http://e)", "_under_ \\ back", "", "`"],
)
def test_a_value_stays_literal_code_in_its_one_cell(value: str) -> None:
    diff = {
        "old": {"pact": {"id": "p", "version": "1.0.0"}, "candidate_hash": "sha256:" + "0" * 64},
        "new": {"pact": {"id": "p", "version": "1.0.1"}, "candidate_hash": "sha256:" + "1" * 64},
        "changes": [
            {"section": "transitions", "name": "t", "change": "changed", "clause": "1",
             "fields": [{"field": "guard", "old": value, "new": "ok"}]},
        ],
        "downgrades": [],
    }  # fmt: skip
    html, tables = _render(render_diff_markdown(diff, "old.pact", "new.pact"))
    (changes,) = tables.tables
    row = changes[1]
    assert len(row) == 7
    assert row[5] == (" ".join(value.split()) or "")
    assert tables.codes[0][1][5] == 1  # exactly one code span: nothing rendered as markup
    table = html[html.index("<table>") : html.index("</table>")]
    assert "<b>" not in table
    assert "<strong>" not in table
    assert "<a " not in table


def test_code_spans_fence_backticks_and_escape_pipes() -> None:
    assert code("plain") == "`plain`"
    assert code("a`b") == "``a`b``"
    assert code("`edge") == "`` `edge ``"
    assert code("x|y") == "`x\\|y`"
    assert code("two\nlines") == "`two lines`"
