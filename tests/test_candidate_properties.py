"""The canonical candidate: same meaning, same bytes; different meaning, different hash.

Layout, comments, declaration order and literal spelling must never change
the candidate hash (an approval survives reformatting); any change of an
amount, bound, role, guard, clause label, split portion or order, strategy or
target state must. Golden files pin the bytes of every reference policy:
regenerate them with `python -m tests.regenerate_golden` and review the diff.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactwright.canonical import canonical_bytes, load_json
from pactwright.compiler import ast
from pactwright.compiler.parser import parse_policy
from pactwright.compiler.pipeline import CheckResult, check_text
from pactwright.money import format_duration, format_money
from tests.conftest import REFERENCE_POLICIES
from tests.regenerate_golden import GOLDEN_CANDIDATES, golden_path

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOURCES = {path.stem: path.read_text("utf-8") for path in REFERENCE_POLICIES}
NAMES = sorted(SOURCES)


def _result(text: str) -> CheckResult:
    result = check_text(text)
    assert result.candidate is not None, (
        "\n".join(f"{d.code} {d.span.line}:{d.span.column} {d.message}" for d in result.diagnostics) + "\n" + text
    )
    return result


def candidate_hash(text: str) -> str:
    candidate = _result(text).candidate
    assert candidate is not None
    return candidate.hash()


@pytest.fixture(scope="module")
def reference_hashes() -> dict[str, str]:
    return {name: candidate_hash(text) for name, text in SOURCES.items()}


# --- text surgery helpers -----------------------------------------------------------------------

_TOKEN = re.compile(r'"(?:\\.|[^"\\\n])*"|#[^\n]*|\s+|[A-Za-z0-9_.%]+|->|[=!<>]=|.')


def tokens(text: str) -> list[str]:
    """The policy's tokens: comments and layout dropped, strings kept whole."""
    return [t for t in _TOKEN.findall(text) if not t.isspace() and not t.startswith("#")]


def _offsets(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def _range(text: str, span: Any) -> tuple[int, int]:
    starts = _offsets(text)
    return starts[span.line - 1] + span.column - 1, starts[span.end_line - 1] + span.end_column - 1


def _expressions(node: Any) -> list[Any]:
    """Every expression node under `node`, outermost first."""
    found: list[Any] = []
    if isinstance(node, ast.UnaryExpr):
        found = [node, *_expressions(node.operand)]
    elif isinstance(node, ast.BinaryExpr):
        found = [node, *_expressions(node.left), *_expressions(node.right)]
    elif isinstance(node, ast.NumberExpr | ast.StringExpr | ast.NameExpr | ast.NowExpr | ast.FinalExpr | ast.CallExpr):
        found = [node]
    return found


def _all_expressions(policy: ast.PolicyAst) -> list[Any]:
    out: list[Any] = []
    for decl in policy.decls:
        if isinstance(decl, ast.InvariantDecl):
            out += _expressions(decl.expr)
        if isinstance(decl, ast.TransitionDecl):
            for tfield in decl.fields:
                if isinstance(tfield, ast.WhenField):
                    out += _expressions(tfield.expr)
                elif isinstance(tfield, ast.TransferField):
                    out += _expressions(tfield.amount)
    return out


def _insert(text: str, inserts: list[tuple[int, int, str]]) -> str:
    """Apply (offset, order, piece) insertions; at one offset lower `order` goes first."""
    for offset, _, piece in sorted(inserts, key=lambda i: (-i[0], -i[1])):
        text = text[:offset] + piece + text[offset:]
    return text


def _replace_ranges(text: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, piece in sorted(edits, reverse=True):
        text = text[:start] + piece + text[end:]
    return text


# --- spellings of the same value ------------------------------------------------------------------


def money_spellings(text: str) -> st.SearchStrategy[str]:
    """`12.5`, `12.50`, `012.5`; and `12` for `12.00`."""
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    options = [f"{whole}.{frac}" if frac else whole]
    options += [f"{whole}.{frac.ljust(n, '0')}" for n in range(max(len(frac), 1), 3)]
    options += [f"0{options[0]}"]
    return st.sampled_from(options)


def percent_spellings(text: str) -> st.SearchStrategy[str]:
    whole, _, frac = text[:-1].partition(".")
    frac = frac.rstrip("0")
    return st.sampled_from([f"{whole}.{frac.ljust(n, '0')}%" for n in range(max(len(frac), 1), 5)] + [f"{text}"])


def duration_spellings(seconds: int) -> st.SearchStrategy[str]:
    """Any split of `seconds` into d/h/m/s parts (`1d12h`, `36h`, `129600s`)."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        rest, parts = seconds, []
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            count = draw(st.integers(0, rest // size))
            rest -= count * size
            if count:
                parts.append(f"{count}{unit}")
        if rest or not parts:
            parts.append(f"{rest}s")
        return "".join(parts)

    return build()


_MONEY = re.compile(r"[0-9]+\.[0-9]+")
_PERCENT = re.compile(r"[0-9]+(\.[0-9]+)?%")
_DURATION = re.compile(r"([0-9]+[dhms])+")


@st.composite
def respelled(draw: st.DrawFn, text: str) -> str:
    """`text` with every literal spelt another equivalent way (money at scale 2)."""
    from pactwright.money import parse_duration

    out = []
    for token in re.split(r'("(?:\\.|[^"\\\n])*"|#[^\n]*|[A-Za-z0-9_.%]+)', text):
        if _MONEY.fullmatch(token):
            token = draw(money_spellings(token))
        elif _PERCENT.fullmatch(token):
            token = draw(percent_spellings(token))
        elif _DURATION.fullmatch(token):
            token = draw(duration_spellings(parse_duration(token)))
        out.append(token)
    return "".join(out)


# --- layout, comments, order ------------------------------------------------------------------------

_COMMENT_TEXT = st.text(st.characters(exclude_categories=("Cc", "Cs", "Cf", "Zl", "Zp")), max_size=12)
_SEPARATOR = st.one_of(
    st.sampled_from([" ", "  ", "\n", "\t", "\n\n", " \n  ", "\r\n"]),
    _COMMENT_TEXT.map(lambda c: f"  #{c}\n"),
)


@st.composite
def reformatted(draw: st.DrawFn, text: str) -> str:
    parts = tokens(text)
    separators = draw(st.lists(_SEPARATOR, min_size=len(parts), max_size=len(parts)))
    leading = draw(st.sampled_from(["", "\n", "# a comment before the header\n"]))
    return leading + "".join(p + s for p, s in zip(parts, separators, strict=True))


@st.composite
def reordered(draw: st.DrawFn, text: str) -> str:
    policy = parse_policy(text)
    start, end = _range(text, policy.header.span)
    pieces = [text[slice(*_range(text, decl.span))] for decl in policy.decls]
    order = draw(st.permutations(pieces))
    return text[start:end] + "\n" + "\n".join(order) + "\n"


@st.composite
def parenthesized(draw: st.DrawFn, text: str) -> str:
    """Redundant parentheses around some sub-expressions (a few of them doubled)."""
    policy = parse_policy(text)
    chosen = draw(st.lists(st.sampled_from(_all_expressions(policy)), max_size=12, unique_by=id))
    inserts: list[tuple[int, int, str]] = []
    for expr in chosen:
        start, end = _range(text, expr.span)
        depth = draw(st.integers(1, 2))
        inserts += [(start, 1, "(" * depth), (end, 0, ")" * depth)]
    return _insert(text, inserts)


@st.composite
def names_permuted(draw: st.DrawFn, text: str) -> str:
    """`by a, b` as `by b, a` and `a, b -> c` as `b, a -> c`, wherever there are several."""
    policy = parse_policy(text)
    edits: list[tuple[int, int, str]] = []
    lists: list[tuple[ast.Ident, ...]] = []
    for decl in policy.decls:
        if isinstance(decl, ast.TransitionDecl):
            lists.append(decl.sources)
            lists += [f.roles for f in decl.fields if isinstance(f, ast.ByField)]
    for idents in lists:
        if len(idents) > 1:
            start, _ = _range(text, idents[0].span)
            _, end = _range(text, idents[-1].span)
            names = draw(st.permutations([i.name for i in idents]))
            edits.append((start, end, ", ".join(names)))
    return _replace_ranges(text, edits)


@pytest.mark.parametrize("name", NAMES)
@PROPERTY
@given(data=st.data())
def test_reformatting_keeps_the_hash(name: str, data: st.DataObject, reference_hashes: dict[str, str]) -> None:
    text = data.draw(reformatted(SOURCES[name]))
    assert candidate_hash(text) == reference_hashes[name]


@pytest.mark.parametrize("name", NAMES)
@PROPERTY
@given(data=st.data())
def test_reordering_declarations_keeps_the_hash(
    name: str, data: st.DataObject, reference_hashes: dict[str, str]
) -> None:
    text = data.draw(reordered(SOURCES[name]))
    assert candidate_hash(text) == reference_hashes[name]


@pytest.mark.parametrize("name", NAMES)
@PROPERTY
@given(data=st.data())
def test_equivalent_spellings_keep_the_hash(name: str, data: st.DataObject, reference_hashes: dict[str, str]) -> None:
    text = data.draw(respelled(SOURCES[name]))
    text = data.draw(parenthesized(text))
    text = data.draw(names_permuted(text))
    assert candidate_hash(text) == reference_hashes[name]


@pytest.mark.parametrize("name", NAMES)
@PROPERTY
@given(data=st.data())
def test_everything_at_once_keeps_the_hash(name: str, data: st.DataObject, reference_hashes: dict[str, str]) -> None:
    text = data.draw(names_permuted(SOURCES[name]))
    text = data.draw(parenthesized(text))
    text = data.draw(respelled(text))
    text = data.draw(reordered(text))
    text = data.draw(reformatted(text))
    assert candidate_hash(text) == reference_hashes[name]


def test_spelling_examples_from_the_language_reference() -> None:
    base = _policy(Meaning())
    same = {
        "12.5 = 12.50": ("amount", "12.5", "12.50"),
        "1d12h = 36h": ("wait", "1d12h", "36h"),
        "10% = 10.0%": ("fee", "10%", "10.0%"),
        "1 = 1.00 in money": ("low", "1", "1.00"),
    }
    for label, (field, one, other) in same.items():
        first = _policy(Meaning(), **{field: one})
        second = _policy(Meaning(), **{field: other})
        assert candidate_hash(first) == candidate_hash(second), label
    negative = _policy(Meaning()).replace("balance(escrow) >= 0", "balance(escrow) >= -5")
    assert candidate_hash(negative) == candidate_hash(negative.replace("-5", "-5.00"))
    assert candidate_hash(base) == candidate_hash(_policy(Meaning(), settlers="arbiter, buyer"))
    assert candidate_hash(base) == candidate_hash(_policy(Meaning(), guard_parens=3))


# --- one meaning, rendered many ways; one change, a different hash -----------------------------


@dataclass(frozen=True)
class Meaning:
    """What a generated policy says; `_policy` renders it with chosen spellings."""

    low: int = 100  # minor units
    high: int = 1_000_000
    amount: int = 1250
    fee: int = 100_000  # ten-thousandths of a percent: 10%
    share: int = 5_000  # 0.5%
    portions_swapped: bool = False
    wait: int = 129_600  # seconds
    timeout: int = 15
    strategy: str = "reconcilable"
    label: str = "4.2"
    payer: str = "buyer"
    guard_op: str = ">="
    guard: int = 200
    target: str = "done"
    settlers: frozenset[str] = frozenset({"buyer", "arbiter"})


def _money(minor: int) -> str:
    return format_money(minor, 2)


def _percent(units: int) -> str:
    return format_money(units, 4).rstrip("0").rstrip(".") + "%"


def _policy(meaning: Meaning, guard_parens: int = 0, **spelt: str) -> str:
    """A valid policy that says `meaning`; `spelt` overrides a literal's text."""
    m = meaning
    text = {
        "low": _money(m.low),
        "high": _money(m.high),
        "amount": _money(m.amount),
        "fee": _percent(m.fee),
        "share": _percent(m.share),
        "wait": format_duration(m.wait),
        "timeout": format_duration(m.timeout),
        "guard": _money(m.guard),
        "settlers": ", ".join(sorted(m.settlers)),
        "sources": "held",
    } | spelt
    other = "voided" if m.target == "done" else "done"
    portions = [f"{text['fee']} to platform", f"{text['share']} to seller"]
    if m.portions_swapped:
        portions.reverse()
    guard = "(" * guard_parens + f"price {m.guard_op} {text['guard']}" + ")" * guard_parens
    return f"""pact "prop.test" version "1.0.0"
currency EUR scale 2
default deny
rule R1 allow_with_grant
role buyer
role seller
role arbiter
clock tick
param price: money between {text["low"]} and {text["high"]}
param wait: duration = {text["wait"]}
account world "world" external
account escrow "escrow:{{agreement}}"
account seller "sellers:{{seller}}"
account platform "platform:fees"
effect notify {{
  risk R1
  timeout {text["timeout"]}
  strategy {m.strategy}
  reversibility not_applicable
  key wait
}}
state draft initial
state held
state done final
state voided final
clause "{m.label}" transition fund: draft -> held {{
  by {m.payer}
  stamp funded_at
  transfer {text["amount"]} from world to escrow
}}
transition settle: {text["sources"]} -> {m.target} {{
  by {text["settlers"]}
  when {guard}
  call notify
  transfer price from escrow {{
    {portions[0]}
    {portions[1]}
    remaining to seller
  }}
}}
transition expire: held -> {other} {{
  by tick
  when now >= funded_at + wait
  transfer balance(escrow) from escrow to world
}}
invariant escrow_never_negative: balance(escrow) >= 0
"""


_minor = st.integers(0, 10**9)


@st.composite
def meanings(draw: st.DrawFn) -> Meaning:
    low = draw(st.integers(0, 10**8))
    fee = draw(st.integers(0, 600_000))
    return Meaning(
        low=low,
        high=draw(st.integers(low, 10**9)),
        amount=draw(_minor),
        fee=fee,
        share=draw(st.integers(0, 1_000_000 - fee)),
        portions_swapped=draw(st.booleans()),
        wait=draw(st.integers(1, 10**7)),
        timeout=draw(st.integers(1, 10**5)),
        strategy=draw(st.sampled_from(["retry", "idempotent", "reconcilable", "once"])),
        label=draw(st.text("0123456789.abc", min_size=1, max_size=5)),
        payer=draw(st.sampled_from(["buyer", "seller", "arbiter"])),
        guard_op=draw(st.sampled_from([">=", ">", "<=", "<", "==", "!="])),
        guard=draw(_minor),
        target=draw(st.sampled_from(["done", "voided"])),
        settlers=frozenset(draw(st.sets(st.sampled_from(["buyer", "seller", "arbiter"]), min_size=1))),
    )


@st.composite
def spellings(draw: st.DrawFn, m: Meaning) -> dict[str, Any]:
    """Another way to write `m`: literal spellings, name order, parentheses."""
    return {
        "low": draw(money_spellings(_money(m.low))),
        "high": draw(money_spellings(_money(m.high))),
        "amount": draw(money_spellings(_money(m.amount))),
        "guard": draw(money_spellings(_money(m.guard))),
        "fee": draw(percent_spellings(_percent(m.fee))),
        "share": draw(percent_spellings(_percent(m.share))),
        "wait": draw(duration_spellings(m.wait)),
        "timeout": draw(duration_spellings(m.timeout)),
        "settlers": ", ".join(draw(st.permutations(sorted(m.settlers)))),
        "guard_parens": draw(st.integers(0, 3)),
    }


@PROPERTY
@given(meanings(), st.data())
def test_same_meaning_any_spelling_same_hash(meaning: Meaning, data: st.DataObject) -> None:
    first = _policy(meaning, **data.draw(spellings(meaning)))
    second = _policy(meaning, **data.draw(spellings(meaning)))
    assert candidate_hash(first) == candidate_hash(second)


_CHANGES: dict[str, Any] = {
    "amount": lambda m: st.integers(0, 10**9).filter(lambda v: v != m.amount),
    "low": lambda m: st.integers(0, m.high).filter(lambda v: v != m.low),
    "high": lambda m: st.integers(m.low, 10**9 + 1).filter(lambda v: v != m.high),
    "fee": lambda m: st.integers(0, 1_000_000 - m.share).filter(lambda v: v != m.fee),
    "share": lambda m: st.integers(0, 1_000_000 - m.fee).filter(lambda v: v != m.share),
    "portions_swapped": lambda m: st.just(not m.portions_swapped),
    "wait": lambda m: st.integers(1, 10**7).filter(lambda v: v != m.wait),
    "timeout": lambda m: st.integers(1, 10**5).filter(lambda v: v != m.timeout),
    "strategy": lambda m: st.sampled_from(["retry", "idempotent", "reconcilable", "once"]).filter(
        lambda v: v != m.strategy
    ),
    "label": lambda m: st.text("0123456789.abc", min_size=1, max_size=5).filter(lambda v: v != m.label),
    "payer": lambda m: st.sampled_from(["buyer", "seller", "arbiter"]).filter(lambda v: v != m.payer),
    "guard_op": lambda m: st.sampled_from([">=", ">", "<=", "<", "==", "!="]).filter(lambda v: v != m.guard_op),
    "guard": lambda m: _minor.filter(lambda v: v != m.guard),
    "target": lambda m: st.just("voided" if m.target == "done" else "done"),
    "settlers": lambda m: (
        st.sets(st.sampled_from(["buyer", "seller", "arbiter"]), min_size=1)
        .map(frozenset)
        .filter(lambda v: v != m.settlers)
    ),
}


@PROPERTY
@given(meanings(), st.sampled_from(sorted(_CHANGES)), st.data())
def test_any_change_of_meaning_changes_the_hash(meaning: Meaning, field: str, data: st.DataObject) -> None:
    # (swapping the portions always matters: they go to different accounts)
    changed = replace(meaning, **{field: data.draw(_CHANGES[field](meaning))})
    first = _policy(meaning, **data.draw(spellings(meaning)))
    second = _policy(changed, **data.draw(spellings(changed)))
    assert candidate_hash(first) != candidate_hash(second), field


# Single edits of a reference policy that each change its meaning (and keep it valid).
_EDITS = [
    ("marketplace_milestone", "money between 1.00 and", "money between 2.00 and", "lower bound"),
    ("marketplace_milestone", "and 10000.00", "and 10000.01", "upper bound"),
    ("marketplace_milestone", "fee: percent = 10%", "fee: percent = 10.0001%", "percent"),
    ("marketplace_milestone", "duration = 14d", "duration = 14d1s", "duration"),
    ("marketplace_milestone", 'clause "4.2"', 'clause "4.2 "', "clause label"),
    ("marketplace_milestone", "by arbiter", "by buyer", "role"),
    ("marketplace_milestone", "when now < delivered_at", "when now <= delivered_at", "guard operator"),
    ("marketplace_milestone", "balance(escrow) >= 0", "balance(escrow) >= 0.01", "invariant amount"),
    ("marketplace_milestone", "fee to platform", "fee to seller", "split target"),
    (
        "marketplace_milestone",
        "refund_undelivered: funded -> refunded",
        "refund_undelivered: funded -> released",
        "target state",
    ),
    ("marketplace_milestone", "role seller\n", "role seller untrusted\n", "trust"),
    ("support_refund", "strategy reconcilable", "strategy idempotent", "strategy"),
    ("support_refund", "between 0.01 and 500.00", "between 0.02 and 500.00", "bound"),
    ("support_refund", "max_turns 8", "max_turns 9", "budget"),
    ("support_refund", "approval by refund_approver not requester", "approval by refund_approver", "approval"),
    ("support_refund", 'matching "ORD-[0-9]{1,12}"', 'matching "ORD-[0-9]{1,13}"', "pattern"),
    ("support_refund", "refund_payment) <= 1", "refund_payment) <= 2", "invariant"),
    ("support_refund", "  amount amount ", "  amount amount - 0.01 ", "effect amount"),
    ("unsafe_chargeback", "transfer price from world to escrow", "transfer price from world to platform", "account"),
]


@pytest.mark.parametrize(("name", "old", "new", "what"), _EDITS, ids=[e[3] + "-" + e[0] for e in _EDITS])
def test_edit_of_meaning_changes_the_hash(
    name: str, old: str, new: str, what: str, reference_hashes: dict[str, str]
) -> None:
    text = SOURCES.get(name)
    if text is None:
        pytest.skip(f"no reference policy {name}")
    assert old in text, f"edit `{what}` does not apply"
    assert candidate_hash(text.replace(old, new, 1)) != reference_hashes[name]


def test_split_order_changes_the_hash() -> None:
    forward = _policy(Meaning(fee=100_000, share=5_000))
    backward = _policy(Meaning(fee=100_000, share=5_000, portions_swapped=True))
    assert candidate_hash(forward) != candidate_hash(backward)


# --- golden candidate bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_golden_candidate_bytes(name: str) -> None:
    path = golden_path(name)
    assert path.exists(), f"missing {path}: run `python -m tests.regenerate_golden` and review the diff"
    candidate = _result(SOURCES[name]).candidate
    assert candidate is not None
    assert candidate.canonical_bytes() == path.read_bytes(), "run `python -m tests.regenerate_golden`"


def test_no_stale_golden_files() -> None:
    stale = sorted(p.name for p in Path(GOLDEN_CANDIDATES).glob("*.json") if p.stem not in SOURCES)
    assert not stale, f"golden files without a policy: {stale}"


@pytest.mark.parametrize("name", NAMES)
def test_candidate_bytes_are_rfc8785(name: str) -> None:
    candidate = _result(SOURCES[name]).candidate
    assert candidate is not None
    data = candidate.canonical_bytes()
    document = load_json(data, require_canonical=True)
    assert canonical_bytes(document) == data
    assert document == candidate.to_json()
    assert document["format"] == "pactwright.candidate/1"
    assert not _keys(document) & {"span", "line", "column", "end_line", "end_column"}  # spans are not hashed


def _keys(document: Any) -> set[str]:
    if isinstance(document, dict):
        return set(document).union(*(_keys(v) for v in document.values()))
    if isinstance(document, list):
        return set().union(*(_keys(v) for v in document))
    return set()


# Declared effect amounts ------------------------------------------------------------------------


def test_a_declared_amount_is_in_the_candidate_and_the_hash() -> None:
    text = SOURCES["support_refund"]
    candidate = _result(text).candidate
    assert candidate is not None
    effect = next(e for e in candidate.to_json()["effects"] if e["name"] == "refund_payment")  # type: ignore[union-attr]
    assert effect["amount"] == {"op": "param", "type": "money", "name": "amount", "args": []}
    # The same amount stated at the call instead: another candidate (the declaration is approved as written).
    at_call = text.replace("  amount amount ", "  # ", 1).replace(
        "call refund_payment\n", "call refund_payment amount amount\n"
    )
    moved = _result(at_call).candidate
    assert moved is not None
    issue = next(t for t in moved.to_json()["transitions"] if t["name"] == "issue")  # type: ignore[union-attr]
    assert issue["calls"] == [
        {"effect": "refund_payment", "amount": {"op": "param", "type": "money", "name": "amount", "args": []}}
    ]
    assert moved.hash() != candidate.hash()
    changed = at_call.replace("call refund_payment amount amount\n", "call refund_payment amount amount - 1\n")
    assert candidate_hash(changed) != moved.hash()


@pytest.mark.parametrize("name", [n for n in NAMES if "amount " not in SOURCES[n].replace("param amount", "")])
def test_policies_without_the_form_keep_bare_call_names(name: str) -> None:
    candidate = _result(SOURCES[name]).candidate
    assert candidate is not None
    data = candidate.to_json()
    assert all(isinstance(c, str) for t in data["transitions"] for c in t["calls"])  # type: ignore[union-attr,index]
    assert all("amount" not in e for e in data["effects"])  # type: ignore[union-attr,operator]
