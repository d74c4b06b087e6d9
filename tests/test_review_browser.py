"""The review page in a real browser: headless Chromium draws it at 1280 px and at a phone's 375 px.

String and parser checks cannot tell whether a browser lays the page out:
whether the inline CSS applies, whether the SVG parses, whether a wide
table or program stays inside its box on a phone. So the pages of the two
reference policies and of the failing unsafe chargeback are screenshotted
at both widths (the PNGs decoded with the standard library: real pages,
not blank, each banner in its verdict's colour, the failure red on the
failing one only), and a test harness (the only place with a script) loads
those pages and the page of an agreement that ran in frames of exactly 375
and 1280 CSS pixels, reads how wide each document really is, and hands
back the DOM Chromium built, in which the facts are checked.

Headless Chromium will not make a window narrower than 500 px, so the
phone width is a 375 px frame: its media queries and layout are those of a
375 px viewport. Chromium starts once per screenshot, in parallel, and once
for the harness. It needs `/usr/bin/chromium`: skipped outside CI when it is
absent, a failure under CI (`CI` set). `PACTWRIGHT_SCREENSHOTS=DIR` copies
the screenshots there.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from pactwright.service.review import render_agreement_page, render_bundle_files
from tests._chromium import FAIL_RED, PASS_GREEN, find_chromium, read_png
from tests._chromium import FLAGS as BASE_FLAGS
from tests.bundles import POLICIES
from tests.test_review_page import (
    Node,
    bundle_files,
    by_id,
    marketplace_store,
    parse,
    text_of,
    with_attr,
    with_class,
)

FLAGS = (*BASE_FLAGS, "--hide-scrollbars")
WIDTHS = (1280, 375)
HEIGHT = 1100  # the first screen of each page: banner, facts, the first clause or the path taken
PAGES = ("marketplace_milestone", "support_refund", "unsafe_chargeback", "agreement")
SHOTS = PAGES[:3]  # the two reference policies and the failing one; the agreement is checked in the harness


@pytest.fixture(scope="module")
def chromium() -> Path:
    return find_chromium("review pages")


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each review page as a file: three bundles (with their sources) and the marketplace agreement `m1`."""
    root = tmp_path_factory.mktemp("review")
    out: dict[str, Path] = {}
    for name in PAGES[:3]:
        source = (POLICIES / f"{name}.pact").read_bytes()
        out[name] = root / f"{name}.html"
        out[name].write_text(render_bundle_files(bundle_files(name), source), "utf-8")
    with marketplace_store("sqlite", root) as url, open_store(url) as store, open_ledger(None, url) as ledger:
        out["agreement"] = root / "agreement.html"
        out["agreement"].write_text(render_agreement_page(store, "m1", ledger), "utf-8")
    return out


def _command(chromium: Path, profile: Path, *args: str) -> list[str]:
    return [str(chromium), *FLAGS, f"--user-data-dir={profile}", *args]


def _phone_frame(page: Path, width: int) -> Path:
    """A page holding `page` in a frame `width` CSS pixels wide (no script: only for the screenshot)."""
    frame = page.with_name(f"{page.stem}.frame{width}.html")
    frame.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><style>body{margin:0;background:#333}'
        f"iframe{{display:block;border:0;width:{width}px;height:{HEIGHT}px;background:#fff}}</style></head>"
        f'<body><iframe src="{page.name}"></iframe></body></html>',
        "utf-8",
    )
    return frame


def _probe(pages: dict[str, Path]) -> Path:
    """The harness: every page in a 375 px and a 1280 px frame; a script reports each document's width and DOM."""
    frames = []
    for name, path in pages.items():
        source = html.escape(path.read_text("utf-8"), quote=True)
        for width in WIDTHS:
            frames.append(
                f'<iframe id="{name}-{width}" style="display:block;border:0;width:{width}px;height:600px" '
                f'srcdoc="{source}"></iframe>'
            )
    script = (
        "window.addEventListener('load', function () {"
        " var out = {};"
        " document.querySelectorAll('iframe').forEach(function (f) {"
        "  var d = f.contentDocument;"
        "  out[f.id] = {viewport: f.contentWindow.innerWidth, scroll: d.documentElement.scrollWidth,"
        "   dom: d.documentElement.outerHTML};"
        " });"
        " document.getElementById('probe').textContent = JSON.stringify(out);"
        "});"
    )
    probe = next(iter(pages.values())).with_name("probe.html")
    probe.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>probe</title></head><body style="margin:0">'
        + "".join(frames)
        + f'<pre id="probe"></pre><script>{script}</script></body></html>',
        "utf-8",
    )
    return probe


@pytest.fixture(scope="module")
def rendered(chromium: Path, pages: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[dict[tuple[str, int], Path], dict[str, dict[str, object]]]:  # fmt: skip
    """Every screenshot (page, width) -> PNG, and the harness's report per frame; Chromium runs in parallel."""
    work = tmp_path_factory.mktemp("chromium")
    env = dict(os.environ, HOME=str(work))  # keep Chromium's caches out of the real home
    jobs: list[tuple[object, subprocess.Popen[bytes]]] = []
    shots: dict[tuple[str, int], Path] = {}
    for n, name in enumerate(SHOTS):
        path = pages[name]
        for width in WIDTHS:
            shot = work / f"{name}-{width}.png"
            shots[(name, width)] = shot
            target = path if width >= 500 else _phone_frame(path, width)
            window = max(width, 500)
            args = _command(chromium, work / f"profile-{n}-{width}", f"--screenshot={shot}",
                            f"--window-size={window},{HEIGHT}", target.as_uri())  # fmt: skip
            jobs.append(
                ((name, width), subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env))
            )
    dump = subprocess.Popen(
        _command(chromium, work / "profile-probe", "--window-size=1300,1000", "--dump-dom", _probe(pages).as_uri()),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    for what, job in [*jobs, ("probe", dump)]:
        out, err = job.communicate(timeout=120)
        assert job.returncode == 0, (
            f"chromium failed on {what} ({job.returncode}):\n{err.decode(errors='replace')[-2000:]}"
        )
        if job is dump:
            dom = out.decode("utf-8")
    probe = parse(dom)
    report = json.loads("".join(by_id(probe, "probe").text_parts))
    keep = os.environ.get("PACTWRIGHT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for shot in shots.values():
            shutil.copy(shot, Path(keep) / shot.name)
    return shots, report


BANNER = {"marketplace_milestone": PASS_GREEN, "support_refund": PASS_GREEN, "unsafe_chargeback": FAIL_RED}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", SHOTS)
def test_chromium_draws_a_real_page_with_its_verdict_colour(
    rendered: tuple[dict[tuple[str, int], Path], dict[str, object]], name: str, width: int
) -> None:
    shot = rendered[0][(name, width)]
    assert shot.exists(), "chromium wrote no screenshot"
    png_width, png_height, rows = read_png(shot.read_bytes(), rows_wanted=420)
    assert (png_width, png_height) == (max(width, 500), HEIGHT)
    pixels = Counter(tuple(row[x : x + 3]) for row in rows[::4] for x in range(0, width * 3, 3 * 2))
    assert len(pixels) > 60, "the page is (nearly) one colour: nothing was drawn"
    # The banner spans the top of the page in its verdict's colour: the inline CSS applied.
    banner = Counter(tuple(rows[30][x : x + 3]) for x in range(0, width * 3, 3))
    assert banner[BANNER[name]] > width * 0.6, f"no {name} banner colour at the top: {banner.most_common(3)}"
    if name != "unsafe_chargeback":
        assert not any(tuple(row[x : x + 3]) == FAIL_RED for row in rows[:60] for x in range(0, width * 3, 3))


@pytest.mark.parametrize("name", PAGES)
def test_no_page_is_wider_than_a_phone_or_a_desktop_window(
    rendered: tuple[dict[tuple[str, int], Path], dict[str, object]], name: str
) -> None:
    report = rendered[1]
    for width in WIDTHS:
        frame = report[f"{name}-{width}"]
        assert isinstance(frame, dict)
        assert frame["viewport"] == width, frame["viewport"]
        # Wide tables, programs and the diagram scroll inside their boxes; the document itself never scrolls sideways.
        assert frame["scroll"] <= width, f"{name} is {frame['scroll']} px wide in a {width} px viewport"


def _dom(rendered: tuple[dict[tuple[str, int], Path], dict[str, object]], name: str, width: int = 375) -> Node:
    frame = rendered[1][f"{name}-{width}"]
    assert isinstance(frame, dict)
    return parse(str(frame["dom"]))


def test_chromium_dom_holds_each_bundles_clauses_and_verdicts(
    rendered: tuple[dict[tuple[str, int], Path], dict[str, object]],
) -> None:
    expected = {
        "marketplace_milestone": ("PASS", {"2.1", "3.1", "4.1", "4.2", "5.1", "6.1", "6.2", "6.3", "7.1", "7.2",
                                           "7.3", "7.4"}),
        "support_refund": ("PASS", {"1", "2", "3", "4.1", "4.2", "4.3"}),
        "unsafe_chargeback": ("FAIL", {"2.1", "3.1", "4.1", "7.1", "7.2", "8.1"}),
    }  # fmt: skip
    for name, (verdict, clauses) in expected.items():
        page = _dom(rendered, name)
        assert text_of(by_id(page, "verdict")) == verdict
        assert {c.attrs["data-clause"] for c in with_class(page, "clause", "article")} == clauses, name
        assert with_attr(page, "data-program"), "the ledger programs are on the page"
    unsafe = _dom(rendered, "unsafe_chargeback")
    violated = {n.attrs["data-name"] for n in with_attr(unsafe, "data-verdict", "violated") if "data-name" in n.attrs}
    assert violated == {"funds_available", "funds_not_stuck"}
    steps = [n.attrs["data-command"] for n in with_attr(by_id(unsafe, "cx-1"), "data-command")]
    assert steps == ["fund", "deliver", "release", "refused chargeback"]
    badges = [b.attrs["data-step"] for b in with_class(by_id(unsafe, "cx1-svg"), "step-badge", "g")]
    assert badges == ["1", "2", "3", "4"], "the SVG survived parsing with the path's steps"


def test_chromium_dom_holds_the_agreements_path_events_and_postings(
    rendered: tuple[dict[tuple[str, int], Path], dict[str, object]],
) -> None:
    page = _dom(rendered, "agreement")
    on_path = {n.attrs["data-transition"] for n in with_class(by_id(page, "ag-svg"), "cx-path", "g")}
    assert on_path == {"fund", "deliver", "release"}
    assert [n.attrs["data-transition"] for n in with_attr(by_id(page, "events"), "data-event")] == [
        "fund", "deliver", "release"]  # fmt: skip
    postings = {n.attrs["data-reference"]: (n.attrs["data-status"], n.attrs["data-matched"])
                for n in with_attr(page, "data-reference")}  # fmt: skip
    assert postings == {"m1/1/0": ("delivered", "yes"), "m1/3/0": ("delivered", "yes")}
    release = with_attr(page, "data-reference", "m1/3/0")[0]
    assert "escrow:m1 → platform:fees 6.49 EUR" in text_of(release)
