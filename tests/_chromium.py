"""Headless Chromium for the page tests: where it is, how it is started, and how its screenshots are read.

Used by tests/test_report_html_browser.py (the verifier's report.html) and
tests/test_review_browser.py (the review pages). The PNG reader decodes
what Chromium writes (8-bit RGB or RGBA, not interlaced) with the standard
library alone, so the tests depend on no image package.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

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
FAIL_RED = (0xB4, 0x23, 0x18)  # --fail in report.css: the banner of a failing report or bundle
PASS_GREEN = (0x06, 0x76, 0x47)  # --pass


def find_chromium(what: str) -> Path:
    """Chromium's path; in CI its absence fails the test (CI installs it), elsewhere it skips."""
    if CHROMIUM.exists():
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is missing: CI must install it (`apt-get install -y chromium`) to test {what}")
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install -y chromium)")


def read_png(data: bytes, rows_wanted: int | None = None) -> tuple[int, int, list[bytes]]:
    """Width, height and the RGB rows (the first `rows_wanted`, or all) of an 8-bit, non-interlaced PNG."""
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
    for y in range(height if rows_wanted is None else min(height, rows_wanted)):
        start = y * (stride + 1)
        kind_of_filter = raw[start]
        line = bytearray(raw[start + 1 : start + 1 + stride])
        if kind_of_filter == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind_of_filter == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
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
