"""`format_policy` and `pactwright fmt`: canonical, idempotent, meaning- and comment-preserving."""

from __future__ import annotations

import dataclasses
import random
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactwright.compiler import ast
from pactwright.compiler.formatter import format_policy
from pactwright.compiler.parser import ParseFailure, parse_policy
from pactwright.compiler.pipeline import check_text

ROOT = Path(__file__).resolve().parent.parent
REFERENCES = [
    ROOT / "policies" / f"{name}.pact" for name in ("marketplace_milestone", "support_refund", "unsafe_chargeback")
]
ALL_POLICIES = sorted((ROOT / "policies").glob("*.pact"))
PACTWRIGHT = Path(sys.executable).with_name("pactwright")
COMMENT = re.compile(r"#[^\n]*")  # the policies tested here have no `#` inside strings
KEPT = re.compile(r'("(?:\\.|[^"\\\n])*"|#[^\n]*)')  # strings and comments: not to be scattered


def candidate_bytes(text: str) -> bytes:
    result = check_text(text)
    assert result.candidate is not None, [d.message for d in result.diagnostics]
    return result.candidate.canonical_bytes()


def comments(text: str) -> list[str]:
    return sorted(c.rstrip() for c in COMMENT.findall(text))


def assert_guarantees(text: str) -> str:
    """The three promises of `format_policy`, for a policy that checks."""
    formatted = format_policy(text)
    assert format_policy(formatted) == formatted, "not idempotent"
    assert candidate_bytes(formatted) == candidate_bytes(text), "meaning changed"
    assert comments(formatted) == comments(text), "comments changed"
    return formatted


def shape(node: Any) -> Any:
    """A syntax tree without its spans: what two spellings must share."""
    if isinstance(node, list | tuple):
        return [shape(v) for v in node]
    if isinstance(node, ast.Node):
        names = [f.name for f in dataclasses.fields(node)] if dataclasses.is_dataclass(node) else vars(node)
        return (type(node).__name__, {n: shape(getattr(node, n)) for n in names if n not in ("span", "op_span")})
    return node


# The reference policies ----------------------------------------------------------


@pytest.mark.parametrize("path", REFERENCES, ids=lambda p: p.stem)
def test_reference_policies_keep_meaning_and_comments(path: Path) -> None:
    text = path.read_text("utf-8")
    formatted = assert_guarantees(text)
    assert len(COMMENT.findall(formatted)) == len(COMMENT.findall(text))
    assert formatted.startswith("#")  # comments before the header stay before it


@pytest.mark.parametrize("path", ALL_POLICIES, ids=lambda p: p.stem)
def test_every_policy_in_the_tree_formats_stably(path: Path) -> None:
    text = path.read_text("utf-8")
    formatted = format_policy(text)
    assert format_policy(formatted) == formatted
    assert comments(formatted) == comments(text)
    before, after = check_text(text).candidate, check_text(formatted).candidate
    assert (before and before.canonical_bytes()) == (after and after.canonical_bytes())


def test_reference_layout() -> None:
    formatted = format_policy((ROOT / "policies" / "marketplace_milestone.pact").read_text("utf-8"))
    assert "\nclock scheduler  # the only actor that may act on time\n" in formatted
    assert '\naccount world "world" external  # money enters and leaves through here\n' in formatted
    assert 'pact "marketplace.milestone" version "1.0.0"\n\ncurrency EUR scale 2\n\nrole buyer\n' in formatted
    assert 'state refunded final\n\nclause "2.1" transition fund: draft -> funded {\n  by buyer\n' in formatted
    assert "  transfer price from escrow {\n    fee to platform\n    remaining to seller\n  }\n}\n" in formatted
    # Consecutive invariants stay together; a long one wraps before an operator.
    assert (
        'clause "7.1" invariant escrow_never_negative: balance(escrow) >= 0\n'
        'clause "7.2" invariant settles_once: applied(release) + applied(auto_release)\n'
        "  + applied(refund_undelivered) + applied(rule_for_buyer) + applied(rule_for_seller) <= 1\n"
    ) in formatted
    assert max(len(line) for line in formatted.splitlines()) <= 100


def test_support_refund_layout() -> None:
    formatted = format_policy((ROOT / "policies" / "support_refund.pact").read_text("utf-8"))
    assert (
        "currency EUR scale 2\ndefault deny  # a risk class with no rule is denied\n\nrole support_agent\n" in formatted
    )
    assert "  max_active_time 1m\n  ceiling 500.00\n}\n\nrule R1 allow_with_grant  # read the order\n" in formatted
    assert "  key order_id, amount  # protected fields: change one and it is a new action\n" in formatted
    assert "}\n\neffect refund_payment {\n" in formatted
    assert "  amount amount  # what one refund carries: the agreed amount\n" in formatted


DECLARED_AMOUNTS = """pact "a" version "1"
currency EUR scale 2
role clerk
param amount: money between 1 and 50
param fee: percent = 2.5%
account world "world" external
account shop "shop"
rule R1 allow
effect pay { risk R1 reversibility irreversible key amount amount ((amount)) }
effect credit { risk R1 reversibility irreversible }
state s initial
state e final
transition go: s -> e { by clerk call pay call credit amount amount-amount*fee transfer amount from world to shop }
"""


def test_declared_amounts_print_in_place_and_round_trip() -> None:
    formatted = assert_guarantees(DECLARED_AMOUNTS)
    assert "  key amount\n  amount amount\n}\n" in formatted
    assert "  call pay\n  call credit amount amount - amount * fee\n  transfer amount from world to shop\n" in formatted
    effects = [shape(d) for d in parse_policy(DECLARED_AMOUNTS).decls if isinstance(d, ast.EffectDecl)]
    assert [shape(d) for d in parse_policy(formatted).decls if isinstance(d, ast.EffectDecl)] == effects
    assert candidate_bytes(formatted) == candidate_bytes(DECLARED_AMOUNTS)


def test_a_long_call_site_amount_wraps_and_round_trips() -> None:
    terms = " + ".join(["amount_with_a_long_name"] * 8)
    text = (
        'pact "w" version "1"\ncurrency EUR scale 2\nrole r\nparam amount_with_a_long_name: money = 1.00\n'
        f"effect e {{ risk R1 reversibility irreversible }}\ntransition go: s -> t {{ by r call e amount {terms} }}\n"
    )
    formatted = format_policy(text)
    assert all(len(line) <= 100 for line in formatted.splitlines())
    assert "  call e amount amount_with_a_long_name + " in formatted
    assert "\n    + amount_with_a_long_name" in formatted
    assert format_policy(formatted) == formatted
    assert shape(parse_policy(formatted)) == shape(parse_policy(text))


# Messy spellings of the same policies ----------------------------------------------


def _without_comments(text: str) -> str:
    return COMMENT.sub("", text)


@pytest.mark.parametrize("path", REFERENCES, ids=lambda p: p.stem)
def test_collapsed_whitespace_formats_the_same(path: Path) -> None:
    plain = _without_comments(path.read_text("utf-8"))
    collapsed = re.sub(r"\s+", " ", plain)  # reference strings hold single spaces only
    assert "\n" not in collapsed
    assert assert_guarantees(collapsed) == format_policy(plain)


def _outside_strings(text: str, change: Callable[[str], str]) -> str:
    """`change` applied to the code only, never inside strings or comments."""
    parts = KEPT.split(text)  # the captured group makes every odd part a kept one
    return "".join(part if index % 2 else change(part) for index, part in enumerate(parts))


@pytest.mark.parametrize("path", REFERENCES, ids=lambda p: p.stem)
def test_scattered_layout_formats_the_same(path: Path) -> None:
    text = path.read_text("utf-8")
    scattered = _outside_strings(
        text, lambda code: code.replace("\n", "\n\n\t ").replace(": ", " :\n").replace("{", "\n{\n")
    )
    assert assert_guarantees(scattered) == format_policy(text)


def test_extra_parentheses_are_dropped() -> None:
    text = (ROOT / "policies" / "marketplace_milestone.pact").read_text("utf-8")
    messy = text.replace("balance(escrow) >= 0", "((balance(escrow)) >= (((0))))").replace(
        "now >= delivered_at + refund_window", "(now >= (delivered_at + (refund_window)))"
    )
    assert messy != text
    assert assert_guarantees(messy) == format_policy(text)


MESSY_LITERALS = """\
pact "lit" version "1"
currency EUR scale 2
role r
clock tick
param price: money between 1 and 12.5
param cap: money = 007.1
param fee: percent between 2.50% and 10.0%
param cut: percent = 010%
param wait: duration = 36h
account a "a" external
account b "b"
account c "c"
budget { max_turns 08 max_active_time 90m ceiling 500 }
state s initial
state t final
transition go: s -> t {
  by r, tick
  when now >= go_at + 3600s and price > 0.5 and fired(go) < 01
  stamp go_at
  transfer price from a { 5 to b 2.5 to c remaining to b }
}
invariant i: balance(b) >= 0.0 and balance(a) <= 1d12h - 1d12h + 0 * 0
"""

MESSY_LITERALS_FORMATTED = """\
pact "lit" version "1"

currency EUR scale 2

role r
clock tick

param price: money between 1.00 and 12.50
param cap: money = 7.10
param fee: percent between 2.5% and 10%
param cut: percent = 10%
param wait: duration = 1d12h

account a "a" external
account b "b"
account c "c"

budget {
  max_turns 8
  max_active_time 1h30m
  ceiling 500.00
}

state s initial
state t final

transition go: s -> t {
  by r, tick
  when now >= go_at + 1h and price > 0.50 and fired(go) < 1
  stamp go_at
  transfer price from a {
    5.00 to b
    2.50 to c
    remaining to b
  }
}

invariant i: balance(b) >= 0.00 and balance(a) <= 1d12h - 1d12h + 0 * 0
"""


def test_literals_take_their_canonical_spelling() -> None:
    assert format_policy(MESSY_LITERALS) == MESSY_LITERALS_FORMATTED
    # The invariant compares money with a duration: it does not check, and
    # fmt does not care; the rest of the file means the same.
    fixed = MESSY_LITERALS.replace("balance(a) <= 1d12h - 1d12h + 0 * 0", "balance(a) <= 12")
    assert_guarantees(fixed)


def test_currency_scale_governs_money() -> None:
    text = 'pact "p" version "1"\ncurrency JPY scale 0\nparam p: money between 1 and 12\n'
    assert "param p: money between 1 and 12\n" in format_policy(text)
    text = 'pact "p" version "1"\ncurrency BTC scale 8\nparam p: money = 0.5\n'
    assert "param p: money = 0.50000000\n" in format_policy(text)


def test_rejected_literals_stay_as_written() -> None:
    """fmt must not turn an error into something else (or hide it)."""
    text = 'pact "p" version "1"\ncurrency EUR scale 2\nparam p: money between 1.005 and 2x\n'
    assert "param p: money between 1.005 and 2x\n" in format_policy(text)
    codes = sorted(d.code for d in check_text(text).diagnostics)
    assert sorted(d.code for d in check_text(format_policy(text)).diagnostics) == codes
    # Without a usable currency, money keeps its spelling: the scale is unknown.
    for currency in ("", "currency EUR scale 9\n"):
        text = f'pact "p" version "1"\n{currency}param p: money = 1.5\n'
        assert "param p: money = 1.5\n" in format_policy(text)


def test_strings_are_reescaped() -> None:
    text = 'pact "a\\"b\\\\c #1" version "1"\naccount x  "x:{agreement}#2"  # real\n'
    formatted = format_policy(text)
    assert formatted == 'pact "a\\"b\\\\c #1" version "1"\n\naccount x "x:{agreement}#2"  # real\n'
    assert parse_policy(formatted).header.pact_id.value == 'a"b\\c #1'


# Comments in odd places -------------------------------------------------------------

ODD_COMMENTS = """\
# before the header
pact "odd" version "1"  # trails the header
currency EUR scale 2 role r
# leads the state
state s initial # trails s
state t final
clause "1"  # trails the clause, on the transition's first line
transition go:
  # inside the header: leads the transition
  s -> t {  # after the brace
  # leads by
  by r  # trails by
  transfer 1 from a {  # opens the split
    # leads the portion
    10% to b  # trails the portion
    remaining to b
    # end of split
  }  # closes the split
  # end of block
}  # closes go
account a "a" external account b "b"
invariant i:  # trails i (first of two)
  # inside i
  balance(a) <= 0  # trails i (second of two)
  or balance(b) >= 0
# after everything

# really the end
"""

ODD_COMMENTS_FORMATTED = """\
# before the header
pact "odd" version "1"  # trails the header

currency EUR scale 2

role r

# leads the state
state s initial  # trails s
state t final

# inside the header: leads the transition
# trails the clause, on the transition's first line
clause "1" transition go: s -> t {  # after the brace
  # leads by
  by r  # trails by
  transfer 1 from a {  # opens the split
    # leads the portion
    10% to b  # trails the portion
    remaining to b
    # end of split
  }  # closes the split
  # end of block
}  # closes go

account a "a" external
account b "b"

# inside i
# trails i (first of two)
invariant i: balance(a) <= 0 or balance(b) >= 0  # trails i (second of two)

# after everything
# really the end
"""


def test_comments_in_odd_places() -> None:
    formatted = format_policy(ODD_COMMENTS)
    assert formatted == ODD_COMMENTS_FORMATTED
    assert format_policy(formatted) == formatted
    assert comments(formatted) == comments(ODD_COMMENTS)


def test_comment_after_the_last_declaration_stays_at_the_end() -> None:
    text = 'pact "p" version "1"\nrole r\n# bye'
    assert format_policy(text) == 'pact "p" version "1"\n\nrole r\n\n# bye\n'
    assert format_policy('pact "p" version "1" # only\n') == 'pact "p" version "1"  # only\n'


def test_crlf_and_trailing_spaces_in_comments() -> None:
    text = '# top  \r\npact "p" version "1"\r\nrole r   # r\t \r\n'
    assert format_policy(text) == '# top\npact "p" version "1"\n\nrole r  # r\n'


# Expressions: minimal parentheses, same tree ---------------------------------------

EXPRESSIONS = [
    ("a - (b - c)", "a - (b - c)"),
    ("(a - b) - c", "a - b - c"),
    ("a / (b * c)", "a / (b * c)"),
    ("(a * b) + c", "a * b + c"),
    ("a * (b + c)", "a * (b + c)"),
    ("(a implies b) implies c", "(a implies b) implies c"),
    ("a implies (b implies c)", "a implies b implies c"),
    ("not (a and b)", "not (a and b)"),
    ("(not a) and b", "not a and b"),
    ("not (a < b)", "not a < b"),
    ("not (not a)", "not not a"),
    ("not (a implies b)", "not (a implies b)"),
    ("(not a) implies b", "not a implies b"),
    ("(a or b) and c", "(a or b) and c"),
    ("a or (b and c)", "a or b and c"),
    ("(a and b) or c", "a and b or c"),
    ("a and (b or c)", "a and (b or c)"),
    ("(a or b) or c", "a or b or c"),
    ("a or (b or c)", "a or (b or c)"),
    ("(a < b) == c", "(a < b) == c"),
    ("a == (b < c)", "a == (b < c)"),
    ("(a + b) < (c * d)", "a + b < c * d"),
    ("-(a + b)", "-(a + b)"),
    ("-(a * b)", "-(a * b)"),
    ("(-a) * b", "-a * b"),
    ("a + (-b)", "a + -b"),
    ("- - a", "--a"),
    ("a - (-(-b))", "a - --b"),
    ("((((a))))", "a"),
    ('(balance(x)) >= (0) and ("t" == name)', 'balance(x) >= 0 and "t" == name'),
    ("(now) >= (s + 1d) implies (final)", "now >= s + 1d implies final"),
]


@pytest.mark.parametrize(("source", "expected"), EXPRESSIONS)
def test_expression_parentheses(source: str, expected: str) -> None:
    text = f'pact "e" version "1"\ninvariant i: {source}\n'
    formatted = format_policy(text)
    assert formatted == f'pact "e" version "1"\n\ninvariant i: {expected}\n'
    assert shape(parse_policy(formatted).decls[0]) == shape(parse_policy(text).decls[0])


def test_long_guard_wraps_and_round_trips() -> None:
    guard = " and ".join(f"fired(transition_number_{i}) <= {i}" for i in range(8))
    text = f'pact "w" version "1"\ntransition go: s -> t {{ by r when {guard} }}\n'
    formatted = format_policy(text)
    assert all(len(line) <= 100 for line in formatted.splitlines())
    assert "\n    and fired(" in formatted  # continuation: one level deeper than `when`
    assert format_policy(formatted) == formatted
    assert shape(parse_policy(formatted)) == shape(parse_policy(text))


# Refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only a comment\n",
        'pact "p" verson "1"\n',
        'pact "p" version "1"\nstate s initial\ntransition go: s -> { by r }\n',
        'pact "p" version "1"\naccount a "bad \\n escape"\n',
        'pact "p" version "1"\ninvariant i: a < b < c\n',
        'pact "p" version "1"\ninvariant i: ' + "not " * 3000 + "a\n",
    ],
)
def test_unparseable_policy_is_an_error(text: str) -> None:
    with pytest.raises(ParseFailure) as failure:
        format_policy(text)
    assert failure.value.diagnostics[0].code.startswith("PW1")


# Random well-formed policies -----------------------------------------------------


class _Gen:
    """Builds the tokens of a valid policy from one seeded random source.

    Expressions are typed as the checker types them, so every generated
    policy has a candidate; compound operands are always parenthesized (and
    atoms sometimes), which leaves fmt to find the minimal parentheses.
    """

    def __init__(self, rnd: random.Random, scale: int) -> None:
        self.rnd = rnd
        self.scale = scale
        self.transitions: list[str] = []
        self.states: list[str] = []
        self.stamps: list[str] = []

    def pick(self, *options: Any) -> Any:
        return self.rnd.choice(options)

    def money_literal(self, whole: int | None = None, point: bool = False) -> str:
        """Money in any valid spelling: `7`, `7.5`, `007.50` (never more decimals than the scale).

        In expressions (`point`) a literal keeps its decimal point: a bare `7`
        is an integer there, which is money only beside money (`+`, `<`...).
        """
        units = self.rnd.randint(0, 999) if whole is None else whole
        text = str(units).rjust(self.rnd.choice([1, 3]), "0")
        if self.scale == 0 or (not point and self.rnd.random() < 0.3):
            return text
        decimals = self.rnd.randint(1, self.scale)
        return f"{text}.{self.rnd.randrange(10**decimals):0{decimals}d}"

    def percent_literal(self) -> str:
        return self.pick("10%", "10.0%", "2.5%", "02.50%", "33.3333%", "0%")

    def duration_literal(self) -> str:
        return self.pick("14d", "36h", "1d12h", "90m", "3600s", "1d0h", "0s", "2m30s")

    def wrap(self, tokens: list[str], compound: bool) -> list[str]:
        if compound or self.rnd.random() < 0.15:
            return ["(", *tokens, ")"]
        return tokens

    def typed(self, kind: str, depth: int) -> list[str]:
        """An expression of `kind`; returns tokens, parenthesized when compound."""
        atoms: dict[str, Callable[[], list[str]]] = {
            "money": lambda: [
                self.pick(
                    "price", "balance(escrow)", "balance(payee)", *[self.money_literal(point=True)] * bool(self.scale)
                )
            ],
            "int": lambda: [
                self.pick(str(self.rnd.randint(0, 9)), f"fired({self.pick(*self.transitions)})"),
            ],
            "duration": lambda: [self.pick("wait", self.duration_literal())],
            "time": lambda: [self.pick("now", *self.stamps)],
        }
        if depth <= 0 or self.rnd.random() < 0.4:
            return self.wrap(atoms[kind](), compound=False)
        sub = depth - 1
        if kind == "money":
            choice = self.rnd.randrange(4)
            if choice == 0:
                body = [*self.typed("money", sub), self.pick("+", "-"), *self.typed("money", sub)]
            elif choice == 1:
                body = [*self.typed("money", sub), "*", self.pick("fee", self.percent_literal())]
            elif choice == 2:
                body = ["-", *self.typed("money", sub)]
            else:
                body = [*self.typed("money", sub), "*", f"fired({self.pick(*self.transitions)})"]
        elif kind == "int":
            body = [*self.typed("int", sub), self.pick("+", "-", "*"), *self.typed("int", sub)]
        elif kind == "duration":
            body = [*self.typed("duration", sub), self.pick("+", "-"), *self.typed("duration", sub)]
        else:
            body = [*self.typed("time", sub), self.pick("+", "-"), *self.typed("duration", sub)]
        return self.wrap(body, compound=True)

    def amount(self, depth: int) -> list[str]:
        """A declared effect amount: money over params and literals only."""
        if depth <= 0 or self.rnd.random() < 0.4:
            return self.wrap([self.pick("price", *[self.money_literal(point=True)] * bool(self.scale))], False)
        sub = depth - 1
        choice = self.rnd.randrange(3)
        if choice == 0:
            body = [*self.amount(sub), self.pick("+", "-"), *self.amount(sub)]
        elif choice == 1:
            body = [*self.amount(sub), "*", self.pick("fee", self.percent_literal())]
        else:
            body = ["-", *self.amount(sub)]
        return self.wrap(body, compound=True)

    def boolean(self, depth: int) -> list[str]:
        if depth <= 0 or self.rnd.random() < 0.3:
            choice = self.rnd.randrange(5)
            if choice == 0:
                return self.wrap([f"reached({self.pick(*self.states)})"], compound=False)
            if choice == 1:
                return self.wrap([self.pick("final", f"approved({self.pick(*self.transitions)})")], compound=False)
            if choice == 2:
                return self.wrap(["reason", self.pick("==", "!="), self.pick("damaged", "lost")], compound=True)
            kind = self.pick("money", "int", "duration", "time") if self.stamps else self.pick("money", "int")
            op = self.pick("==", "!=", "<", "<=", ">", ">=")
            return self.wrap([*self.typed(kind, 2), op, *self.typed(kind, 2)], compound=True)
        sub = depth - 1
        if self.rnd.random() < 0.2:
            return self.wrap(["not", *self.boolean(sub)], compound=True)
        op = self.pick("and", "or", "implies")
        return self.wrap([*self.boolean(sub), op, *self.boolean(sub)], compound=True)

    def split(self, source: str) -> list[str]:
        targets = [a for a in ("world", "escrow", "payee") if a != source]
        tokens = ["{"]
        if self.rnd.random() < 0.5:
            for _ in range(self.rnd.randint(0, 2)):
                tokens += [self.pick("10%", "25.0%", "fee", "33.3333%"), "to", self.pick(*targets)]
        else:
            for _ in range(self.rnd.randint(0, 2)):
                tokens += [self.pick(self.money_literal(), "price"), "to", self.pick(*targets)]
        return [*tokens, "remaining", "to", "payee", "}"]

    def policy(self) -> list[list[str]]:
        """Declarations as token lists; the header comes first."""
        rnd = self.rnd
        count = rnd.randint(2, 4)
        self.states = [f"s{i}" for i in range(count)]
        edges = [([f"s{i}"], f"s{i + 1}") for i in range(count - 1)]
        for _ in range(rnd.randint(0, 2)):
            sources = rnd.sample(self.states[:-1], rnd.randint(1, count - 1))
            edges.append((sources, rnd.choice(self.states)))
        self.transitions = [f"t{i}" for i in range(len(edges))]
        self.stamps = [f"at{i}" for i in range(len(edges)) if rnd.random() < 0.4]
        whole = rnd.randint(0, 99)
        low, high = self.money_literal(whole), self.money_literal(whole + rnd.randint(1, 99))
        decls: list[list[str]] = [
            ["currency", "EUR", "scale", str(self.scale)],
            ["role", "clerk"],
            ["role", "boss"],
            ["clock", "tick"],
            ["param", "price", ":", "money", "between", low, "and", high],
            ["param", "fee", ":", "percent", "=", self.percent_literal()],
            ["param", "wait", ":", "duration", "=", self.duration_literal()],
            ["param", "reason", ":", "one", "of", "damaged", ",", "lost"],
            ["account", "world", '"world"', "external"],
            ["account", "escrow", '"escrow:{agreement}"'],
            ["account", "payee", '"payee:{reason}"'],
            ["rule", "R1", "allow"],
        ]
        if rnd.random() < 0.5:
            decls.append(["default", "deny"])
        if rnd.random() < 0.5:
            decls.append(["budget", "{", "max_turns", "8", "max_active_time", "3600s", "ceiling", "500", "}"])
        decls.append(
            [
                "effect", "notify", "{", "risk", "R1", "reversibility", "reversible",
                "scopes", '"mail:send"', ",", '"mail:read"', "egress", "POST", '"https://mail.example.com"',
                "timeout", self.duration_literal(), "ceiling", self.money_literal(),
                "strategy", "idempotent", "key", "price", ",", "reason",
                "amount", *self.amount(rnd.randint(0, 2)),
                "consequence", '"mail \\"{reason}\\" \\\\ ok"', "}",
            ]
        )  # fmt: skip
        decls.append(["effect", "credit", "{", "risk", "R1", "reversibility", "irreversible", "}"])
        for index, state in enumerate(self.states):
            flags = ["initial"] if index == 0 else []
            flags += ["final"] if index == count - 1 else []
            decls.append(["state", state, *flags])
        for index, (sources, target) in enumerate(edges):
            name = self.transitions[index]
            tokens = ["clause", f'"{index}.x"'] if rnd.random() < 0.5 else []
            tokens += ["transition", name, ":", *" , ".join(sources).split(), "->", target, "{"]
            tokens += ["by", *" , ".join(rnd.sample(["clerk", "boss", "tick"], rnd.randint(1, 3))).split()]
            if rnd.random() < 0.6:
                tokens += ["when", *self.boolean(rnd.randint(0, 3))]
            if f"at{index}" in self.stamps:
                tokens += ["stamp", f"at{index}"]
            if rnd.random() < 0.6:
                source, target_account = rnd.sample(["world", "escrow", "payee"], 2)
                tokens += ["transfer", *self.typed("money", rnd.randint(0, 2)), "from", source]
                if source != "payee" and rnd.random() < 0.5:
                    tokens += self.split(source)
                else:
                    tokens += ["to", target_account]
            if rnd.random() < 0.3:
                tokens += ["call", "notify"]
            if rnd.random() < 0.3:
                tokens += ["call", "credit", "amount", *self.amount(rnd.randint(0, 2))]
            decls.append([*tokens, "}"])
        for index in range(rnd.randint(0, 3)):
            clause = ["clause", f'"9.{index}"'] if rnd.random() < 0.5 else []
            decls.append([*clause, "invariant", f"inv{index}", ":", *self.boolean(rnd.randint(0, 3))])
        rnd.shuffle(decls)
        return [["pact", '"random.policy"', "version", '"1.0.0"'], *decls]

    def layout(self, decls: list[list[str]]) -> str:
        """The tokens joined by random whitespace and comments."""
        out: list[str] = []
        serial = 0
        for tokens in decls:
            for token in tokens:
                out.append(token)
                choice = self.rnd.random()
                if choice < 0.06:
                    serial += 1
                    out.append(f"  # c{serial}\n")
                elif choice < 0.09:
                    serial += 1
                    out.append(f"\n# c{serial}\n")
                else:
                    out.append(self.pick(" ", " ", " ", "\n", "\n\n  ", "\t"))
        return "".join(out)


@st.composite
def random_policies(draw: st.DrawFn) -> str:
    rnd = draw(st.randoms(use_true_random=False))
    gen = _Gen(rnd, draw(st.sampled_from([0, 2, 3])))
    return gen.layout(gen.policy())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_policies())
def test_random_policies_round_trip(text: str) -> None:
    result = check_text(text)
    assert result.ok, [f"{d.code} {d.message}" for d in result.blockers]
    assert_guarantees(text)


# The command line ---------------------------------------------------------------------


def fmt(*args: str, stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PACTWRIGHT), "fmt", *args], input=stdin, capture_output=True, text=True, timeout=60, cwd=cwd, check=False
    )


@pytest.fixture
def messy(tmp_path: Path) -> Path:
    path = tmp_path / "messy.pact"
    path.write_text(MESSY_LITERALS, "utf-8")
    return path


def test_cli_check_reports_a_diff_and_changes_nothing(messy: Path) -> None:
    result = fmt("--check", str(messy))
    assert result.returncode == 1
    assert f"--- {messy}\n+++ {messy} (formatted)\n" in result.stdout
    assert "\n-param price: money between 1 and 12.5\n" in result.stdout
    assert "\n+param price: money between 1.00 and 12.50\n" in result.stdout
    assert messy.read_text("utf-8") == MESSY_LITERALS


def test_cli_rewrites_in_place_then_leaves_the_file_alone(messy: Path) -> None:
    messy.chmod(0o640)
    result = fmt(str(messy))
    assert (result.returncode, result.stdout) == (0, f"reformatted {messy}\n")
    assert messy.read_text("utf-8") == MESSY_LITERALS_FORMATTED
    assert messy.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in messy.parent.iterdir()) == ["messy.pact"]  # no temp file left
    before = messy.stat().st_mtime_ns
    again = fmt(str(messy))
    assert (again.returncode, again.stdout) == (0, "")
    assert messy.stat().st_mtime_ns == before
    assert fmt("--check", str(messy)).returncode == 0


def test_cli_reads_stdin_and_writes_stdout() -> None:
    result = fmt("-", stdin=MESSY_LITERALS)
    assert (result.returncode, result.stdout) == (0, MESSY_LITERALS_FORMATTED)
    assert fmt("--check", "-", stdin=MESSY_LITERALS_FORMATTED).returncode == 0


def test_cli_unparseable_file_is_reported_and_untouched(tmp_path: Path, messy: Path) -> None:
    bad = tmp_path / "bad.pact"
    bad.write_text('pact "p" verson "1"\n', "utf-8")
    result = fmt(str(bad), str(messy))
    assert result.returncode == 1
    assert f"{bad}:1:10: error[PW108]: unknown keyword `verson`" in result.stderr
    assert "help: did you mean `version`?" in result.stderr
    assert bad.read_text("utf-8") == 'pact "p" verson "1"\n'
    assert messy.read_text("utf-8") == MESSY_LITERALS_FORMATTED  # the other file is still formatted


def test_cli_unreadable_file_exits_2(tmp_path: Path, messy: Path) -> None:
    result = fmt("--check", str(tmp_path / "missing.pact"), str(messy))
    assert result.returncode == 2
    assert "error[PW001]: cannot read" in result.stderr
    binary = tmp_path / "binary.pact"
    binary.write_bytes(b'pact "p" version "1"\n\xff\n')
    assert fmt(str(binary)).returncode == 1  # not UTF-8: a diagnostic, like `check`
