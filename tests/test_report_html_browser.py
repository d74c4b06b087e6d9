"""report.html in a real browser: headless Chromium renders it, screenshots it, and dumps its DOM.

The string checks in test_report_render.py cannot tell whether a browser
draws the page: whether the inline CSS applies, whether the SVG parses, and
whether the counterexample path survives as the browser sees it. So this
renders the unsafe chargeback report, takes a screenshot (decoded here with
the standard library, to check it is a real page and not a blank or error
screen) and reads the DOM Chromium built from the file.

It needs `/usr/bin/chromium` (Debian package `chromium`). Outside CI it is
skipped when Chromium is absent; under CI (`CI` set) a missing browser is a
failure, so the check cannot silently stop running.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pactwright.canonical import canonical_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.render_html import render_html
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests._chromium import FAIL_RED, FLAGS, find_chromium, read_png
from tests.bundles import reference_bundle

WIDTH, HEIGHT = 1400, 2000
TRANSITIONS = {"fund", "deliver", "release", "chargeback"}
# Counterexample 1 (`funds_available`): three commands commit, then the runtime refuses the chargeback.
UNSAFE_PATH = ["fund", "deliver", "release"]


@pytest.fixture(scope="module")
def chromium() -> Path:
    return find_chromium("report.html")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The unsafe chargeback report, rendered to a file as `pactwright verify --report-dir` writes it."""
    report = verify_files(reference_bundle("unsafe_chargeback"), VerifyOptions(bounds=Bounds(), proofs=False))
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(render_html(json.loads(canonical_bytes(report))), "utf-8")
    return path


def _run(chromium: Path, page: Path, work: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    profile = work / "profile"
    profile.mkdir(exist_ok=True)
    env = dict(os.environ, HOME=str(work))  # keep Chromium's caches out of the real home
    command = [str(chromium), *FLAGS, f"--user-data-dir={profile}", *args, page.as_uri()]
    result = subprocess.run(command, capture_output=True, timeout=180, env=env, check=False)
    assert result.returncode == 0, (
        f"chromium failed ({result.returncode}):\n{result.stderr.decode(errors='replace')[-2000:]}"
    )
    return result


def test_chromium_draws_the_report(chromium: Path, page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _run(chromium, page, tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}")
    assert shot.exists(), "chromium wrote no screenshot"
    assert shot.stat().st_size > 30_000, f"the screenshot is suspiciously small ({shot.stat().st_size} bytes)"
    width, height, rows = read_png(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    pixels = Counter(tuple(row[x : x + 3]) for row in rows[::8] for x in range(0, width * 3, 3 * 4))
    assert len(pixels) > 100, "the page is (nearly) one colour: nothing was drawn"
    # The verdict banner spans the top of the page in the failure red: the inline CSS applied.
    banner = Counter(tuple(rows[40][x : x + 3]) for x in range(0, width * 3, 3))
    assert banner[FAIL_RED] > width * 0.6, f"no FAIL banner at the top: {banner.most_common(3)}"


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.found.append((tag, {k: v or "" for k, v in attrs}))


def test_chromium_dom_marks_the_counterexample_path(chromium: Path, page: Path, tmp_path: Path) -> None:
    result = _run(chromium, page, tmp_path, "--dump-dom")
    parser = _Elements()
    parser.feed(result.stdout.decode("utf-8"))
    elements = parser.found

    def classes(attrs: dict[str, str]) -> set[str]:
        return set(attrs.get("class", "").split())

    svgs = [a for t, a in elements if t == "svg" and "machine" in classes(a)]
    # One state machine per counterexample: `funds_available`, then `funds_not_stuck`.
    assert [s["id"] for s in svgs] == ["cx1-svg", "cx2-svg"]
    edges = [a for t, a in elements if t == "g" and "edge" in classes(a) and a["id"].startswith("cx1-")]
    assert {e["data-transition"] for e in edges} == TRANSITIONS  # every transition is drawn ...
    on_path = [e["data-transition"] for e in edges if "cx-path" in classes(e)]
    assert sorted(on_path) == sorted(UNSAFE_PATH)  # ... and exactly these are on the path, once each
    badges = [a for t, a in elements if t == "g" and "step-badge" in classes(a) and a["id"].startswith("cx1-")]
    assert [(b["data-step"], b["data-kind"], b.get("data-transition")) for b in badges[:3]] == [
        ("1", "command", "fund"),
        ("2", "command", "deliver"),
        ("3", "command", "release"),
    ]
    # The refused chargeback is drawn on the state it left the agreement in.
    assert [(b["data-step"], b["data-kind"], b.get("data-state")) for b in badges[3:]] == [("4", "refused", "released")]
    assert any(t == "path" for t, _ in elements), "the edges have paths"
    title = next(a for t, a in elements if t == "body")
    assert "verdict-fail" in classes(title)
