"""The terminal summary of a report: what was checked, what failed, how to read it."""

from __future__ import annotations

from typing import Any

from pactwright.money import format_money
from pactwright.verifier._report_view import is_vacuous, strength, tally, verdict_note

Json = dict[str, Any]


def _money(value: str | None, scale: int) -> str:
    return format_money(int(value), scale) if value is not None else "?"


def render_summary(report: Json, scale: int, report_path: str | None = None) -> str:
    bounds = report["bounds"]
    exploration = report["exploration"]
    lines = [
        f"{report['pact']['id']} {report['pact']['version']}  candidate {report['candidate_hash'][:19]}…  "
        f"bounds: {bounds['agreements']} agreement{'s' if bounds['agreements'] != 1 else ''}, "
        f"{bounds['faults']} fault{'s' if bounds['faults'] != 1 else ''}, depth {bounds['max_depth']}",
        f"explored {exploration['states']:,} states, {exploration['transitions']:,} transitions, "
        f"depth {exploration['depth_reached']} "
        + (
            "(state space exhausted)"
            if exploration["exhausted"]
            else f"(stopped at the {exploration['bound_hit']} bound)"
        ),
        "",
    ]
    for index, cx in enumerate(report["counterexamples"]):
        names = cx["invariants"]
        clauses = {i["name"]: i.get("clause") for i in report["invariants"]}
        labelled = [f"{n} (clause {clauses[n]})" if clauses.get(n) else n for n in names]
        lines.append("VIOLATED " + " and ".join(labelled))
        lines.append(
            f"shortest counterexample, {cx['length']} event{'s' if cx['length'] != 1 else ''}, "
            "replayed against transitions.json and ledger/*.num:"
        )
        for event in cx["events"]:
            actor = event["actor"]
            command = event.get("command", event["kind"])
            clause = f"[{event['clause']}]" if event.get("clause") else ""
            move = f"{event['from']} -> {event['to']}" if event.get("from") else ""
            fault = f"FAULT {event['fault']}" if event.get("fault") else ""
            phase = f"effect {event['effect_phase']}" if event.get("effect_phase") else ""
            balances = "  ".join(f"{k} {_money(v, scale)}" for k, v in event["balances_after"].items())
            text = f"  {event['step']:>2}. {actor:<10} {command:<22} {clause:<7} {move:<24} {fault} {phase} {balances}"
            lines.append(text.rstrip())
        for violation in cx["violations"]:
            lines.append(f"     ^ {violation['invariant']}: {violation['explanation']}")
        params = ", ".join(f"{k} = {v}" for block in cx["params"] for k, v in block.items())
        if params:
            lines.append(f"  with {params}")
        if index < len(report["counterexamples"]) - 1:
            lines.append("")
    if report["counterexamples"]:
        lines.append("")
    for amount in report["amounts"]:
        witness_text = amount.get("witness_text", amount.get("witness"))
        if amount.get("verdict") == "refuted":
            lines.append(f"amount: {amount['property']} refuted with witness {witness_text}")
        elif amount.get("verdict") == "unknown":
            lines.append(f"amount: {amount['property']} unknown (the solver gave no answer)")
    for invariant in report["invariants"]:
        witness = invariant.get("amount_witness")
        amounts = invariant.get("amounts")
        if witness:
            lines.append(f"amount: {invariant['name']} fails at {witness['param']} = {witness['text']} (z3, confirmed)")
        elif isinstance(amounts, str) and amounts.startswith("proved"):
            lines.append(f"amount: {invariant['name']} {amounts}")
    lines.extend(_properties(report))
    lines.extend(
        f"{limit['verdict'].upper()} {limit['name']}: total({limit['effect']}) <= {limit['max']} per {limit['window']}"
        + (f" per {limit['per']}" if limit.get("per") else "")
        + f" ({limit['method']})"
        for limit in report.get("limits", [])
    )
    counts = tally(report["invariants"])
    lines.append(
        f"proved: {counts['proved']}   held to bound: {counts['holds-to-bound']}   "
        f"violated: {counts['violated']}   vacuous-suspect: {counts['vacuous-suspect']}"
        + (f"   unknown: {counts['unknown']}" if counts["unknown"] else "")
    )
    for invariant in report["invariants"]:
        if strength(invariant) == "proved":
            flag = " (vacuous-suspect)" if is_vacuous(invariant) else ""
            lines.append(f"  proved        {invariant['name']}{flag}")
    for invariant in report["invariants"]:
        if is_vacuous(invariant):
            how = "proved, but " if strength(invariant) == "proved" else ""
            lines.append(f"  vacuous?      {invariant['name']} ({how}no mutant violates it)")
    uncaught = [m for m in report["mutants"] if m["status"] == "uncaught"]
    for mutant in uncaught:
        clause = f" [clause {mutant['clause']}]" if mutant.get("clause") else ""
        lines.append(f"  uncaught mutant{clause}: {mutant['description']}")
    coverage = report["coverage"]
    if coverage["transitions_never_fired"]:
        lines.append(f"  never fired: {', '.join(coverage['transitions_never_fired'])}")
    for warning in report["warnings"]:
        lines.append(f"warning: {warning}")
    lines.append("this report does not prove: " + "; ".join(report["does_not_prove"]))
    verdict = report["verdict"].upper()
    note = verdict_note(report)
    verdict += f" ({note})" if note else ""
    lines.append(f"verdict: {verdict}" + (f"   report: {report_path}" if report_path else ""))
    return "\n".join(lines) + "\n"


def _properties(report: Json) -> list[str]:
    """Liveness properties (new in 1.1): verdict, and a violation's lasso as TLC prints one."""
    lines: list[str] = []
    for prop in report.get("properties", []):
        clause = f" (clause {prop['clause']})" if prop.get("clause") else ""
        lines.append(f"{prop['verdict'].upper()} property {prop['name']}{clause}: {prop['statement']}")
        lasso = prop.get("lasso")
        if prop["verdict"] != "violated" or not lasso:
            if prop["verdict"] == "incomplete":
                lines.append(f"  {prop['method']}")
            continue
        lines.append("  a fair run where the premise holds and the goal never does afterwards:")
        lines.append("   0. initial state")
        for number, event in enumerate(lasso["events"], start=1):
            lines.append(
                f"  {number:>2}. {event['actor']:<10} {event['move']:<22} {event['from']} -> {event['to']}".rstrip()
            )
            if number == lasso["premise_at"]:
                lines.append("     ^ the premise holds")
        if lasso["premise_at"] == 0:
            lines.append("     ^ the premise holds in the initial state")
        if lasso["stuttering"]:
            waiting = ", ".join(lasso["waiting_for"]) or "nothing"
            lines.append(
                f"  {len(lasso['events']) + 1:>2}. stuttering in `{lasso['last_state']}`: no fair move is enabled; "
                f"only people could still act ({waiting})"
            )
            if lasso.get("late"):
                lines.append(f"      {lasso['late']}")
            for refused in lasso.get("refused", []):
                lines.append(f"      the runtime refuses {refused}")
        else:
            lines.append(f"      back to state {lasso['back_to']}")
        if lasso.get("params"):
            lines.append("  with " + ", ".join(f"{k} = {v}" for k, v in sorted(lasso["params"].items())))
    if lines:
        lines.append("")
    return lines
