"""Semantic diff of two candidates: what a reviewer must read in a pull request.

The diff compares meaning, not text: transitions, guards, postings, effects,
invariants, params, states, accounts, roles and rules, each keyed by name,
reported as added, removed or changed with the clause labels involved.
A transition renamed in the same edit is paired with its old version (by
clause label, else by sources, target and roles) and reported as changed,
so that a rename cannot hide what else changed in it. Reformatting a policy
yields an empty diff.

On top of the changes, the diff lists the safety downgrades a reviewer must
not miss among them (a strategy weakened, an approval or a guard dropped, a
ceiling raised...): each with its kind, where it is and its value before and
after, at level `downgrade` when the change certainly weakens a protection
and `review` when it may (a guard rewritten, a reversibility changed). The
list is derived from the same two candidates, so CI can gate on it.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from pactwright.expr_text import render_expr
from pactwright.money import format_duration, format_money

Json = dict[str, Any]

_SECTIONS = ("transitions", "invariants", "params", "effects", "states", "accounts", "roles", "rules")


def _key(section: str, item: Json) -> str:
    return str(item["risk"] if section == "rules" else item["name"])


def _describe(section: str, field: str, value: Any, scale: int, item: Json | None = None) -> str:
    """A reviewer-readable rendering of one field's value.

    Amounts are shown in currency units at the scale of the side they come
    from (the candidate keeps minor units: `150` at scale 2 is `1.50`),
    percents with `%` and durations as `1d12h`.
    """
    if value is None:
        return "none"
    if field in ("guard", "expr", "amount") and isinstance(value, dict):
        return render_expr(value, scale)
    if field == "transfers":
        return "; ".join(_transfer(t, scale) for t in value) or "none"
    kind = _kind(section, field, item)
    if kind is not None and isinstance(value, str | int) and not isinstance(value, bool):
        return _value(kind, value, scale)
    if field == "egress" and isinstance(value, list):
        return ", ".join(f"{e.get('method')} {e.get('url')}" for e in value if isinstance(e, dict)) or "none"
    if field == "strategy" and isinstance(value, dict):
        kind_text = str(value.get("kind"))
        return f"{kind_text} with {value['compensation']}" if value.get("compensation") else kind_text
    if field == "approval" and isinstance(value, dict):
        return _approval_text(value)
    if field == "calls" and isinstance(value, list):
        return ", ".join(_call_text(c, scale) for c in value) or "none"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={_describe(field, k, v, scale)}" for k, v in sorted(value.items()))
    return str(value)


def _call_text(call: Any, scale: int) -> str:
    """A call site: `E`, or `E amount EXPR` when the candidate records one per call."""
    name, amount = _call_parts(call)
    if isinstance(amount, dict):
        return f"{name} amount {render_expr(amount, scale)}"
    return name if amount is None else f"{name} amount {amount}"


def _call_parts(call: Any) -> tuple[str, Any]:
    """(effect name, amount or None) of a call, whether stored as a name or as an object."""
    if isinstance(call, dict):
        return str(call.get("effect", call.get("name"))), call.get("amount")
    return str(call), None


def _kind(section: str, field: str, item: Json | None) -> str | None:
    """`money`, `percent` or `duration` when the field holds such a value."""
    if section == "params" and field in ("min", "max", "value") and item is not None:
        kind = item.get("type")
        return kind if kind in ("money", "percent", "duration") else None
    if section in ("effects", "budget") and field == "ceiling":
        return "money"
    if (section, field) in (("effects", "timeout"), ("budget", "max_active_time")):
        return "duration"
    return None


def _value(kind: str, value: str | int, scale: int) -> str:
    try:
        if kind == "money":
            return format_money(int(value), scale)
        if kind == "duration":
            return format_duration(int(value))
    except ValueError:
        return str(value)
    return f"{value}%"


def _transfer(transfer: Json, scale: int) -> str:
    head = f"{render_expr(transfer['amount'], scale)} from {transfer['source']}"
    if transfer.get("destination"):
        return f"{head} to {transfer['destination']}"
    return f"{head} {_portions(transfer.get('portions', []), scale)}"


def _portions(portions: list[Json], scale: int) -> str:
    """`{ SHARE to ACCOUNT, ... }`; a nested split (new in 1.1) as its own braces."""
    parts = []
    for portion in portions:
        if portion["kind"] == "remaining":
            share = "remaining"
        elif portion.get("param"):
            share = str(portion["param"])
        else:
            share = _value("percent" if portion["kind"] == "percent" else "money", portion.get("value", ""), scale)
        to = _portions(portion["split"], scale) if "split" in portion else portion["to"]
        parts.append(f"{share} to {to}")
    return f"{{ {', '.join(parts)} }}"


def semantic_diff(old: Json, new: Json) -> Json:
    """Changes from `old` to `new` candidate JSON, grouped by section."""
    changes: list[Json] = []
    # Each side's amounts are read at that side's scale.
    old_scale, new_scale = _scale(old), _scale(new)
    for field in ("pact", "currency", "budget", "default"):
        if old.get(field) != new.get(field):
            changes.append(
                {
                    "section": "policy",
                    "name": field,
                    "change": "changed",
                    "clause": None,
                    "fields": [
                        {
                            "field": field,
                            "old": _describe("policy", field, old.get(field), old_scale),
                            "new": _describe("policy", field, new.get(field), new_scale),
                        }
                    ],
                }
            )
    for section in _SECTIONS:
        for a, b, matched_by in _pairs(section, old, new):
            if a == b:
                continue
            present = b if b is not None else a
            assert present is not None
            name, clause = _key(section, present), present.get("clause")
            if a is None or b is None:
                changes.append(
                    {
                        "section": section,
                        "name": name,
                        "change": "added" if a is None else "removed",
                        "clause": clause,
                        "fields": [],
                        "summary": _summary(section, present, new_scale if a is None else old_scale),
                    }
                )
                continue
            renamed = matched_by is not None
            fields = [
                {
                    "field": f,
                    "old": _describe(section, f, a.get(f), old_scale, a),
                    "new": _describe(section, f, b.get(f), new_scale, b),
                }
                for f in sorted(a.keys() | b.keys(), key=lambda f: (f != "name", f))
                if (f != "name" or renamed) and a.get(f) != b.get(f)
            ]
            change: Json = {"section": section, "name": name, "change": "changed", "clause": clause, "fields": fields}
            if renamed:
                change["renamed_from"], change["matched_by"] = _key(section, a), matched_by
            changes.append(change)
    return {
        "old": {"pact": old.get("pact"), "candidate_hash": None},
        "new": {"pact": new.get("pact"), "candidate_hash": None},
        "changes": changes,
        "downgrades": safety_downgrades(old, new),
    }


def _pairs(section: str, old: Json, new: Json) -> list[tuple[Json | None, Json | None, str | None]]:
    """The items of `section` on each side, paired as one item (`None` where a side has none).

    Items pair by name. A transition renamed in the same edit pairs too, so
    that a rename cannot hide what else changed in it: among the transitions
    left unpaired on both sides, those with the same clause label pair
    (`matched_by` is `clause`), then those with identical sources, target
    and roles (`shape`) unless both carry a clause label (two different
    labels name two clauses), each only where exactly one transition on each
    side fits. The pairs are in the order of their name (the new one for a
    rename), which is the diff's order.
    """
    before, after = _by_key(old, section), _by_key(new, section)
    pairs: list[tuple[Json | None, Json | None, str | None]] = [
        (before[name], after[name], None) for name in before.keys() & after.keys()
    ]
    gone = [before[name] for name in sorted(before.keys() - after.keys())]
    came = [after[name] for name in sorted(after.keys() - before.keys())]
    if section == "transitions":
        for matched_by, signature in (("clause", _clause_of), ("shape", _shape_of)):
            for a, b in _unique_matches(gone, came, signature):
                if matched_by == "shape" and _clause_of(a) is not None and _clause_of(b) is not None:
                    continue  # two different labels: the author says these are two clauses
                pairs.append((a, b, matched_by))
                gone.remove(a)
                came.remove(b)
    pairs.extend((a, None, None) for a in gone)
    pairs.extend((None, b, None) for b in came)
    return sorted(pairs, key=lambda pair: _key(section, pair[1] if pair[1] is not None else pair[0] or {}))


def _clause_of(transition: Json) -> str | None:
    clause = transition.get("clause")
    return clause if isinstance(clause, str) and clause else None


def _shape_of(transition: Json) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """Where a transition goes from and to, and who may fire it: what a rename leaves alone."""
    sources, roles = _as_list(transition.get("sources")), _as_list(transition.get("roles"))
    return (tuple(sorted(str(s) for s in sources)), str(transition.get("target")), tuple(sorted(str(r) for r in roles)))


def _unique_matches(gone: list[Json], came: list[Json], signature: Callable[[Json], Any]) -> list[tuple[Json, Json]]:
    """Pairs (removed, added) whose signature is shared by exactly one item on each side."""

    def groups(items: list[Json]) -> dict[Any, list[Json]]:
        grouped: dict[Any, list[Json]] = {}
        for item in items:
            key = signature(item)
            if key is not None:
                grouped.setdefault(key, []).append(item)
        return grouped

    old_groups, new_groups = groups(gone), groups(came)
    return [
        (old_groups[key][0], new_groups[key][0])
        for key in old_groups
        if key in new_groups and len(old_groups[key]) == 1 and len(new_groups[key]) == 1
    ]


def _scale(candidate: Json) -> int:
    scale = candidate.get("currency", {}).get("scale", 2)
    return scale if isinstance(scale, int) and not isinstance(scale, bool) else 2


def _summary(section: str, item: Json, scale: int) -> str:
    if section == "transitions":
        text = f"{', '.join(item['sources'])} -> {item['target']} by {', '.join(item['roles'])}"
        if item.get("guard"):
            text += f" when {render_expr(item['guard'], scale)}"
        if item.get("transfers"):
            text += f"; transfer {_describe(section, 'transfers', item['transfers'], scale)}"
        if item.get("stamps"):
            text += f"; stamp {', '.join(item['stamps'])}"
        if item.get("calls"):
            text += f"; call {_describe(section, 'calls', item['calls'], scale)}"
        approval = item.get("approval")
        if isinstance(approval, dict):
            text += f"; approval {_approval_text(approval)}"
        return text
    if section == "invariants":
        return render_expr(item["expr"], scale)
    return ", ".join(f"{k}={_describe(section, k, v, scale, item)}" for k, v in sorted(item.items()) if k != "name")


# How a renamed transition was paired with its old version, as the text output says it.
PAIRED_BY = {"clause": "clause label", "shape": "sources, target and roles"}


def render_diff_text(diff: Json) -> str:
    """The diff as lines a reviewer reads top to bottom."""
    if not diff["changes"]:
        return "no semantic changes\n"
    lines: list[str] = []
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for change in diff["changes"]:
        clause = f" [clause {change['clause']}]" if change.get("clause") else ""
        singular = change["section"].rstrip("s") if change["section"] != "policy" else "policy"
        paired = PAIRED_BY.get(str(change.get("matched_by")))
        how = f" (renamed, paired by {paired})" if paired else ""
        lines.append(f"{marks[change['change']]} {singular} {change['name']}{clause}: {change['change']}{how}")
        if change.get("summary"):
            lines.append(f"    {change['summary']}")
        for field in change["fields"]:
            lines.append(f"    {field['field']}: {field['old']}")
            lines.append(f"    {' ' * len(field['field'])}  -> {field['new']}")
    counts = {kind: sum(1 for c in diff["changes"] if c["change"] == kind) for kind in ("added", "removed", "changed")}
    lines.append(f"{counts['added']} added, {counts['removed']} removed, {counts['changed']} changed")
    lines.extend(render_downgrades_text(diff.get("downgrades", [])))
    return "\n".join(lines) + "\n"


# Safety downgrades --------------------------------------------------------------

# What the runtime does when it cannot tell whether an effect happened, safest
# first. An unset strategy is `once`, as the verifier models it.
_STRATEGY_RANK = {"reconcilable": 2, "idempotent": 2, "compensate": 2, "once": 1, "retry": 0}
# Reversibilities under which an effect counts as moving money (unset included):
# leaving them for `reversible` or `not_applicable` drops it out of the checks
# that only money-moving effects get.
_MONEY_MOVING = (None, "irreversible", "compensable")
# A rule's decision, most restrictive first; a class with no rule is denied.
_DECISION_RANK = {"deny": 3, "require_approval": 2, "allow_with_grant": 1, "allow": 0}
_EFFECT_LIMITS = ("ceiling", "max_calls")
_BUDGET_LIMITS = ("ceiling", "max_turns", "max_model_calls", "max_tool_calls", "max_active_time")


class _Findings:
    """Downgrades found so far; values are rendered at the scale of the side they come from."""

    def __init__(self, old: Json, new: Json) -> None:
        self.old_scale, self.new_scale = _scale(old), _scale(new)
        # Ceilings compare only within one currency.
        self.same_currency = _currency_code(old) == _currency_code(new)
        # The effects of each side, for a call site that now calls another effect.
        self.old_effects, self.new_effects = _by_key(old, "effects"), _by_key(new, "effects")
        # (old effect, new effect) pairs already compared at a call site: each is read once.
        self.effect_pairs: set[tuple[str, str]] = set()
        self.items: list[Json] = []

    def add(self, level: str, kind: str, where: str, item: Json, before: str, after: str) -> None:
        self.items.append(
            {
                "kind": kind,
                "level": level,
                "where": where,
                "clause": item.get("clause"),
                "before": before,
                "after": after,
            }
        )

    def field(self, level: str, kind: str, where: str, section: str, field: str, a: Json, b: Json) -> None:
        """A finding on one field, with its value on each side rendered (`none` when absent)."""
        before = _describe(section, field, a.get(field), self.old_scale, a)
        after = _describe(section, field, b.get(field), self.new_scale, b)
        self.add(level, kind, where, b, before, after)


def safety_downgrades(old: Json, new: Json) -> list[Json]:
    """The changes from `old` to `new` that weaken a protection, for review.

    Each entry has `kind` (for example `strategy weakened`, `guard dropped`,
    `ceiling raised`), `level` (`downgrade` when the protection is certainly
    weaker, `review` when it may be), `where` (`effect refund_payment`,
    `transition issue`, `budget`...), the `clause` if the item has one, and
    the `before` and `after` values as a reviewer reads them. Only items on
    both sides are compared (a renamed transition with its old version, see
    `_pairs`), except invariants (one dropped is a downgrade) and rules (a
    class with no rule is denied). A call site that now calls another effect
    compares the two effects, so renaming an effect cannot hide a weaker
    one. Strengthening a protection is never listed. The order is fixed:
    budget, then sections and names as in the diff.
    """
    found = _Findings(old, new)
    old_budget, new_budget = _as_dict(old.get("budget")), _as_dict(new.get("budget"))
    _limits(found, "budget", "budget", old_budget, new_budget, _BUDGET_LIMITS)
    for section in _SECTIONS:
        for a, b, matched_by in _pairs(section, old, new):
            if a == b:
                continue
            present = b if b is not None else a
            assert present is not None
            where = f"{section.rstrip('s')} {_key(section, present)}"
            if matched_by is not None and a is not None:
                where += f" (was {_key(section, a)})"
            if section == "invariants":
                _invariant(found, where, a, b)
            elif section == "rules":
                _rule(found, where, a, b)
            elif a is None or b is None:
                continue
            elif section == "transitions":
                _transition(found, where, a, b)
            elif section == "effects":
                _effect(found, where, a, b)
                _limits(found, "effects", where, a, b, _EFFECT_LIMITS)
            elif section == "roles" and not a.get("trusted") and b.get("trusted"):
                found.add("downgrade", "role made trusted", where, b, "untrusted", "trusted")
    return found.items


def _by_key(candidate: Json, section: str) -> dict[str, Json]:
    items = candidate.get(section)
    if not isinstance(items, list):
        return {}
    return {_key(section, item): item for item in items if isinstance(item, dict)}


def _as_dict(value: Any) -> Json:
    return value if isinstance(value, dict) else {}


def _currency_code(candidate: Json) -> Any:
    return _as_dict(candidate.get("currency")).get("code")


def _invariant(found: _Findings, where: str, a: Json | None, b: Json | None) -> None:
    if a is None:
        return
    if b is None:
        expr = _describe("invariants", "expr", a.get("expr"), found.old_scale)
        found.add("downgrade", "invariant dropped", where, a, expr, "none")
    elif a.get("expr") != b.get("expr"):
        found.field("review", "invariant changed", where, "invariants", "expr", a, b)


def _rule(found: _Findings, where: str, a: Json | None, b: Json | None) -> None:
    old_decision = str(a.get("decision")) if a is not None else "deny"
    new_decision = str(b.get("decision")) if b is not None else "deny"
    old_rank, new_rank = _DECISION_RANK.get(old_decision), _DECISION_RANK.get(new_decision)
    if old_rank is not None and new_rank is not None and new_rank < old_rank:
        before = old_decision if a is not None else "deny (no rule)"
        found.add("downgrade", "rule relaxed", where, b or {}, before, new_decision)


def _approval_text(value: Json) -> str:
    """`by ROLE`, `by A, B distinct` or `2 by ROLE distinct` (four eyes, new in 1.1), with `not requester`."""
    roles = ", ".join(str(r) for r in (value.get("role"), *(value.get("also") or ())))
    several = bool(value.get("also")) or value.get("count") is not None
    head = f"{value['count']} by {value.get('role')}" if value.get("count") is not None else f"by {roles}"
    return head + (" distinct" if several else "") + (" not requester" if value.get("not_requester") else "")


def _approvals_needed(value: Json) -> int:
    return int(value["count"]) if value.get("count") is not None else 1 + len(value.get("also") or ())


def _transition(found: _Findings, where: str, a: Json, b: Json) -> None:
    section = "transitions"
    if a.get("guard") is not None and b.get("guard") is None:
        found.field("downgrade", "guard dropped", where, section, "guard", a, b)
    elif a.get("guard") is not None and a.get("guard") != b.get("guard"):
        found.field("review", "guard changed", where, section, "guard", a, b)
    approval_a, approval_b = _as_dict(a.get("approval")), _as_dict(b.get("approval"))
    if approval_a and not approval_b:
        found.field("downgrade", "approval dropped", where, section, "approval", a, b)
    elif approval_a:
        # Two separate protections: who approves, and that it is someone other than the requester.
        if approval_a.get("role") != approval_b.get("role"):
            found.field("review", "approval changed", where, section, "approval", a, b)
        if approval_a.get("not_requester") and not approval_b.get("not_requester"):
            found.field("downgrade", "not requester dropped", where, section, "approval", a, b)
        # Four eyes (new in 1.1): fewer required approvals is a downgrade; other changes are a review.
        if _approvals_needed(approval_b) < _approvals_needed(approval_a):
            found.field("downgrade", "fewer approvals", where, section, "approval", a, b)
        elif (approval_a.get("also"), approval_a.get("count")) != (approval_b.get("also"), approval_b.get("count")):
            found.field("review", "approvers changed", where, section, "approval", a, b)
    _calls(found, where, a, b)


def _calls(found: _Findings, where: str, a: Json, b: Json) -> None:
    """Each call site of the transition against the one it was.

    A call site may carry its own amount (`call E amount EXPR`): a change
    there is read. A call site that now calls another effect (one renamed,
    or swapped for another) is read as if the effect had changed: its
    strategy, reversibility, ceiling, max_calls, risk and key (once per pair
    of effects), and the amount the call carries (its own, else the one its
    effect declares).
    """
    old_calls = [_call_parts(call) for call in _as_list(a.get("calls"))]
    new_calls = [_call_parts(call) for call in _as_list(b.get("calls"))]
    for i, j in _align_calls([name for name, _ in old_calls], [name for name, _ in new_calls]):
        (old_effect, old_amount), (new_effect, new_amount) = old_calls[i], new_calls[j]
        site = f"{where} call {new_effect}"
        if old_effect != new_effect:
            site += f" (was {old_effect})"
        elif sum(1 for name, _ in new_calls if name == new_effect) > 1:
            site += f" #{sum(1 for name, _ in new_calls[: j + 1] if name == new_effect)}"
        # Set only where the call site now calls another effect that both sides declare.
        swapped = old_effect != new_effect
        effect_a = found.old_effects.get(old_effect) if swapped else None
        effect_b = found.new_effects.get(new_effect) if swapped else None
        if effect_a is not None and effect_b is not None:
            # What the call carries is its own amount, else the one its effect declares.
            old_amount = effect_a.get("amount") if old_amount is None else old_amount
            new_amount = effect_b.get("amount") if new_amount is None else new_amount
        if old_amount != new_amount:
            before = _describe("transitions", "amount", old_amount, found.old_scale)
            after = _describe("transitions", "amount", new_amount, found.new_scale)
            found.add("review", "amount changed", site, b, before, after)
        if effect_a is None or effect_b is None or (old_effect, new_effect) in found.effect_pairs:
            continue
        found.effect_pairs.add((old_effect, new_effect))
        start = len(found.items)
        _effect(found, site, effect_a, effect_b, amounts=False)
        _limits(found, "effects", site, effect_a, effect_b, _EFFECT_LIMITS)
        for item in found.items[start:]:
            item["clause"] = b.get("clause")


def _align_calls(old: list[str], new: list[str]) -> list[tuple[int, int]]:
    """Index pairs (old, new) of the call sites that are one call site in two versions.

    The k-th call of an effect pairs with the k-th call of the same effect
    (so two calls of one effect are never compared crosswise, and a call
    added in front does not shift the others); the calls left over on both
    sides then pair in order: the effect called there was changed. The
    pairs come in the order of the new calls.
    """
    pairs: list[tuple[int, int]] = []
    taken_old: set[int] = set()
    taken_new: set[int] = set()
    for j, name in enumerate(new):
        occurrence = new[:j].count(name)
        positions = [i for i, other in enumerate(old) if other == name]
        if occurrence < len(positions):
            pairs.append((positions[occurrence], j))
            taken_old.add(positions[occurrence])
            taken_new.add(j)
    left_old = [i for i in range(len(old)) if i not in taken_old]
    left_new = [j for j in range(len(new)) if j not in taken_new]
    pairs.extend(zip(left_old, left_new, strict=False))
    return sorted(pairs, key=lambda pair: pair[1])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _effect(found: _Findings, where: str, a: Json, b: Json, *, amounts: bool = True) -> None:
    """The protections of effect `a` against those of `b` (`amounts`: also the declared amount)."""
    section = "effects"
    strategy_a, strategy_b = _as_dict(a.get("strategy")), _as_dict(b.get("strategy"))
    rank_a = _STRATEGY_RANK.get(str(strategy_a.get("kind", "once")))
    rank_b = _STRATEGY_RANK.get(str(strategy_b.get("kind", "once")))
    if rank_a is not None and rank_b is not None and rank_b < rank_a:
        before = _describe(section, "strategy", strategy_a, found.old_scale) if strategy_a else "once (unset)"
        after = _describe(section, "strategy", strategy_b, found.new_scale) if strategy_b else "once (unset)"
        found.add("downgrade", "strategy weakened", where, b, before, after)
    rev_a, rev_b = a.get("reversibility"), b.get("reversibility")
    if rev_a != rev_b:
        risky = rev_a == "irreversible" or (rev_a in _MONEY_MOVING and rev_b not in _MONEY_MOVING)
        found.field("downgrade" if risky else "review", "reversibility changed", where, section, "reversibility", a, b)
    risk_a, risk_b = _risk_level(a.get("risk")), _risk_level(b.get("risk"))
    if risk_a is not None and risk_b is not None and risk_b < risk_a:
        found.field("downgrade", "risk lowered", where, section, "risk", a, b)
    elif a.get("risk") != b.get("risk") and (risk_a is None or risk_b is None):
        found.field("review", "risk changed", where, section, "risk", a, b)
    key_b = _as_list(b.get("key"))
    if any(field not in key_b for field in _as_list(a.get("key"))):
        found.field("downgrade", "key reduced", where, section, "key", a, b)
    # The amount an effect declares is what its ceiling and total(E) measure.
    if amounts and a.get("amount") != b.get("amount"):
        found.field("review", "amount changed", where, section, "amount", a, b)


def _risk_level(risk: Any) -> int | None:
    text = str(risk)
    return int(text[1:]) if len(text) > 1 and text[0] == "R" and text[1:].isdigit() else None


def _limits(found: _Findings, section: str, where: str, a: Json, b: Json, fields: tuple[str, ...]) -> None:
    """Each limit of `fields` raised or removed (absent means no limit)."""
    for field in fields:
        limit_a, limit_b = a.get(field), b.get(field)
        if limit_a is None or limit_a == limit_b:
            continue
        if limit_b is None:
            found.field("downgrade", f"{field} removed", where, section, field, a, b)
            continue
        money = field == "ceiling"
        old_value = _magnitude(limit_a, found.old_scale if money else 0)
        new_value = _magnitude(limit_b, found.new_scale if money else 0)
        if old_value is None or new_value is None or (money and not found.same_currency):
            # Not comparable (another currency, or a value this version cannot read): read it.
            found.field("review", f"{field} changed", where, section, field, a, b)
        elif new_value > old_value:
            found.field("downgrade", f"{field} raised", where, section, field, a, b)


def _magnitude(value: Any, scale: int) -> Fraction | None:
    """A limit as an exact number of whole units (money is minor units at `scale`)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        return Fraction(int(value), 10**scale)
    except ValueError:
        return None


def render_downgrades_text(downgrades: list[Json]) -> list[str]:
    """The safety downgrades section: one line per finding, prefixed by its level."""
    if not downgrades:
        return ["no safety downgrades"]
    certain = sum(1 for d in downgrades if d["level"] == "downgrade")
    lines = [f"safety downgrades: {len(downgrades)} flagged ({certain} downgrade, {len(downgrades) - certain} review)"]
    for d in downgrades:
        clause = f" [clause {d['clause']}]" if d.get("clause") else ""
        lines.append(f"{d['level']}: {d['where']}{clause}: {d['kind']}: {d['before']} -> {d['after']}")
    return lines
