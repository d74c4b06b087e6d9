"""What the review page shows for a bundle, computed from the bundle's files alone.

A reviewer approves clauses, so the page is organised by clause: for each
label in `trace.json`, the source lines it spans, the transitions it
declares (states, roles, guard, approval, effect calls, postings) with the
ledger program each one runs, and the verifier's verdicts for every
invariant or property that cites it, with the counterexamples that pass
through it. An invariant cites a clause when it is declared under the
label or when its expression names one of the clause's transitions or the
effects they call; a counterexample passes through a clause when it fires,
approves or is refused one of its transitions.

Every fact comes from a file the manifest lists (the verdicts from
`report.json`, read through the verifier's own report view so both pages
word them alike). The policy source is not part of a bundle; when the
caller supplies it, its lines are shown only if it compiles to exactly the
bundle's candidate (PW203 otherwise), so the text a reviewer reads is the
text that was approved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pactwright.canonical import hash_bytes, load_json
from pactwright.errors import UsageError
from pactwright.expr_text import render_expr
from pactwright.manifest import MANIFEST_PATH
from pactwright.money import format_money
from pactwright.signing import APPROVAL_PATH, SIGNATURES_PATH
from pactwright.verifier import _report_view

__all__ = ["BundleView", "ClauseView", "bundle_view", "check_source"]

Json = dict[str, Any]
REPORT_PATH = "report.json"
# Counterexample events that name a transition: the command fired, approved, or refused at commit.
_NAMING_KINDS = ("command", "approve", "refused")


@dataclass(frozen=True)
class Verdict:
    """One invariant, liveness property or limit as the verifier decided it, and why it cites a clause."""

    kind: str  # invariant | property | limit
    name: str
    clause: str | None
    verdict: str
    label: str  # the verdict as shown ("proved, vacuous-suspect")
    meaning: str
    text: str  # the expression or statement checked
    method: str
    builtin: bool
    counterexamples: tuple[int, ...]
    names: frozenset[str] = frozenset()  # what its statement mentions: transitions, effects, states...
    why: str = ""


@dataclass(frozen=True)
class ProgramLine:
    number: int
    text: str
    posting: int | None  # the posting this line belongs to, from trace.json


@dataclass(frozen=True)
class TransitionView:
    id: str
    sources: tuple[str, ...]
    target: str
    roles: tuple[str, ...]
    guard: str | None
    approval: str | None
    calls: tuple[str, ...]
    stamps: tuple[str, ...]
    postings: tuple[str, ...]
    program_path: str | None
    program: tuple[ProgramLine, ...]
    span: Json | None

    @property
    def rows(self) -> tuple[tuple[int, str, str], ...]:
        """Program lines as (number, text, mark): `posting` on the lines of a posting."""
        return tuple((line.number, line.text, "posting" if line.posting is not None else "") for line in self.program)


@dataclass(frozen=True)
class CxRef:
    """A counterexample that passes through a clause: its number, what it breaks, its steps in brief."""

    number: int
    invariants: tuple[str, ...]
    steps: tuple[str, ...]


@dataclass(frozen=True)
class ClauseView:
    label: str | None  # None: the items the policy left without a clause label
    anchor: str
    spans: tuple[tuple[int, int], ...]  # (first line, last line) of each declaration, in source order
    source_lines: tuple[tuple[int, str], ...]  # only when the caller supplied the matching source
    transitions: tuple[TransitionView, ...]
    declared: tuple[str, ...]  # invariant and property names declared under the label
    verdicts: tuple[Verdict, ...]
    counterexamples: tuple[CxRef, ...]
    mutants_caught: int
    mutants_uncaught: tuple[str, ...]

    @property
    def source_rows(self) -> tuple[tuple[int, str, str], ...]:
        return tuple((n, text, "") for n, text in self.source_lines)

    @property
    def failing(self) -> bool:
        return bool(self.counterexamples) or any(v.verdict == "violated" for v in self.verdicts)


@dataclass(frozen=True)
class BundleView:
    title: str
    pact_id: str
    pact_version: str
    manifest_hash: str
    candidate_hash: str
    source_name: str
    source_shown: bool
    compiler: str
    currency: str
    verdict: str  # pass | fail | incomplete | unverified
    headline: str
    approver: str | None
    signers: int
    report: _report_view.View | None
    machine: Json
    clauses: tuple[ClauseView, ...]
    policy_verdicts: tuple[Verdict, ...]  # built-in invariants and anything without a clause
    files: tuple[tuple[str, str, int], ...]  # path, sha256, size
    does_not_prove: tuple[str, ...] = field(default_factory=tuple)


def check_source(source: bytes, candidate_hash: str) -> str:
    """The source text, if it compiles to `candidate_hash`; PW203 otherwise."""
    from pactwright.compiler.pipeline import check_bytes

    result = check_bytes(source)
    found = result.candidate.hash() if result.ok and result.candidate is not None else None
    if found != candidate_hash:
        raise UsageError(
            "the policy source is not the one this bundle was compiled from",
            code="PW203",
            expected=candidate_hash,
            found=found or "a policy with blockers",
            hint="pass the exact .pact file the bundle was built from, or leave `--source` out",
        )
    return source.decode("utf-8")


def _doc(files: Mapping[str, bytes], path: str) -> Any:
    return load_json(files[path]) if path in files else None


def _money_text(scale: int, code: str) -> Any:
    return lambda minor: f"{format_money(int(minor), scale)} {code}"


def _portion(portion: Mapping[str, Any], money: Any) -> str:
    if portion["kind"] == "remaining":
        amount = "remaining"
    elif portion["kind"] == "percent":
        amount = f"{portion['percent']}%" if portion.get("percent") is not None else str(portion["param"])
    elif portion.get("max_minor") is not None:
        amount = f"max {money(portion['max_minor'])}"
    else:
        amount = f"max {portion['param']}"
    if portion.get("split") is not None:
        inner = ", ".join(_portion(p, money) for p in portion["split"]["portions"])
        return f"{amount} to {{ {inner} }}"
    return f"{amount} to {portion['to']}"


def posting_text(posting: Mapping[str, Any], scale: int, money: Any) -> str:
    """One posting of transitions.json in policy words: `price from escrow: 10% to platform, remaining to seller`."""
    amount = render_expr(posting["amount"], scale)
    rule = posting["rule"]
    if rule["kind"] == "single":
        return f"{amount} from {posting['source']} to {rule['to']}"
    parts = ", ".join(_portion(p, money) for p in rule["portions"])
    return f"{amount} from {posting['source']}: {parts}"


def _approval_text(approval: Mapping[str, Any] | None) -> str | None:
    if approval is None:
        return None
    if approval.get("count") is not None:
        text = f"{approval['count']} approvals by distinct {approval['role']} parties"
    else:
        roles = [approval["role"], *(approval.get("also") or [])]
        text = "approval by " + ", ".join(roles) + (" (distinct parties)" if len(roles) > 1 else "")
    return text + (", not the requester" if approval.get("not_requester") else "")


def _call_text(call: Mapping[str, Any], scale: int) -> str:
    text = f"call {call['effect']}"
    if call.get("amount") is not None:
        text += f" carrying {render_expr(call['amount'], scale)}"
    strategy = call.get("strategy") or {}
    if strategy.get("kind"):
        text += f" ({strategy['kind']}" + (f" with {strategy['compensation']}" if strategy.get("compensation") else "")
        text += f", risk {call['risk']})" if call.get("risk") else ")"
    return text


def _program(files: Mapping[str, bytes], path: str | None, trace_entry: Mapping[str, Any] | None
             ) -> tuple[ProgramLine, ...]:  # fmt: skip
    if path is None or path not in files:
        return ()
    ranges = [
        (int(a["lines"][0]), int(a["lines"][1]), int(a["posting"]))
        for a in (trace_entry or {}).get("artifacts", [])
        if a.get("path") == path and "posting" in a and "lines" in a
    ]
    lines = files[path].decode("utf-8").splitlines()
    return tuple(
        ProgramLine(n, text, next((p for first, last, p in ranges if first <= n <= last), None))
        for n, text in enumerate(lines, 1)
    )


def _transition(row: Mapping[str, Any], trace_entry: Mapping[str, Any] | None, files: Mapping[str, bytes],
                scale: int, money: Any) -> TransitionView:  # fmt: skip
    ledger = row.get("ledger") or {}
    program_path = ledger.get("program") if isinstance(ledger, Mapping) else None
    return TransitionView(
        id=str(row["id"]),
        sources=tuple(str(s) for s in row["from"]),
        target=str(row["to"]),
        roles=tuple(str(r) for r in row["roles"]),
        guard=None if row.get("guard") is None else render_expr(row["guard"], scale),
        approval=_approval_text(row.get("approval")),
        calls=tuple(_call_text(c, scale) for c in row.get("effects", [])),
        stamps=tuple(str(s) for s in row.get("stamps", [])),
        postings=tuple(posting_text(p, scale, money) for p in row.get("postings", [])),
        program_path=program_path,
        program=_program(files, program_path, trace_entry),
        span=None if trace_entry is None else trace_entry.get("span"),
    )


def names_in(expr: Any) -> set[str]:
    """Every `name` an expression tree mentions (transitions, effects, accounts, params, states)."""
    found: set[str] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if isinstance(node.get("name"), str):
                found.add(node["name"])
            stack.extend(node.get("args", []))
            stack.extend(v for k, v in node.items() if k in ("premise", "goal", "expr") and isinstance(v, Mapping))
    return found


def _cx_transitions(cx: Mapping[str, Any]) -> set[str]:
    """The transitions a counterexample names: commands fired, approved, or refused at commit."""
    return {
        str(e["command"]).rsplit(" ", 1)[-1] for e in cx["events"] if e["kind"] in _NAMING_KINDS and e.get("command")
    }


def _verdicts(table: Mapping[str, Any], report: Mapping[str, Any] | None, view: _report_view.View | None,
              scale: int) -> list[Verdict]:  # fmt: skip
    """Every invariant, property and limit with its verdict (`unverified` without a report)."""
    exprs = {str(i["name"]): i["expr"] for i in table.get("invariants", [])}
    props = {str(p["name"]): p for p in table.get("properties", [])}
    out: list[Verdict] = []
    if view is not None and report is not None:
        cx_of: dict[str, list[int]] = {}
        for number, cx in enumerate(report["counterexamples"], 1):
            for name in cx["invariants"]:
                cx_of.setdefault(str(name), []).append(number)
        for inv in view.invariants:
            name = str(inv["name"])
            text = render_expr(exprs[name], scale) if name in exprs else str(inv.get("description") or "")
            out.append(Verdict("invariant", name, inv.get("clause"), str(inv["verdict"]), str(inv["label"]),
                               str(inv["meaning"]), text, str(inv["method"]), bool(inv.get("builtin")),
                               tuple(cx_of.get(name, ())), frozenset(names_in(exprs.get(name)))))  # fmt: skip
        for prop in report.get("properties", []):
            out.append(Verdict("property", str(prop["name"]), prop.get("clause"), str(prop["verdict"]),
                               str(prop["verdict"]), _report_view.VERDICT_MEANING.get(str(prop["verdict"]), ""),
                               str(prop.get("statement", "")), str(prop.get("method", "")), False, (),
                               frozenset(names_in(props.get(str(prop["name"]))))))  # fmt: skip
        for limit in report.get("limits", []):
            per = f" per {limit['per']}" if limit.get("per") else ""
            text = f"total({limit['effect']}) <= {limit['max']} within {limit['window']}{per}"
            out.append(Verdict("limit", str(limit["name"]), None, str(limit["verdict"]), str(limit["verdict"]),
                               _report_view.VERDICT_MEANING.get(str(limit["verdict"]), ""), text,
                               str(limit.get("method", "")), False, (), frozenset({str(limit["effect"])})))  # fmt: skip
        return out
    for name, expr in exprs.items():
        clause = next((i.get("clause") for i in table["invariants"] if i["name"] == name), None)
        out.append(Verdict("invariant", name, clause, "unverified", "unverified", "this bundle carries no report",
                           render_expr(expr, scale), "", False, (), frozenset(names_in(expr))))  # fmt: skip
    for prop in table.get("properties", []):
        out.append(Verdict("property", str(prop["name"]), prop.get("clause"), "unverified", "unverified",
                           "this bundle carries no report", str(prop.get("kind", "")), "", False, (),
                           frozenset(names_in(prop))))  # fmt: skip
    return out


def _cites(verdict: Verdict, label: str | None, transitions: set[str], effects: set[str], cx_here: set[int]) -> str:
    """Why `verdict` cites the clause, or empty when it does not."""
    if label is not None and verdict.clause == label:
        return "declared under this clause"
    named = sorted(verdict.names & (transitions | effects))
    if named:
        return ("limits " if verdict.kind == "limit" else "names ") + ", ".join(f"`{n}`" for n in named)
    through = sorted(set(verdict.counterexamples) & cx_here)
    if through:
        return "its counterexample passes through this clause"
    return ""


def _cx_refs(report: Mapping[str, Any] | None, view: _report_view.View | None, label: str | None,
             transitions: set[str]) -> tuple[CxRef, ...]:  # fmt: skip
    if report is None or view is None:
        return ()
    out = []
    for number, (cx, shown) in enumerate(zip(report["counterexamples"], view.counterexamples, strict=True), 1):
        if (label is not None and label in cx["clauses"]) or (_cx_transitions(cx) & transitions):
            steps = tuple(f"{e.step}. {e.command}" for e in shown.events)
            out.append(CxRef(number, tuple(str(i) for i in cx["invariants"]), steps))
    return tuple(out)


def _anchor(index: int, label: str | None) -> str:
    return f"clause-{index}" if label is not None else "clause-unlabelled"


def _source_lines(source: str | None, spans: Sequence[tuple[int, int]]) -> tuple[tuple[int, str], ...]:
    if source is None:
        return ()
    lines = source.splitlines()
    wanted = sorted({n for first, last in spans for n in range(first, last + 1) if 1 <= n <= len(lines)})
    return tuple((n, lines[n - 1]) for n in wanted)


def _clauses(files: Mapping[str, bytes], trace: Mapping[str, Any], table: Mapping[str, Any],
             report: Mapping[str, Any] | None, view: _report_view.View | None, verdicts: list[Verdict],
             source: str | None, scale: int, money: Any) -> tuple[list[ClauseView], set[str]]:  # fmt: skip
    rows = {str(t["id"]): t for t in table["transitions"]}
    traced = {str(t["id"]): t for t in trace["transitions"]}
    spans_of = {str(i["name"]): i.get("span") for i in [*trace.get("invariants", []), *trace.get("properties", [])]}
    groups: list[tuple[str | None, list[str], list[str]]] = [
        (str(c["clause"]), [str(t) for t in c["transitions"]],
         [str(n) for n in [*c.get("invariants", []), *c.get("properties", [])]])
        for c in trace["clauses"]
    ]  # fmt: skip
    unlabelled = [str(n) for n in trace.get("unlabelled", [])]
    if unlabelled:
        groups.append((None, [n for n in unlabelled if n in rows], [n for n in unlabelled if n not in rows]))
    cited: set[str] = set()
    out = []
    for index, (label, transition_ids, declared) in enumerate(groups, 1):
        transitions = [_transition(rows[t], traced.get(t), files, scale, money) for t in transition_ids if t in rows]
        effects = {str(c["effect"]) for t in transition_ids if t in rows for c in rows[t].get("effects", [])}
        refs = _cx_refs(report, view, label, set(transition_ids))
        here: list[Verdict] = []
        for verdict in verdicts:
            if label is None and verdict.name in declared:
                why = "declared without a clause label"
            else:
                why = _cites(verdict, label, set(transition_ids), effects, {r.number for r in refs})
            if why:
                here.append(replace(verdict, why=why))
                if why.startswith("declared"):
                    cited.add(verdict.name)
        spans = sorted(
            (int(s["line"]), int(s["end_line"]))
            for s in [*(t.span for t in transitions), *(spans_of.get(n) for n in declared)]
            if s is not None
        )
        mutants = [m for m in (report or {}).get("mutants", []) if label is not None and m.get("clause") == label]
        out.append(ClauseView(
            label=label, anchor=_anchor(index, label), spans=tuple(spans),
            source_lines=_source_lines(source, spans), transitions=tuple(transitions), declared=tuple(declared),
            verdicts=tuple(here), counterexamples=refs,
            mutants_caught=sum(1 for m in mutants if m["status"] == "caught"),
            mutants_uncaught=tuple(str(m["id"]) for m in mutants if m["status"] != "caught"),
        ))  # fmt: skip
    return out, cited


def machine_of(table: Mapping[str, Any]) -> Json:
    """transitions.json's states and transitions in the shape `_svg.layout` reads (the report's `machine`)."""
    return {
        "states": [{"name": s["name"], "initial": s["initial"], "final": s["final"]} for s in table["states"]],
        "transitions": [
            {"id": t["id"], "clause": t.get("clause"), "from": list(t["from"]), "to": t["to"]}
            for t in table["transitions"]
        ],
    }


def bundle_view(files: Mapping[str, bytes], source: str | None = None) -> BundleView:
    """The page's view of a bundle whose files were already checked against their manifest."""
    manifest = load_json(files[MANIFEST_PATH])
    table, trace = load_json(files["transitions.json"]), load_json(files["trace.json"])
    report = _doc(files, REPORT_PATH)
    view = _report_view.build(report) if report is not None else None
    currency = table["currency"]
    scale, code = int(currency["scale"]), str(currency["code"])
    money = _money_text(scale, code)
    verdicts = _verdicts(table, report, view, scale)
    clauses, cited = _clauses(files, trace, table, report, view, verdicts, source, scale, money)
    approval = _doc(files, APPROVAL_PATH)
    signatures = _doc(files, SIGNATURES_PATH)
    pact = manifest["pact"]
    return BundleView(
        title=f"{pact['id']} {pact['version']}",
        pact_id=str(pact["id"]),
        pact_version=str(pact["version"]),
        manifest_hash=hash_bytes(files[MANIFEST_PATH]),
        candidate_hash=str(manifest["candidate_hash"]),
        source_name=str(trace.get("source", "")),
        source_shown=source is not None,
        compiler=" ".join(str(v) for v in manifest.get("compiler", {}).values()),
        currency=f"{code}, {scale} decimals",
        verdict=str(report["verdict"]) if report is not None else "unverified",
        headline=view.headline if view is not None else "this bundle carries no verification report",
        approver=None if approval is None else str(approval["statement"]["approver"]),
        signers=0 if signatures is None else len(signatures["signatures"]),
        report=view,
        machine=report["machine"] if report is not None else machine_of(table),
        clauses=tuple(clauses),
        policy_verdicts=tuple(v for v in verdicts if v.name not in cited),
        files=tuple((str(a["path"]), str(a["sha256"]), int(a["size"])) for a in manifest["artifacts"]),
        does_not_prove=tuple(report["does_not_prove"]) if report is not None else (),
    )
