"""`report.html`: the verifier's report as one self-contained page.

A reviewer may open the file from an artifact store, an e-mail or an
air-gapped machine, so the page carries everything inline: CSS, the state
machine as SVG (laid out in `_svg`, not by a script at view time), and no
fonts, images or scripts from the network. It reads fully with scripts
disabled. Templates live in `templates/reports/`, rendered with autoescape
on, so a name or message in the policy cannot inject markup. The same
report gives the same bytes: no timestamps, no set order, coordinates
formatted to one decimal.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from markupsafe import Markup, escape

from pactwright.verifier import _svg
from pactwright.verifier._report_view import VERDICT_MEANING, Counterexample, build, plural, split_code

__all__ = ["render_html"]


def inline(value: Any) -> Markup:
    """Text with its backtick spans as `<code>`; everything escaped."""
    return Markup("").join(
        Markup("<code>{}</code>").format(piece) if is_code else escape(piece)
        for is_code, piece in split_code(str(value))
    )


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("pactwright.templates", "reports"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["inline"] = inline
    env.filters["num"] = _svg.fmt
    env.globals.update(plural=plural, meaning=VERDICT_MEANING)
    return env


def _steps(cx: Counterexample) -> list[_svg.Step]:
    return [
        _svg.Step(
            step=e.step,
            kind=e.kind,
            transition=e.command if e.kind == "command" else None,
            source=e.source,
            target=e.target,
            state=e.state,
            fault=e.fault,
        )
        for e in cx.events
    ]


def render_html(report: dict[str, Any]) -> str:
    """The report as a standalone HTML page, with the state machine drawn and each counterexample path marked."""
    view = build(report)
    base = _svg.layout(report["machine"])
    diagrams = [_svg.diagram(base, f"cx{cx.number}", _steps(cx)) for cx in view.counterexamples]
    plain = _svg.diagram(base, "machine")
    return _environment().get_template("report.html.j2").render(v=view, diagrams=diagrams, plain=plain)
