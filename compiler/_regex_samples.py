"""Texts a regular expression matches, shortest first, in a fixed order.

The model gives each `text matching PATTERN` param stand-in values, and a
stand-in the pattern does not admit is an agreement the runtime would refuse
to create: exploring it reports what cannot happen. So stand-ins are drawn
from the pattern itself. `texts(pattern, limit)` walks the tree of Python's
own regex parser (`re._parser`) for the constructs policies use (literals,
character classes and ranges, `.`, repeats, alternation, groups, the `^` and
`$` anchors) and yields the texts of each length in turn, each position
taking its characters in the order the pattern writes them, so
`ORD-[0-9]{1,12}` gives `ORD-0`, `ORD-1`, ... Anything else (lookaround,
backreferences, word boundaries) is `Unsupported`.

The walk is a heuristic and `re.fullmatch` is the judge: every text yielded
has been checked against the whole pattern. Work is capped (texts of at most
`MAX_LENGTH` characters, at most `MAX_STEPS` candidates tried), so a pattern
whose texts are all longer, or rarer, than that yields nothing.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from dataclasses import dataclass
from re import _constants as c
from re import _parser as sre
from typing import Any

__all__ = ["MAX_LENGTH", "MAX_STEPS", "Unsupported", "texts"]

MAX_LENGTH = 64
MAX_STEPS = 4096
MAX_CLASS = 64  # characters one position tries; enough to avoid the few compared literals

# The characters a negated class, `.` or `\S` tries, most readable first.
_ALPHABET = string.ascii_lowercase + string.ascii_uppercase + string.digits + "-_. " + string.punctuation
_CATEGORIES: dict[Any, str] = {
    c.CATEGORY_DIGIT: string.digits,
    c.CATEGORY_WORD: string.ascii_lowercase + string.ascii_uppercase + string.digits + "_",
    c.CATEGORY_SPACE: " \t\n\r\f\v",
}
_NEGATED = {
    c.CATEGORY_NOT_DIGIT: c.CATEGORY_DIGIT,
    c.CATEGORY_NOT_WORD: c.CATEGORY_WORD,
    c.CATEGORY_NOT_SPACE: c.CATEGORY_SPACE,
}
_EMPTY_AT = {c.AT_BEGINNING, c.AT_BEGINNING_STRING, c.AT_END, c.AT_END_STRING}
_REPEATS = {c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", c.MAX_REPEAT)}
_FULL = (1 << (MAX_LENGTH + 1)) - 1  # bit n set: some text of length n


class Unsupported(Exception):
    """The pattern uses a construct the generator does not enumerate."""


@dataclass(frozen=True)
class _Node:
    """One parsed construct and the lengths (a bit set, up to MAX_LENGTH) of its texts."""

    kind: str  # "chars" | "seq" | "alt" | "rep"
    lengths: int
    chars: str = ""
    parts: tuple[_Node, ...] = ()
    low: int = 0
    high: int = 0


def _chars(text: str) -> _Node:
    return _Node("chars", 0b10 if text else 0, chars=text)


def _seq(parts: tuple[_Node, ...]) -> _Node:
    lengths = 1
    for part in parts:
        lengths = _sum(lengths, part.lengths)
    return _Node("seq", lengths, parts=parts)


def _sum(one: int, two: int) -> int:
    """Lengths of a text of `one` followed by a text of `two`."""
    out, shift = 0, 0
    while one >> shift:
        if (one >> shift) & 1:
            out |= two << shift
        shift += 1
    return out & _FULL


def _rep(low: int, high: int, item: _Node) -> _Node:
    """`item{low,high}`, enumerated as copies of non-empty texts (see `_gen_rep`)."""
    nonempty = item.lengths & ~1
    lengths, power, count = 0, 1, 0
    if item.lengths & 1:  # any number of non-empty copies up to `high`; empty ones pad to `low`
        while count <= high:
            lengths |= power
            grown = _sum(power, nonempty)
            if grown | lengths == lengths:
                break
            power, count = grown, count + 1
    else:
        while count <= high and power:
            if count >= low:
                lengths |= power
            power, count = _sum(power, nonempty), count + 1
    return _Node("rep", lengths, parts=(item,), low=low, high=high)


def _class(items: list[tuple[Any, Any]]) -> _Node:
    negate = bool(items) and items[0][0] is c.NEGATE
    if negate:
        items = items[1:]
    listed: list[str] = []
    for op, av in items:
        if op is c.LITERAL:
            listed.append(chr(av))
        elif op is c.RANGE:
            # The readable characters of a wide range first (`[!-~]` tries `a` before `!`).
            listed.extend(ch for ch in _ALPHABET if av[0] <= ord(ch) <= av[1])
            listed.extend(chr(code) for code in range(av[0], min(av[1], av[0] + MAX_CLASS) + 1))
        elif op is c.CATEGORY and av in _CATEGORIES:
            listed.extend(_CATEGORIES[av])
        elif op is c.CATEGORY and av in _NEGATED:
            listed.extend(ch for ch in _ALPHABET if ch not in _CATEGORIES[_NEGATED[av]])
        else:
            raise Unsupported(f"class item {op}")
    if negate:
        # Membership of a negated class is re's to decide: try the readable alphabet.
        excluded = set(listed)
        return _chars("".join(ch for ch in _ALPHABET if ch not in excluded)[:MAX_CLASS])
    return _chars("".join(dict.fromkeys(listed))[:MAX_CLASS])


def _build(pattern: Any) -> _Node:
    parts: list[_Node] = []
    for op, av in pattern:
        if op is c.LITERAL:
            parts.append(_chars(chr(av)))
        elif op is c.NOT_LITERAL:
            parts.append(_chars("".join(ch for ch in _ALPHABET if ord(ch) != av)))
        elif op is c.ANY:
            parts.append(_chars(_ALPHABET))
        elif op is c.IN:
            parts.append(_class(av))
        elif op is c.BRANCH:
            alternatives = tuple(_build(alt) for alt in av[1])
            lengths = 0
            for alt in alternatives:
                lengths |= alt.lengths
            parts.append(_Node("alt", lengths, parts=alternatives))
        elif op is c.SUBPATTERN:
            parts.append(_build(av[3]))
        elif op is getattr(c, "ATOMIC_GROUP", None):
            parts.append(_build(av))
        elif op in _REPEATS:
            parts.append(_rep(av[0], av[1], _build(av[2])))
        elif op is c.AT and av in _EMPTY_AT:
            continue  # the whole text is matched anyway
        else:
            raise Unsupported(f"construct {op}")
    return parts[0] if len(parts) == 1 else _seq(tuple(parts))


def _has(lengths: int, n: int) -> bool:
    return n >= 0 and bool((lengths >> n) & 1)


def _gen(node: _Node, n: int) -> Iterator[str]:
    """Texts of `node` of exactly `n` characters; `n` must be one of its lengths."""
    if node.kind == "chars":
        yield from node.chars
    elif node.kind == "alt":
        for alt in node.parts:
            if _has(alt.lengths, n):
                yield from _gen(alt, n)
    elif node.kind == "seq":
        yield from _gen_seq(node.parts, n)
    else:
        yield from _gen_rep(node, n)


def _gen_seq(parts: tuple[_Node, ...], n: int) -> Iterator[str]:
    if not parts:
        if n == 0:
            yield ""
        return
    rest = _seq(parts[1:]).lengths
    for size in range(n + 1):
        if _has(parts[0].lengths, size) and _has(rest, n - size):
            for head in _gen(parts[0], size):
                for tail in _gen_seq(parts[1:], n - size):
                    yield head + tail


def _gen_rep(node: _Node, n: int) -> Iterator[str]:
    """Copies of non-empty texts: any text of a repeat is one (empty copies pad to `low`)."""
    item = node.parts[0]
    nonempty = _Node(item.kind, item.lengths & ~1, item.chars, item.parts, item.low, item.high)
    pads = bool(item.lengths & 1)
    first = 0 if pads else node.low
    for count in range(first, min(node.high, n) + 1):
        copies = _seq((nonempty,) * count)
        if _has(copies.lengths, n):
            yield from _gen_seq(copies.parts, n)


def texts(pattern: str, limit: int) -> Iterator[str]:
    """Up to `limit` distinct texts `pattern` fully matches, shortest first.

    Raises `Unsupported` for a construct the walk does not know, so the
    caller can fall back to other candidates; yields nothing when no text of
    at most MAX_LENGTH characters is found within MAX_STEPS tries.
    """
    try:
        compiled = re.compile(pattern)
        root = _build(sre.parse(pattern))
    except (re.error, RecursionError, OverflowError, ValueError) as exc:
        raise Unsupported(str(exc)) from exc
    seen: set[str] = set()
    steps = 0
    try:
        for n in range(MAX_LENGTH + 1):
            if not _has(root.lengths, n):
                continue
            for text in _gen(root, n):
                steps += 1
                if steps > MAX_STEPS or len(seen) >= limit:
                    return
                if text not in seen and compiled.fullmatch(text):
                    seen.add(text)
                    yield text
    except RecursionError as exc:
        raise Unsupported("nested too deeply") from exc
