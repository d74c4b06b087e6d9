"""Shared fixtures: where the reference policies and the CLI live."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
POLICY_DIR = ROOT / "policies"
REFERENCE_POLICIES = tuple(sorted(POLICY_DIR.glob("*.pact")))
CLI = ROOT / ".venv" / "bin" / "pactwright"


@pytest.fixture(scope="session")
def cli() -> Path:
    """The installed `pactwright` console script."""
    if not CLI.exists():
        pytest.skip("the pactwright console script is not installed in .venv")
    return CLI
