"""Helpers shared by compiler tests: compile reference policies in-process."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"
REFERENCE = ("marketplace_milestone", "support_refund", "unsafe_chargeback")
# The policies that show each language 1.1 feature: their bundles are golden too, so a compiler change that
# moves a byte of the new artifacts (limits, properties, nested splits, four eyes...) shows in review.
LANGUAGE_1_1 = ("desk_limit", "escrow_liveness", "four_eyes_refund", "marketplace_nested_fee", "partial_refund",
                "payroll_batch", "refund_outcomes")  # fmt: skip
GOLDEN = (*REFERENCE, *LANGUAGE_1_1)
GOLDEN_BUNDLES = Path(__file__).resolve().parent / "golden" / "bundles"


@cache
def reference_bundle(name: str) -> dict[str, bytes]:
    """The bundle files of one reference policy, compiled in this process."""
    path = POLICIES / f"{name}.pact"
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None, result.diagnostics
    return compile_candidate(result.candidate, result.source_map, path.name)


def write_golden_bundles() -> list[Path]:
    """Rewrite tests/golden/bundles/<policy>/ from the current compiler."""
    import shutil

    written: list[Path] = []
    for name in GOLDEN:
        target = GOLDEN_BUNDLES / name
        shutil.rmtree(target, ignore_errors=True)
        for rel, data in reference_bundle(name).items():
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            written.append(dest)
    return written
