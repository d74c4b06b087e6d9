"""Which grammar words are reserved, read from the parse table (new in 1.1).

A grammar word is a keyword only where the parser accepts it. Where the parser
accepts the word but not a name, the contextual lexer already reads it as the
keyword; where it accepts a name but not the word, as a name. That leaves the
parser states that accept both. There one token of lookahead decides when the
tokens that may follow the keyword and those that may follow a name can never
be the same text: `total(` is the function, `total >` the param `total`. Only
the words for which even that cannot decide are reserved (PW109), and only for
the kinds of names that could stand in that spot. Nothing here lists words:
a keyword added to the grammar later is classified the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from lark import Lark, Token
from lark.lexer import PatternStr
from lark.parsers.lalr_analysis import Shift

# Constructs named after the rule a keyword starts, for messages and for which
# kinds of names the clash concerns; a rule not listed here concerns every kind.
EXPRESSION = "an expression"
_CONSTRUCTS = {"portion": "a split portion"}


@dataclass(frozen=True)
class Reservation:
    """A word a name cannot be spelled as, and the construct where it clashes."""

    word: str
    constructs: frozenset[str]


@dataclass(frozen=True)
class _Terminal:
    literal: str | None
    regex: re.Pattern[str] | None


def _terminals(lark: Lark) -> dict[str, _Terminal]:
    out: dict[str, _Terminal] = {"$END": _Terminal(literal=None, regex=None)}
    for terminal in lark.terminals:
        pattern = terminal.pattern
        if isinstance(pattern, PatternStr):
            out[terminal.name] = _Terminal(literal=pattern.value, regex=None)
        else:
            out[terminal.name] = _Terminal(literal=None, regex=re.compile(pattern.to_regexp()))
    return out


def _may_overlap(first: _Terminal, second: _Terminal) -> bool:
    """Whether some text could start both tokens (conservative for two patterns)."""
    if (first.literal is None and first.regex is None) or (second.literal is None and second.regex is None):
        return first == second  # both end of input
    if first.literal is not None and second.literal is not None:
        return first.literal.startswith(second.literal) or second.literal.startswith(first.literal)
    if first.literal is not None and second.regex is not None:
        return second.regex.match(first.literal) is not None
    if second.literal is not None and first.regex is not None:
        return first.regex.match(second.literal) is not None
    return True


def _word(value: str) -> bool:
    return value.isidentifier() and value.islower()


@dataclass
class Analysis:
    """The parse table read once: how to resolve each clash, and what stays reserved."""

    # (state, keyword terminal) -> the terminals that may follow the keyword there.
    resolve: dict[tuple[int, str], tuple[_Terminal, ...]]
    reserved: dict[str, Reservation]
    ignore: tuple[re.Pattern[str], ...]
    # The keyword terminals some state resolves by lookahead.
    keywords: frozenset[str]


def _construct(lark: Lark, gotos: set[str], terminal: str) -> frozenset[str]:
    """What a keyword terminal starts in a state with `gotos`: `an expression`, `a split portion`, a rule."""
    rules = list(lark.rules)
    starts: dict[str, set[str]] = {}
    for rule in rules:
        if rule.expansion:
            starts.setdefault(rule.expansion[0].name, set()).add(rule.origin.name)
    expression = {"expr"}
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule.origin.name in expression:
                for symbol in rule.expansion:
                    if not symbol.is_term and symbol.name not in expression:
                        expression.add(symbol.name)
                        changed = True
    found: set[str] = set()
    frontier, seen = set(starts.get(terminal, ())), set()
    while frontier:
        origin = frontier.pop()
        seen.add(origin)
        if origin in expression and origin in gotos:
            found.add(EXPRESSION)
            continue
        # A choice of keywords (`!remaining: "remaining"`) stands for what it starts.
        own = [rule for rule in rules if rule.origin.name == origin]
        if own and all(len(rule.expansion) == 1 and rule.expansion[0].is_term for rule in own):
            parents = starts.get(origin, set()) - seen
            if parents:
                frontier |= parents
                continue
        if origin in gotos:
            found.add(_CONSTRUCTS.get(origin, f"`{origin}`"))
    return frozenset(found)


def analyse(lark: Lark) -> Analysis:
    terminals = _terminals(lark)
    table = lark.parser.parser.parser.parse_table
    words = {name for name, t in terminals.items() if t.literal is not None and _word(t.literal)}
    resolve: dict[tuple[int, str], tuple[_Terminal, ...]] = {}
    reserved: dict[str, set[str]] = {}
    for state, actions in table.states.items():
        if "NAME" not in actions:
            continue
        for keyword in words & actions.keys():
            if actions[keyword] == actions["NAME"] and actions[keyword][0] is not Shift:
                continue  # the same reduction either way: decided in the state it leads to
            follows = _follows(table, state, keyword), _follows(table, state, "NAME")
            if follows[0] is not None and follows[1] is not None:
                after_keyword = tuple(terminals[t] for t in sorted(follows[0]) if t in terminals)
                after_name = [terminals[t] for t in follows[1] if t in terminals]
                if not any(_may_overlap(a, b) for a in after_keyword for b in after_name):
                    resolve[(state, keyword)] = after_keyword
                    continue
            literal = terminals[keyword].literal
            assert literal is not None
            gotos = {symbol for symbol in actions if symbol not in terminals}
            reserved.setdefault(literal, set()).update(_construct(lark, gotos, keyword) or {f"`{literal}`"})
    ignore = tuple(re.compile(t.pattern.to_regexp()) for t in lark.terminals if t.name in lark.lexer_conf.ignore)
    return Analysis(
        resolve=resolve,
        reserved={w: Reservation(word=w, constructs=frozenset(c)) for w, c in sorted(reserved.items())},
        ignore=ignore,
        keywords=frozenset(keyword for _, keyword in resolve),
    )


def _follows(table: Any, state: int, terminal: str) -> set[str] | None:
    """The terminals the parser accepts after shifting `terminal` in `state`, or None (a reduce)."""
    action, target = table.states[state][terminal]
    if action is not Shift:
        return None
    return set(table.states[target])


def _deciding_state(parser_state: Any, keyword: str) -> int | None:
    """The state that shifts `keyword` after the reductions it and a name share, or None."""
    table = parser_state.parse_conf.parse_table
    stack = list(parser_state.state_stack)
    for _ in range(10_000):
        actions = table.states[stack[-1]]
        action, name = actions.get(keyword), actions.get("NAME")
        if action is None or name is None:
            return None
        if action[0] is Shift:
            return stack[-1] if name[0] is Shift else None
        if action != name:
            return None
        rule = action[1]
        if rule.expansion:
            del stack[-len(rule.expansion) :]
        stack.append(table.states[stack[-1]][rule.origin.name][1])
    return None


class NameOrKeyword:
    """Wraps the contextual lexer: a keyword the next token shows to be a name becomes NAME."""

    def __init__(self, inner: Any, analysis: Analysis) -> None:
        self.inner = inner
        self.analysis = analysis

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[Token]:
        resolve = self.analysis.resolve
        for lexed in self.inner.lex(lexer_state, parser_state):
            token = lexed
            after = None
            if token.type in self.analysis.keywords:
                state = _deciding_state(parser_state, token.type)
                after = None if state is None else resolve.get((state, token.type))
            if after is not None and not self._followed_by(lexer_state.text, token.end_pos, after):
                token = Token.new_borrow_pos("NAME", str(token), token)
            yield token

    def _followed_by(self, source: Any, pos: int | None, after: tuple[_Terminal, ...]) -> bool:
        text: str = getattr(source, "text", source)
        end: int = getattr(source, "end", len(text))
        pos = pos or 0
        moved = True
        while moved:
            moved = False
            for pattern in self.analysis.ignore:
                match = pattern.match(text, pos, end)
                if match is not None and match.end() > pos:
                    pos, moved = match.end(), True
        for terminal in after:
            if terminal.literal is not None:
                if text.startswith(terminal.literal, pos, end) and not (
                    _word(terminal.literal)
                    and pos + len(terminal.literal) < end
                    and (text[pos + len(terminal.literal)].isalnum() or text[pos + len(terminal.literal)] == "_")
                ):
                    return True
            elif terminal.regex is not None:
                if terminal.regex.match(text, pos, end) is not None:
                    return True
            elif pos >= end:
                return True
        return False


_ANALYSES: dict[int, Analysis] = {}


def analysis(lark: Lark) -> Analysis:
    """`analyse(lark)`, once per parser."""
    found = _ANALYSES.get(id(lark))
    if found is None:
        found = _ANALYSES[id(lark)] = analyse(lark)
    return found


def install(lark: Lark) -> None:
    """Make `lark`'s lexer read a keyword as a name where the next token shows it is one."""
    frontend = lark.parser
    if not isinstance(frontend.lexer, NameOrKeyword):
        frontend.lexer = NameOrKeyword(frontend.lexer, analysis(lark))
