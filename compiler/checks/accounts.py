"""Accounts: addresses must be ledger account names once placeholders are filled.

Two declared accounts must also stay two ledger accounts: the verifier and
the transition table treat them apart, so an address declared twice is a
duplicate (PW121), and two addresses that some filling of their placeholders
makes equal are a warning (PW154).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.diagnostics import Diagnostic

# Numscript account names: segments of [a-zA-Z0-9_-] separated by `:`.
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_PLACEHOLDER = re.compile(r"\{[a-z][a-z0-9_]*\}")
# Pairs compared for PW154 at most (a placeholder address against every
# other); past this a hostile file with thousands of accounts stays linear.
_ALIAS_PAIRS = 40_000


def _valid(address: str) -> bool:
    # A placeholder stands for one or more valid characters; check the rest.
    return all(_SEGMENT.fullmatch(segment) for segment in _PLACEHOLDER.sub("x", address).split(":"))


@check("PW141")
def account_addresses(ctx: CheckContext) -> Iterator[Diagnostic]:
    for account in ctx.sym.accounts.values():
        address = account.address.value
        if not _valid(address):
            yield ctx.error(
                "PW141",
                f"account `{account.name.name}` has address `{address}`, which is not a ledger account name",
                account.address.span,
                "use segments of letters, digits, `_` and `-` separated by `:`, e.g. `escrow:{agreement}`",
            )
        elif address == "world" and not account.external:
            yield ctx.error(
                "PW141",
                f"account `{account.name.name}` is the ledger's `world` account but is not declared `external`",
                account.address.span,
                "`world` is unbounded: declare it `external`",
            )


@check("PW121")
def duplicate_addresses(ctx: CheckContext) -> Iterator[Diagnostic]:
    first: dict[str, ast.AccountDecl] = {}
    for account in ctx.sym.accounts.values():
        address = account.address.value
        earlier = first.setdefault(address, account)
        if earlier is not account:
            yield ctx.error(
                "PW121",
                f"account `{account.name.name}` has the address `{address}` of account `{earlier.name.name}` "
                f"(line {earlier.span.line})",
                account.address.span,
                "two names for one ledger account make a transfer between them move nothing; keep one",
            )


def _pattern(segment: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[a-z][a-z0-9_]*\})", segment)
    return re.compile("".join("[A-Za-z0-9_-]+" if _PLACEHOLDER.fullmatch(p) else re.escape(p) for p in parts))


def _segments_may_equal(one: str, two: str) -> bool:
    wild_one, wild_two = bool(_PLACEHOLDER.search(one)), bool(_PLACEHOLDER.search(two))
    if not wild_one and not wild_two:
        return one == two
    if not wild_two:
        return _pattern(one).fullmatch(two) is not None
    if not wild_one:
        return _pattern(two).fullmatch(one) is not None
    # Both hold a placeholder (one or more free characters each): some filling
    # makes them equal exactly when their literal heads agree and their literal
    # tails agree, since either side's placeholders can absorb the other's middle.
    head_one, head_two = one[: one.index("{")], two[: two.index("{")]
    tail_one, tail_two = one[one.rindex("}") + 1 :], two[two.rindex("}") + 1 :]
    heads = head_one.startswith(head_two) or head_two.startswith(head_one)
    tails = tail_one.endswith(tail_two) or tail_two.endswith(tail_one)
    return heads and tails


def may_alias(one: str, two: str) -> bool:
    """Whether some filling of the placeholders makes two (valid) addresses equal."""
    # A placeholder never holds `:`, so segments line up one to one.
    parts_one, parts_two = one.split(":"), two.split(":")
    return len(parts_one) == len(parts_two) and all(map(_segments_may_equal, parts_one, parts_two))


@check("PW154")
def aliasing_addresses(ctx: CheckContext) -> Iterator[Diagnostic]:
    accounts = [a for a in ctx.sym.accounts.values() if _valid(a.address.value)]
    wild = [a for a in accounts if _PLACEHOLDER.search(a.address.value)]
    if len(wild) * len(accounts) > _ALIAS_PAIRS:
        return
    order = {id(a): index for index, a in enumerate(accounts)}
    reported: set[tuple[int, int]] = set()
    for one in wild:
        for two in accounts:
            pair = (min(order[id(one)], order[id(two)]), max(order[id(one)], order[id(two)]))
            if one is two or pair in reported or one.address.value == two.address.value:
                continue
            reported.add(pair)
            if may_alias(one.address.value, two.address.value):
                earlier, later = (one, two) if order[id(one)] < order[id(two)] else (two, one)
                yield ctx.warning(
                    "PW154",
                    f"accounts `{earlier.name.name}` and `{later.name.name}` are one ledger account "
                    f"when their placeholders are filled alike (`{earlier.address.value}`, `{later.address.value}`)",
                    later.address.span,
                    "give each account a literal segment the other cannot take, e.g. `sellers:{seller}`",
                )
