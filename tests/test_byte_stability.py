"""Byte stability: the same policy compiles to the same bytes in any clean process.

Each variant compiles in a fresh interpreter with a different hash seed,
time zone, locale, working directory and output path; every file of every
bundle must be identical, and no artifact may mention where or when it was
built.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bundles import POLICIES, REFERENCE, reference_bundle

VARIANTS = [
    {"PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C"},
    {"PYTHONHASHSEED": "1", "TZ": "Asia/Kolkata", "LC_ALL": "C.UTF-8"},
    {"PYTHONHASHSEED": "4242", "TZ": "America/Los_Angeles", "LC_ALL": "POSIX"},
    {"PYTHONHASHSEED": "random", "TZ": "Pacific/Chatham", "LANG": "C.UTF-8"},
]


def _compile_in_subprocess(policy: Path, out: Path, cwd: Path, env_overrides: dict[str, str]) -> dict[str, bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONHASHSEED", "TZ"))}
    env.update(env_overrides)
    # A relative policy path from an unrelated working directory.
    relative_policy = os.path.relpath(policy, cwd)
    subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", "compile", relative_policy, "-o", str(out)],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
    )
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", REFERENCE)
def test_compiles_identically_in_every_environment(name: str, tmp_path: Path) -> None:
    expected = reference_bundle(name)
    for index, variant in enumerate(VARIANTS):
        cwd = tmp_path / f"cwd{index}" / ("deeper" * index)
        cwd.mkdir(parents=True)
        out = tmp_path / f"out-{index}" / f"bundle with space {index}"
        got = _compile_in_subprocess(POLICIES / f"{name}.pact", out, cwd, variant)
        assert sorted(got) == sorted(expected)
        for path, data in got.items():
            assert data == expected[path], f"{path} differs under {variant}"
            for leak in (str(tmp_path), str(POLICIES.parent), socket.gethostname(), os.environ.get("USER", "\0")):
                if len(leak) > 3:
                    assert leak.encode() not in data, f"{path} mentions `{leak}`"


@pytest.mark.parametrize("name", REFERENCE)
def test_artifacts_hold_no_timestamps(name: str) -> None:
    import re

    stamp = re.compile(rb"20[0-9]{2}-[01][0-9]-[0-3][0-9]|[0-2][0-9]:[0-5][0-9]:[0-5][0-9]")
    for path, data in reference_bundle(name).items():
        assert not stamp.search(data), f"{path} contains something that looks like a timestamp"
