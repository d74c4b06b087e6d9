"""Rewrite the golden files from the current front end (and compiler).

    python -m tests.regenerate_golden      # or: make golden

writes `tests/golden/candidates/<policy>.json`, the canonical candidate bytes
of every `policies/*.pact` (exact RFC 8785 bytes, no trailing newline), and
the compiled bundles under `tests/golden/bundles/` when the compiler back end
is present. Review `git diff tests/golden` before committing: every changed
byte is a changed candidate hash, which invalidates existing approvals.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pactwright.compiler.pipeline import check_bytes

ROOT = Path(__file__).resolve().parent.parent
POLICY_DIR = ROOT / "policies"
GOLDEN_CANDIDATES = Path(__file__).resolve().parent / "golden" / "candidates"


def golden_path(name: str) -> Path:
    """Where the candidate bytes of `policies/<name>.pact` are kept."""
    return GOLDEN_CANDIDATES / f"{name}.json"


def write_golden_candidates() -> list[Path]:
    """Write one file per reference policy; refuse a policy that has blockers."""
    GOLDEN_CANDIDATES.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    policies = sorted(POLICY_DIR.glob("*.pact"))
    for stale in GOLDEN_CANDIDATES.glob("*.json"):
        if stale.stem not in {p.stem for p in policies}:
            stale.unlink()
    for policy in policies:
        result = check_bytes(policy.read_bytes())
        if result.candidate is None:
            codes = ", ".join(d.code for d in result.blockers)
            raise SystemExit(f"{policy.name} has blockers ({codes}); fix it before regenerating")
        path = golden_path(policy.stem)
        path.write_bytes(result.candidate.canonical_bytes())
        written.append(path)
    return written


def main() -> int:
    written = write_golden_candidates()
    try:
        from tests.bundles import write_golden_bundles
    except ImportError:  # the compiler back end is not there yet
        pass
    else:
        written += write_golden_bundles()
    for path in written:
        sys.stdout.write(f"wrote {path.relative_to(ROOT)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
