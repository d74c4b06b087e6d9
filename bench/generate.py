"""Generate large, valid policies for benchmarks (deterministic, no randomness)."""

from __future__ import annotations


def large_policy(transitions: int) -> str:
    """A chain of `transitions` money-moving steps with guards, splits and invariants."""
    lines = [
        "# generated benchmark policy",
        'pact "bench.large" version "1.0.0"',
        "currency EUR scale 2",
        "role buyer",
        "role seller",
        "role arbiter",
        "clock scheduler",
        "param price: money between 1.00 and 10000.00",
        "param fee: percent = 2.5%",
        "param window: duration = 1d12h",
        'account world "world" external',
        'account escrow "escrow:{agreement}"',
        'account platform "platform:fees"',
        'account seller "sellers:{seller}:payable"',
        "state s0 initial",
    ]
    for index in range(1, transitions + 1):
        final = " final" if index == transitions else ""
        lines.append(f"state s{index}{final}")
    for index in range(transitions):
        source, target = f"s{index}", f"s{index + 1}"
        lines.append(f'clause "{index}.1" transition step_{index}: {source} -> {target} {{')
        lines.append("  by buyer, scheduler" if index % 2 else "  by seller")
        lines.append(f"  stamp at_{index}")
        if index == 0:
            lines.append("  transfer price from world to escrow  # fund")
        elif index % 3 == 0:
            lines.append(f"  when now >= at_{index - 1} + window and (price > 1.00 or not reached(s{index - 1}))")
        elif index % 3 == 1:
            lines.append("  when balance(escrow) >= price - 0.01")
        if index == transitions - 1:
            lines += ["  transfer price from escrow {", "    fee to platform", "    remaining to seller", "  }"]
        lines.append("}")
        lines.append("")
    for index in range(max(1, transitions // 5)):
        lines.append(
            f'clause "inv.{index}" invariant inv_{index}: '
            f"balance(escrow) >= 0 and (fired(step_{index}) <= 1 implies applied(step_{index}) <= 1)"
        )
    return "\n".join(lines) + "\n"
