"""Report files: `report.json` (canonical) and its Markdown and HTML renderings.

The renderings come from the report document alone, so a reviewer can
trust that what they read is what was hashed.
"""

from __future__ import annotations

from typing import Any

from pactwright.canonical import canonical_bytes


def report_files(report: dict[str, Any]) -> dict[str, bytes]:
    from pactwright.verifier.render_html import render_html
    from pactwright.verifier.render_markdown import render_markdown

    return {
        "report.json": canonical_bytes(report),
        "report.md": render_markdown(report).encode("utf-8"),
        "report.html": render_html(report).encode("utf-8"),
    }
