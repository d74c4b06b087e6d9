"""What the Markdown and HTML reports show, computed once from `report.json` alone.

Both renderings read the same view so that they cannot disagree, and so that
every sentence they print is traceable to a field of the report: nothing
here adds a claim the verifier did not make. Money in the report is minor
units; it is shown in the currency's decimals only when the report names its
currency (`report["currency"]`), and as minor units otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pactwright.money import format_money
from pactwright.verifier._completeness import ALLOWED_NOTE

Json = dict[str, Any]

VERDICTS = ("proved", "holds-to-bound", "violated", "vacuous-suspect", "unknown")
# One line per invariant verdict, worded to claim no more than the verdict does.
VERDICT_MEANING = {
    "proved": "holds at every depth, not only within the bounds (see its method)",
    "holds-to-bound": "no violation in any state explored within the bounds",
    "violated": "a counterexample, replayed against the compiled artifacts, breaks it",
    "vacuous-suspect": "not violated, but no mutant violates it either: it may be checking nothing",
    "unknown": "the verifier could not decide it",
}


def is_vacuous(invariant: Mapping[str, Any]) -> bool:
    """Whether no mutant violates it: verdict `vacuous-suspect`, or a proof that carries the flag."""
    return invariant["verdict"] == "vacuous-suspect" or invariant.get("vacuous_suspect") is True


def strength(invariant: Mapping[str, Any]) -> str:
    """How far the invariant was established: proved, holds-to-bound, violated or unknown.

    report.json gives a bounded invariant no mutant breaks the verdict
    `vacuous-suspect`, and a proved one the verdict `proved` with
    `vacuous_suspect: true`; either way vacuity is a flag beside the strength.
    """
    return "holds-to-bound" if invariant["verdict"] == "vacuous-suspect" else str(invariant["verdict"])


def tally(invariants: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """The counts every rendering prints, computed here only so that they cannot disagree.

    `proved`, `holds-to-bound`, `violated` and `unknown` count each
    invariant once, by strength, and sum to the number of invariants;
    `vacuous-suspect` counts the flagged ones whatever their strength, so a
    proved invariant that no mutant breaks counts as both.
    """
    counts = dict.fromkeys(VERDICTS, 0)
    for invariant in invariants:
        counts[strength(invariant)] = counts.get(strength(invariant), 0) + 1
        counts["vacuous-suspect"] += is_vacuous(invariant)
    return counts


def verdict_label(invariant: Mapping[str, Any]) -> str:
    """One invariant's verdict as shown: `proved, vacuous-suspect` for a proof no mutant could break."""
    if invariant["verdict"] == "vacuous-suspect" or not is_vacuous(invariant):
        return str(invariant["verdict"])
    return f"{invariant['verdict']}, vacuous-suspect"


def verdict_note(report: Mapping[str, Any]) -> str:
    """`incomplete, allowed by --allow-incomplete` for a pass the caller accepted unfinished; else empty."""
    accepted = report["verdict"] == "pass" and report.get("allow_incomplete") is True
    return ALLOWED_NOTE if accepted and report.get("complete") is False else ""


@dataclass(frozen=True)
class Money:
    """Formats minor-unit strings with the report's currency, if it names one."""

    scale: int | None
    code: str | None

    @property
    def unit(self) -> str:
        return self.code if self.code and self.scale is not None else "minor units"

    def __call__(self, minor: str | int | None) -> str:
        if minor is None:
            return "?"
        if self.scale is None:
            return str(int(minor))
        return format_money(int(minor), self.scale)


@dataclass(frozen=True)
class Event:
    step: int
    kind: str
    agreement: int | None
    actor: str
    command: str
    clause: str | None
    source: str | None
    target: str | None
    fault: str | None
    effect_phase: str | None
    postings: tuple[str, ...]
    balances: tuple[str, ...]  # aligned with Counterexample.accounts
    changed: tuple[bool, ...]  # whether each balance differs from the step before
    state: str | None  # the acting agreement's state after the event


@dataclass(frozen=True)
class Counterexample:
    number: int
    invariants: tuple[tuple[str, str | None], ...]  # name, clause
    violations: tuple[tuple[str, str], ...]  # name, explanation
    params: tuple[str, ...]  # one line per agreement
    accounts: tuple[str, ...]
    events: tuple[Event, ...]
    clauses: tuple[str, ...]
    replayed: bool


@dataclass(frozen=True)
class View:
    """Everything both renderings print, in the order they print it."""

    report: Json
    title: str
    verdict: str
    verdict_note: str  # empty, or why a pass is one although the run is incomplete
    headline: str
    tally: tuple[tuple[str, int], ...]
    money: Money
    bounds: str
    exploration: str
    invariants: tuple[Json, ...]
    counterexamples: tuple[Counterexample, ...]
    amounts: tuple[Json, ...]
    mutants_caught: tuple[Json, ...]
    mutants_uncaught: tuple[Json, ...]
    coverage: Json
    effect_phases: tuple[tuple[str, tuple[str, ...]], ...]
    warnings: tuple[str, ...]
    does_not_prove: tuple[str, ...]
    artifacts: tuple[tuple[str, str], ...]
    show_agreement: bool


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def build(report: Mapping[str, Any]) -> View:
    """The view of one report document; raises KeyError if a required field is missing."""
    report = dict(report)
    currency = report.get("currency") or {}
    money = Money(currency.get("scale"), currency.get("code") or currency.get("asset"))
    invariants = tuple(_invariant(i) for i in report["invariants"])
    counts = tally(report["invariants"])
    exploration = report["exploration"]
    bounds = report["bounds"]
    show_agreement = bounds["agreements"] > 1 or any(
        (e.get("agreement") or 1) > 1 for cx in report["counterexamples"] for e in cx["events"]
    )
    clauses = {i["name"]: i.get("clause") for i in report["invariants"]}
    mutants = report["mutants"]
    return View(
        report=report,
        title=f"{report['pact']['id']} {report['pact']['version']}",
        verdict=report["verdict"],
        verdict_note=verdict_note(report),
        headline=_headline(report, counts),
        tally=tuple((v, counts[v]) for v in VERDICTS),
        money=money,
        bounds=(
            f"{plural(bounds['agreements'], 'agreement')}, {plural(bounds['faults'], 'fault')} per run, "
            f"depth ≤ {bounds['max_depth']:,}, ≤ {bounds['max_states']:,} states"
        ),
        exploration=_exploration(exploration),
        invariants=invariants,
        counterexamples=tuple(
            _counterexample(n, cx, clauses, money) for n, cx in enumerate(report["counterexamples"], 1)
        ),
        amounts=tuple(_amount(a) for a in report["amounts"]),
        mutants_caught=tuple(m for m in mutants if m["status"] == "caught"),
        mutants_uncaught=tuple(m for m in mutants if m["status"] != "caught"),
        coverage=report["coverage"],
        effect_phases=tuple(
            (site, tuple(phases)) for site, phases in sorted(report["coverage"]["effect_phases"].items())
        ),
        warnings=tuple(report["warnings"]),
        does_not_prove=tuple(report["does_not_prove"]),
        artifacts=tuple(sorted(report["artifacts"].items())),
        show_agreement=show_agreement,
    )


def _headline(report: Mapping[str, Any], counts: Mapping[str, int]) -> str:
    """One sentence: the verdict's grounds, then what else a reviewer must not miss."""
    total = len(report["invariants"])
    exploration = report["exploration"]
    amounts = [a.get("verdict") for a in report["amounts"]]
    extra = [
        plural(amounts.count(v), f"{v} amount property", f"{v} amount properties")
        for v in ("refuted", "unknown")
        if v in amounts
    ]
    if report["verdict"] == "fail":
        found = report["counterexamples"]
        replayed = sum(1 for cx in found if cx.get("replayed"))
        how = (
            "replayed against the compiled artifacts"
            if replayed == len(found)
            else f"{replayed} of them replayed against the compiled artifacts"
        )
        text = f"{counts['violated']} of {plural(total, 'invariant')} violated; "
        text += f"{plural(len(found), 'counterexample')} {how}"
        return text + (f"; {', '.join(extra)}" if extra else "")
    where = (
        "the whole state space within the bounds"
        if exploration["exhausted"]
        else f"the {exploration['states']:,} states explored "
        f"before the `{exploration['bound_hit']}` bound stopped the search"
    )
    caveats = [plural(counts[v], f"`{v}` invariant") for v in ("vacuous-suspect", "unknown") if counts[v]] + extra
    text = f"no invariant violated in {where}"
    if report["verdict"] == "incomplete" or verdict_note(report):
        undecided = total - counts["proved"]
        text += f"; {plural(undecided, 'invariant')} not proved, so the run is incomplete"
        if verdict_note(report):
            text += f" ({ALLOWED_NOTE})"
    return text + (f" ({', '.join(caveats)})" if caveats else "")


def _exploration(exploration: Mapping[str, Any]) -> str:
    how = (
        "state space exhausted"
        if exploration["exhausted"]
        else f"stopped at the `{exploration['bound_hit']}` bound before the state space was exhausted"
    )
    return (
        f"{plural(exploration['states'], 'state')}, {plural(exploration['transitions'], 'transition')}, "
        f"depth {exploration['depth_reached']} ({how}); {plural(exploration['initial_states'], 'initial state')}"
    )


def _invariant(invariant: Mapping[str, Any]) -> Json:
    out = dict(invariant)
    out.setdefault("description", None)
    out.setdefault("amounts", None)
    out["meaning"] = VERDICT_MEANING.get(invariant["verdict"], "")
    out["vacuous"] = is_vacuous(invariant)
    out["strength"] = strength(invariant)
    out["label"] = verdict_label(invariant)
    number = invariant.get("counterexample")
    out["cx_number"] = number + 1 if isinstance(number, int) else None
    return out


def _amount(amount: Mapping[str, Any]) -> Json:
    out = dict(amount)
    witness = amount.get("witness_text")
    if witness is None and amount.get("witness") is not None:
        raw = amount["witness"]
        witness = raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True, ensure_ascii=False)
    out["witness_shown"] = witness or ""
    posting = amount.get("posting")
    out["posting_shown"] = "" if posting is None else str(posting)
    out["detail_shown"] = amount.get("detail") or ""
    return out


def _counterexample(
    number: int, cx: Mapping[str, Any], clauses: Mapping[str, str | None], money: Money
) -> Counterexample:
    accounts = sorted({name for event in cx["events"] for name in event["balances_after"]})
    events = []
    before = dict.fromkeys(accounts, 0)
    for event in cx["events"]:
        # The verifier lists only accounts with a non-zero balance: an absent one is zero.
        now = {a: int(event["balances_after"].get(a, "0")) for a in accounts}
        agreement = event.get("agreement")
        after = event.get("states_after") or []
        if isinstance(agreement, int) and 0 < agreement <= len(after):
            state = after[agreement - 1]
        else:  # a global event (the clock) sits on the state only when there is one agreement
            state = after[0] if len(after) == 1 else None
        events.append(
            Event(
                step=event["step"],
                kind=event["kind"],
                agreement=agreement,
                actor=event["actor"],
                command=event.get("command") or event["kind"],
                clause=event.get("clause"),
                source=event.get("from"),
                target=event.get("to"),
                fault=event.get("fault"),
                effect_phase=event.get("effect_phase"),
                postings=tuple(
                    f"{p['source']} → {p['destination']} {money(p['amount'])}" for p in event.get("postings", [])
                ),
                balances=tuple(money(now[a]) for a in accounts),
                changed=tuple(now[a] != before[a] for a in accounts),
                state=state,
            )
        )
        before = now
    params = []
    for index, block in enumerate(cx["params"], 1):
        text = ", ".join(f"{k} = {v}" for k, v in block.items())
        params.append(f"agreement {index}: {text}" if len(cx["params"]) > 1 else text)
    return Counterexample(
        number=number,
        invariants=tuple((name, clauses.get(name)) for name in cx["invariants"]),
        violations=tuple((v["invariant"], v["explanation"]) for v in cx["violations"]),
        params=tuple(params),
        accounts=tuple(accounts),
        events=tuple(events),
        clauses=tuple(cx["clauses"]),
        replayed=bool(cx["replayed"]),
    )


def split_code(text: str) -> Sequence[tuple[bool, str]]:
    """`text` cut at backticks: (is_code, piece) pairs; an unpaired backtick is kept as text."""
    pieces = text.split("`")
    if len(pieces) % 2 == 0:  # odd number of backticks: the last one opens nothing
        pieces = [*pieces[:-2], pieces[-2] + "`" + pieces[-1]]
    return [(i % 2 == 1, piece) for i, piece in enumerate(pieces) if piece or i % 2 == 1]
