"""`python -m pactwright`: the same entry point as the `pactwright` console script.

Useful where the script directory is not on PATH (a CI image, a venv used
without activating it) and to be sure which interpreter runs the tool.
"""

from __future__ import annotations

from pactwright.cli.main import entry

if __name__ == "__main__":
    entry()
