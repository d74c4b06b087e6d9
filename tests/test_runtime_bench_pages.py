"""The runtime bench's page count: what each commit writes, read from the WAL it appended to."""

from __future__ import annotations

import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_the_page_count_reads_each_modes_own_frames(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import runtime_bench
    finally:
        sys.path.remove(str(BENCH))
    line = runtime_bench.pages_per_command(tmp_path, agreements=4)
    found = re.fullmatch(r"submit (\d+\.\d), raw-sql (\d+\.\d) pages of 4096 bytes per command .*", line)
    assert found, line
    submit, raw = float(found.group(1)), float(found.group(2))
    # The raw loop writes the agreement row, the event and (for two commands of three) an outbox row, each
    # with its indexes: several pages. The command path writes those and the evidence record and the key's index.
    assert 3 <= raw < submit < 3 * raw, line
