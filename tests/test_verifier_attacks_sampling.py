"""Attacks on the per-param samples (text combinations decoded by index, starts cut at
`--max-states`) and on chains of more than CHAIN_TERMS terms as one n-ary node.

Each test states the verdict the verifier should give: a bug that needs one
combination of text values is `fail` when every start is searched and
`incomplete` (never `pass`) when the bound cut the starts; a long `or`, `and`
or `+` decides exactly as the binary chain of the same terms does, deadlines
written as long sums included. None of these broke; they stay as regressions.
"""

from __future__ import annotations

from typing import Any

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_text
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files


def _verify(source: str, **bounds: Any) -> dict[str, Any]:
    result = check_text(source)
    assert result.candidate is not None, [str(d) for d in result.diagnostics]
    files = compile_candidate(result.candidate, result.source_map, "attack.pact")
    return verify_files(files, VerifyOptions(Bounds(**bounds), mutants=False, proofs=True, jobs=1))


def _verdict(report: dict[str, Any], name: str) -> str:
    return next(str(i["verdict"]) for i in report["invariants"] if i["name"] == name)


# -- text combinations -------------------------------------------------------------------

LAST_COMBINATION = """\
pact "atk.combo" version "1.0.0"
currency EUR scale 2
role approver
param amount: money between 0.00 and 100.00
param k0: one of aa, bb, cc
param k1: one of aa, bb, cc
param k2: one of aa, bb, cc
account treasury "treasury:main" external
account payroll "payroll:{agreement}"
state draft initial
state paid
state done final
transition pay: draft -> paid {
  by approver
  transfer amount from treasury to payroll
}
transition finish: paid -> done {
  by approver
}
transition extra: paid -> paid {
  by approver
  when k0 == cc and k1 == cc and k2 == cc and fired(extra) == 0
  transfer 1.00 from treasury to payroll
}
invariant within: balance(payroll) <= 100.00
"""


def test_a_bug_of_the_last_text_combination_fails_with_its_values() -> None:
    """27 combinations; only the last in product order (all `cc`) breaks the cap, and only
    with `amount` above 99.00: the witness is that combination at the smallest amount."""
    report = _verify(LAST_COMBINATION)
    assert report["verdict"] == "fail" and report["exploration"]["initial_states"] == 27
    assert _verdict(report, "within") == "violated"
    (counterexample,) = report["counterexamples"]
    assert counterexample["replayed"] is True
    assert counterexample["params"] == [{"amount": "99.01", "k0": "cc", "k1": "cc", "k2": "cc"}]


@pytest.mark.parametrize("max_states", [10, 26, 27, 28, 54, 60])
def test_the_last_text_combination_cut_off_is_incomplete_never_pass(max_states: int) -> None:
    """Just below, at and just above the number of combinations, and past it but short of the
    successors: the search never reaches the breaking start's violation, so it says so."""
    report = _verify(LAST_COMBINATION, max_states=max_states)
    assert report["verdict"] == "incomplete" and report["complete"] is False
    assert report["exploration"]["bound_hit"] == "max_states"
    assert _verdict(report, "within") == "holds-to-bound"


PATTERNS = """\
pact "atk.patterns" version "1.0.0"
currency EUR scale 2
role approver
param amount: money between 0.00 and 10.00
param a: text matching "[a-z]{2}"
param b: text matching "[a-z]{2}"
param c: text matching "[a-z]{2}"
param d: one of xx, yy
account treasury "treasury:main" external
account payroll "payroll:{agreement}"
state draft initial
state done final
transition pay: draft -> done {
  by approver
  when a == "qq" and b != a and c == b and d != xx
  transfer amount from treasury to payroll
}
transition skip: draft -> done {
  by approver
}
invariant small: balance(payroll) <= 9.99
"""


def test_pattern_params_need_their_combination_and_a_cut_says_incomplete() -> None:
    full = _verify(PATTERNS)
    assert full["verdict"] == "fail"
    (counterexample,) = full["counterexamples"]
    assert counterexample["replayed"] is True
    shown = counterexample["params"][0]
    assert shown["a"] == "qq" and shown["b"] == shown["c"] != "qq" and shown["d"] == "yy"
    cut = _verify(PATTERNS, max_states=30)
    assert cut["verdict"] == "incomplete" and cut["exploration"]["bound_hit"] == "max_states"


LIMITED_DESK = """\
pact "atk.desk" version "1.1.0"
currency EUR scale 2
default deny
role agent
param amount: money between 0.01 and 200.00
param k0: one of aa, bb, cc
param k1: one of aa, bb, cc
account merchant "merchant:refunds" external
account customer "customers:{agreement}:card"
rule R3 allow
effect refund_payment {
  risk R3
  reversibility irreversible
  egress POST "https://api.payments.example.com/refunds"
  strategy idempotent
  key amount
  amount amount
}
limit desk_daily: total(refund_payment) <= 300.00 per 1d
state requested initial
state refunded final
transition refund: requested -> refunded {
  by agent
  when (k0 == cc and k1 == cc) or amount <= 100.00
  call refund_payment
  transfer amount from merchant to customer
}
transition drop: requested -> refunded {
  by agent
}
"""


def test_a_limit_needing_two_agreements_of_the_last_combination() -> None:
    """Two agreements over 9 combinations: 45 starts. Past 300.00 a day only when both
    refund more than 150.00, which needs both at (cc, cc): fail in full, incomplete when cut."""
    report = _verify(LIMITED_DESK, agreements=2)
    assert report["verdict"] == "fail" and report["exploration"]["initial_states"] == 45
    (limit,) = report["limits"]
    assert limit["verdict"] == "violated"
    counterexample = report["counterexamples"][limit["counterexample"]]
    assert counterexample["replayed"] is True
    assert all(p["k0"] == p["k1"] == "cc" for p in counterexample["params"])
    for max_states in (44, 46):
        cut = _verify(LIMITED_DESK, agreements=2, max_states=max_states)
        assert cut["verdict"] == "incomplete"
        assert cut["limits"][0]["verdict"] == "holds-to-bound"


# -- chains of more than CHAIN_TERMS terms ------------------------------------------------


def _extra(guard: str) -> str:
    return f"""\
pact "atk.chain" version "1.0.0"
currency EUR scale 2
role approver
param amount: money between 0.00 and 100.00
account treasury "treasury:main" external
account payroll "payroll:{{agreement}}"
state draft initial
state paid
state done final
transition pay: draft -> paid {{
  by approver
  transfer amount from treasury to payroll
}}
transition finish: paid -> done {{
  by approver
}}
transition extra: paid -> paid {{
  by approver
  when fired(extra) == 0 and ({guard})
  transfer 1.00 from treasury to payroll
}}
invariant within: balance(payroll) <= 100.00
"""


@pytest.mark.parametrize(
    ("guard", "amount"),
    [
        (" or ".join(["amount > 200.00"] * 100 + ["amount == 99.50"]), "99.50"),
        (" and ".join(["amount >= 0.00"] * 100 + ["amount == 99.50"]), "99.50"),
        (" or ".join(f"amount == {i}.37" for i in range(101)), "99.37"),
    ],
    ids=["or-only-last", "and-last-decides", "or-of-101-points"],
)
def test_a_long_connective_decided_by_its_last_term(guard: str, amount: str) -> None:
    report = _verify(_extra(guard))
    assert report["verdict"] == "fail"
    (counterexample,) = report["counterexamples"]
    assert counterexample["replayed"] is True and counterexample["params"] == [{"amount": amount}]


def test_a_long_or_whose_true_term_cannot_break_passes() -> None:
    guard = " or ".join(["amount > 200.00"] * 100 + ["amount == 50.00"])
    report = _verify(_extra(guard))
    assert report["verdict"] == "pass" and _verdict(report, "within") == "proved"


def _escrow(refund_guard: str) -> str:
    return f"""\
pact "atk.deadline" version "1.0.0"
currency EUR scale 2
role buyer
role seller
clock timer
param window: duration = 2d
param amount: money between 1.00 and 100.00
account bank "bank:main" external
account escrow "escrow:{{agreement}}"
state placed initial
state funded
state released final
state refunded final
transition fund: placed -> funded {{
  by buyer
  stamp funded_at
  transfer amount from bank to escrow
}}
transition release: funded -> released {{
  by seller
  when now < funded_at + 50h
  transfer balance(escrow) from escrow to bank
}}
transition refund: funded -> refunded {{
  by timer
  when {refund_guard}
  transfer balance(escrow) from escrow to bank
}}
property settles: reached(funded) leads_to final
"""


HOURS = " + ".join(["1h"] * 101)
HALF = " + ".join(["1h"] * 50)
REST = " + ".join(["1h"] * 51)


@pytest.mark.parametrize(
    ("refund_guard", "fires"),
    [
        ("now >= funded_at + 149h and now < funded_at + 149h", False),
        (f"now >= funded_at + window + {HOURS} and now < funded_at + 149h", False),
        (f"now >= funded_at + window + {HOURS} and now < funded_at + 150h", True),
        (f"now >= funded_at + {HALF} + window + {REST} and now < funded_at + 149h", False),
        (f"now >= funded_at + {HALF} + window + {REST} and now < funded_at + 150h", True),
        (f"funded_at + window + {HOURS} <= now and funded_at + 150h > now", True),
    ],
    ids=["literal-closed", "chain-closed", "chain-open", "mid-closed", "mid-open", "flipped-open"],
)
def test_a_deadline_written_as_a_long_sum_opens_where_its_total_says(refund_guard: str, fires: bool) -> None:
    """2d plus 101 hours is 149 h: a window `[149h, 149h)` is empty, `[149h, 150h)` is one hour
    the timer may miss. Either way the property fails (release closes at 50 h); what the chain
    must not change is whether `refund` can fire at all."""
    report = _verify(_escrow(refund_guard), max_depth=20)
    assert report["verdict"] == "fail"
    assert next(p["verdict"] for p in report["properties"] if p["name"] == "settles") == "violated"
    assert ("refund" not in report["coverage"]["transitions_never_fired"]) is fires
