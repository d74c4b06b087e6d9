"""Money movements: amounts, splits and the accounts they touch."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.compiler.literals import LiteralProblem, classify, money_value, percent_value
from pactwright.diagnostics import Diagnostic, Span
from pactwright.money import Percent


@check("PW135")
def self_transfers(ctx: CheckContext) -> Iterator[Diagnostic]:
    for decl, _, transfer in ctx.transfers():
        leaves = ast.leaf_portions(transfer.portions)
        targets = [transfer.destination] if transfer.destination else [p.target for p in leaves]
        for target in targets:
            if target is not None and target.name == transfer.source.name:
                yield ctx.error(
                    "PW135",
                    f"transition `{decl.name.name}` transfers from account `{target.name}` to itself",
                    target.span,
                    "a transfer needs two different accounts",
                )


def _portion_kind(ctx: CheckContext, portion: ast.Portion) -> str | None:
    share = portion.share
    if share is None:
        return "remaining"
    if isinstance(share, ast.Ident):
        param = ctx.sym.params.get(share.name)
        return param.type if param is not None else None
    found = classify(share.text, ctx.sym.scale)
    if isinstance(found, LiteralProblem):
        return None
    return "money" if found.kind == "int" else found.kind


MAX_SPLIT_DEPTH = 1  # nested splits inside a split (new in 1.1); a nested split may not nest again


def _split_blocks(
    portions: tuple[ast.Portion, ...], span: Span, depth: int = 0
) -> Iterator[tuple[tuple[ast.Portion, ...], Span, int]]:
    """Each block of a split, the transfer's own first, then nested ones in written order."""
    yield portions, span, depth
    for portion in portions:
        if portion.block is not None:
            yield from _split_blocks(portion.block, portion.span, depth + 1)


@check("PW177", "PW178")
def nested_splits(ctx: CheckContext) -> Iterator[Diagnostic]:
    """A nested split (new in 1.1) is one level deep and names at least one portion."""
    for decl, _, transfer in ctx.transfers():
        for block, span, depth in _split_blocks(transfer.portions, transfer.span):
            if depth > MAX_SPLIT_DEPTH:
                yield ctx.error(
                    "PW177",
                    f"split in transition `{decl.name.name}` nests {depth} levels deep; "
                    f"at most {MAX_SPLIT_DEPTH} is supported",
                    span,
                    "send a portion to a split of accounts only, or split the amount in two transfers",
                )
            elif depth > 0 and not block:
                yield ctx.error(
                    "PW178",
                    f"nested split in transition `{decl.name.name}` has no portions",
                    span,
                    "name the accounts inside `{ ... }`, ending with `remaining to ACCOUNT`, "
                    "or send the portion to an account",
                )


@check("PW129", "PW130", "PW136", "PW104", "PW105", "PW106", "PW137")
def splits(ctx: CheckContext) -> Iterator[Diagnostic]:
    for decl, _, transfer in ctx.transfers():
        for block, span, depth in _split_blocks(transfer.portions, transfer.span):
            if block and depth <= MAX_SPLIT_DEPTH:
                yield from _split_block(ctx, decl, block, span, "nested split" if depth else "split")


def _split_block(
    ctx: CheckContext, decl: ast.TransitionDecl, portions: tuple[ast.Portion, ...], span: Span, what: str
) -> Iterator[Diagnostic]:
    """PW129/PW130/PW136/PW137 and literal checks for one block of a split (each nested block on its own)."""
    remaining = [i for i, p in enumerate(portions) if p.share is None]
    if not remaining:
        yield ctx.error(
            "PW129",
            f"{what} in transition `{decl.name.name}` has no `remaining` portion",
            span,
            "end the split with `remaining to ACCOUNT` so nothing is lost to rounding",
        )
    elif remaining != [len(portions) - 1]:
        bad = portions[remaining[0]]
        yield ctx.error(
            "PW129",
            f"`remaining` must be the last portion, and appear once, in transition `{decl.name.name}`",
            bad.span,
            "move `remaining to ...` to the end of the split",
        )
    kinds: dict[str, ast.Portion] = {}
    total = Fraction(0)
    for portion in portions:
        if isinstance(portion.share, ast.NumberLit):
            found = classify(portion.share.text, ctx.sym.scale)
            if isinstance(found, LiteralProblem):
                yield ctx.error(found.code, found.message, portion.share.span, found.hint)
                continue
            if found.kind == "percent":
                total += Percent.parse(portion.share.text).value
            elif found.kind == "int":
                amount = money_value(portion.share.text, ctx.sym.scale)
                if isinstance(amount, LiteralProblem):
                    yield ctx.error(amount.code, amount.message, portion.share.span, amount.hint)
            elif found.kind == "duration":
                yield ctx.error(
                    "PW137",
                    f"a split portion cannot be a duration `{portion.share.text}`",
                    portion.share.span,
                    "use a percent or an amount",
                )
        elif isinstance(portion.share, ast.Ident):
            param = ctx.sym.params.get(portion.share.name)
            if param is not None and param.type not in ("percent", "money"):
                yield ctx.error(
                    "PW137",
                    f"split portion `{param.name.name}` is of type {param.type}",
                    portion.share.span,
                    "use a percent or money param",
                )
            if param is not None and param.type == "percent" and param.value is not None:
                total += percent_value(param.value.text) or 0
            elif (
                param is not None
                and param.type == "percent"
                and param.high is not None
                and param.high.text.endswith("%")
            ):
                total += percent_value(param.high.text) or 0
        kind = _portion_kind(ctx, portion)
        if kind in ("percent", "money"):
            kinds.setdefault(kind, portion)
    if len(kinds) > 1:
        yield ctx.error(
            "PW136",
            f"{what} in transition `{decl.name.name}` mixes percents and fixed amounts",
            kinds["money"].span,
            "use only percents, or only fixed amounts, before `remaining`",
        )
    if total > 1:
        yield ctx.error(
            "PW130",
            f"{what} portions in transition `{decl.name.name}` add up to {Percent(total)} (over 100%)",
            span,
            "portions must leave something, or exactly nothing, for `remaining`",
        )
