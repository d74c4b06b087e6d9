"""Adversarial checks of the verifier's language-1.1 features (related bounds, nested
splits, liveness, limits, effect outcomes, four eyes).

Each test states the verdict the verifier *should* give for a small policy; a known
false pass is marked `xfail(strict=True)` with the breaking run in its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.verify import VerifyOptions, verify_files

DAY = 86_400
T0 = 1780315200  # 2026-06-01T12:00:00Z


def _verify(source: str, agreements: int = 1) -> dict[str, Any]:
    result = check_bytes(source.encode())
    assert result.candidate is not None, [str(d) for d in result.diagnostics]
    files = dict(compile_candidate(result.candidate, result.source_map, "attack.pact"))
    return verify_files(files, VerifyOptions(bounds=Bounds(agreements=agreements), mutants=False))


def _property(report: dict[str, Any], name: str) -> str:
    return next(p["verdict"] for p in report["properties"] if p["name"] == name)


def _invariant(report: dict[str, Any], name: str) -> str:
    return next(i["verdict"] for i in report["invariants"] if i["name"] == name)


# -- (c) liveness: a human may act after a scheduler's window closed -------------------

LATE_REVIEW = """\
pact "att.late_review" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
state placed initial
state funded
state review
state done final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition start_review: funded -> review {
  by buyer
}
transition close: review -> done {
  by timer
  when now < funded_at + 1d
}
property reviewed_closes: reached(review) leads_to reached(done)
"""


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known: liveness treats `review` (time already passed) as having the scheduler's `close` "
        "enabled because some cell of its zone does; fund at t0, start_review at t0+2d, then "
        "`now < funded_at + 1d` is false forever and the run stutters in `review`. Was a false PASS; now the "
        "property is `incomplete` (unmodelled_fairness: a deadline guard time can close), not yet `violated`"
    ),
)
def test_liveness_scheduler_window_already_closed_is_violated() -> None:
    report = _verify(LATE_REVIEW)
    assert _property(report, "reviewed_closes") == "violated"
    assert report["verdict"] == "fail"


def test_late_review_run_is_real_in_the_runtime(tmp_path: Path) -> None:
    """The breaking run of the test above, in the runtime: `close` is refused at t0 + 2d."""
    from pactwright.runtime import TestClock, open_agreement, submit
    from pactwright.runtime.store import open_store
    from tests.signed_bundles import store_with_policy

    policy = tmp_path / "late_review.pact"
    policy.write_text(LATE_REVIEW)
    with store_with_policy("sqlite", tmp_path, policy, allow_incomplete=True) as url, open_store(url) as store:
        open_agreement(store, "att.late_review", {}, {"buyer": "bea"}, agreement_id="a1", clock=TestClock(T0))
        submit(store, "a1", "fund", "buyer", "bea", "fund", clock=TestClock(T0))
        assert (
            submit(store, "a1", "start_review", "buyer", "bea", "sr", clock=TestClock(T0 + 2 * DAY)).state == "review"
        )
        with pytest.raises(Exception, match="the guard of `close` is false") as refused:
            submit(store, "a1", "close", "timer", "timer", "close", clock=TestClock(T0 + 2 * DAY + 60))
        assert getattr(refused.value, "code", None) == "PW512"


LATE_REVIEW_EXPIRY = """\
pact "att.late_review_expiry" version "1.0.0"
currency EUR scale 2
role buyer
clock timer
state placed initial
state funded
state review
state done final
state expired final
transition fund: placed -> funded {
  by buyer
  stamp funded_at
}
transition start_review: funded -> review {
  by buyer
}
transition close: review -> done {
  by timer
  when now < funded_at + 1d
}
transition expire: funded -> expired {
  by timer
  when now >= funded_at + 3d
}
property funded_ends: reached(funded) leads_to final
"""


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known: same zone/cell confusion as above with an expiry: fund at t0, start_review at t0+2d "
        "(before `expire` at 3d), `close` never enabled again, the agreement stutters in non-final "
        "`review`. Was a false PASS; now `incomplete` (unmodelled_fairness), not yet `violated`"
    ),
)
def test_liveness_review_after_window_never_final_is_violated() -> None:
    report = _verify(LATE_REVIEW_EXPIRY)
    assert _property(report, "funded_ends") == "violated"


# -- (e) effect outcomes: a scheduler guard reading an abandoned effect -----------------

ABANDONED_GIVE_UP = """\
pact "att.abandoned_give_up" version "1.0.0"
currency EUR scale 2
default deny
role buyer
clock timer
param order_id: text matching "ORD-[0-9]{1,6}"
rule R2 allow
effect notify {
  risk R2
  reversibility reversible
  egress POST "https://api.example.com/notify"
  timeout 10s
  strategy once
}
state placed initial
state sent
state done final
state closed final
transition send: placed -> sent {
  by buyer
  stamp sent_at
  call notify
}
transition finish: sent -> done {
  by timer
  when acknowledged(notify)
}
transition give_up: sent -> closed {
  by timer
  when now >= sent_at + 1d and not acknowledged(notify)
}
property sent_ends: reached(sent) leads_to final
"""


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known: the verifier lets `give_up` fire while `notify` is abandoned, but the runtime refuses "
        "every command whose guard reads an outcome of an abandoned effect without asking "
        "`abandoned(notify)` (PW526, tests/test_effect_outcomes.py); one lost request or response "
        "(within the 1-fault budget) -> `once` abandons -> the agreement stays in `sent` forever. "
        "Was a false PASS; now `incomplete` (unmodelled_fairness: PW526 is not modelled), not yet `violated`"
    ),
)
def test_liveness_guard_refused_after_abandon_is_violated() -> None:
    report = _verify(ABANDONED_GIVE_UP)
    assert _property(report, "sent_ends") == "violated"


@pytest.mark.parametrize(
    ("source", "name"),
    [("LATE_REVIEW", "reviewed_closes"), ("LATE_REVIEW_EXPIRY", "funded_ends"), ("ABANDONED_GIVE_UP", "sent_ends")],
)
def test_a_liveness_run_the_search_cannot_decide_is_never_reported_as_holding(source: str, name: str) -> None:
    """The three runs above are not found as lassos yet, but the verifier no longer calls them `holds`."""
    report = _verify(globals()[source])
    assert _property(report, name) == "incomplete"
    assert report["verdict"] != "pass" and report["complete"] is False


# -- attacks that held (cheap regression checks) ----------------------------------------

RELATION_EDGE = """\
pact "att.relation_edge" version "1.0.0"
currency EUR scale 2
role agent
param price: money between 1.00 and 500.00
param partial: money between 0.01 and price
account card "card" external
account shop "shop" external
state s initial
state done final
transition go: s -> done {
  by agent
  transfer partial from shop to card
}
invariant strict_below: partial < price
"""


def test_related_bound_edge_partial_equals_price_is_found() -> None:
    report = _verify(RELATION_EDGE)
    assert _invariant(report, "strict_below") == "violated"
    assert report["verdict"] == "fail"


def test_desk_limit_crossed_by_three_agreements() -> None:
    source = (Path(__file__).resolve().parents[1] / "policies" / "desk_limit.pact").read_text()
    report = _verify(source, agreements=3)
    assert report["verdict"] == "fail"
