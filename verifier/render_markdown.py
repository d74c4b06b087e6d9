"""`report.md`: the verifier's report as a pull-request comment.

Rendered from `report.json` alone (through `_report_view`), so a reviewer
reading the comment reads what was hashed; the template is
`templates/reports/report.md.j2`. The output is deterministic: the same
report gives the same bytes, with no timestamps or machine-specific text.
Values from the policy are escaped for Markdown table cells, so a name or a
message cannot break the table or inject markup into the comment.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import jinja2

from pactwright.verifier._report_view import VERDICT_MEANING, build, plural, split_code

__all__ = ["render_markdown"]

_SPECIAL = str.maketrans({"|": "\\|", "\n": " ", "\r": " "})
# `<` only opens markup before a letter, `/`, `!` or `?`; escaping just those keeps `x <= 1` readable.
_TAG = re.compile(r"<(?=[A-Za-z/!?])")


def md(value: Any) -> str:
    """Inline Markdown for a table cell: code spans kept; `|`, newlines and tag openers escaped elsewhere."""
    parts = []
    for is_code, piece in split_code(str(value)):
        if is_code:
            parts.append(code(piece))
        else:
            parts.append(_TAG.sub("&lt;", piece.translate(_SPECIAL)))
    return "".join(parts)


def code(value: Any) -> str:
    """One code span, fenced with more backticks than it contains; safe in a table cell."""
    text = str(value).replace("\n", " ").replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def listing(values: Sequence[str], as_code: bool = True) -> str:
    """A comma-separated list of names, or `none`."""
    if not values:
        return "none"
    return ", ".join(code(v) if as_code else md(v) for v in values)


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pactwright.templates", "reports"),
        autoescape=False,  # noqa: S701 - Markdown, not HTML: values go through the `md` and `code` filters
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["md"] = md
    env.filters["code"] = code
    env.globals.update(plural=plural, listing=listing, meaning=VERDICT_MEANING)
    return env


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: verdict, invariants, counterexamples, amounts, mutants, coverage, limits."""
    text = _environment().get_template("report.md.j2").render(v=build(report))
    # Collapse runs of blank lines the template's conditionals leave, and end with one newline.
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"
