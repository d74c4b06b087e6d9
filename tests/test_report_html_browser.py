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
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pactwright.canonical import canonical_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.render_html import render_html
from pactwright.verifier.verify import VerifyOptions, verify_files
from tests.bundles import reference_bundle

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WIDTH, HEIGHT = 1400, 2000
TRANSITIONS = {"fund", "deliver", "release", "chargeback"}
# Counterexample 1 (`funds_available`): three commands commit, then the runtime refuses the chargeback.
UNSAFE_PATH = ["fund", "deliver", "release"]
FAIL_RED = (0xB4, 0x23, 0x18)  # --fail in report.css: the banner of a failing report


@pytest.fixture(scope="module")
def chromium() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: CI must install it (`apt-get install -y chromium`) to test report.html")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")


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


def _read_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and RGB rows of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and interlace == 0 and color in (2, 6), f"unexpected PNG format {header}"
    bpp = 4 if color == 6 else 3
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind_of_filter = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        if kind_of_filter == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind_of_filter == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 255
        elif kind_of_filter == 3:
            for i in range(stride):
                line[i] = (line[i] + ((line[i - bpp] if i >= bpp else 0) + prev[i]) // 2) & 255
        elif kind_of_filter == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        rows.append(bytes(line) if bpp == 3 else bytes(v for i, v in enumerate(line) if i % 4 != 3))
    return width, height, rows


def test_chromium_draws_the_report(chromium: Path, page: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    _run(chromium, page, tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}")
    assert shot.exists(), "chromium wrote no screenshot"
    assert shot.stat().st_size > 30_000, f"the screenshot is suspiciously small ({shot.stat().st_size} bytes)"
    width, height, rows = _read_png(shot.read_bytes())
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
