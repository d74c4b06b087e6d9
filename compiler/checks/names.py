"""Names: duplicates, reserved words, and references to undeclared things."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterator

from pactwright.compiler import ast
from pactwright.compiler._reserved import EXPRESSION
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.compiler.expressions import SUGGEST_LIMIT
from pactwright.compiler.parser import reservations
from pactwright.diagnostics import Diagnostic


def _hint(name: str, known: Collection[str], kind: str) -> str:
    if len(known) > SUGGEST_LIMIT:
        return f"none of the {len(known)} declared {kind}s is called `{name}`; check the spelling"
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    if close:
        return f"did you mean `{close[0]}`?"
    if known:
        return f"declared {kind}s: {', '.join(known[:6])}"
    return f"declare it with `{kind} {name} ...`"


@check("PW121")
def duplicate_declarations(ctx: CheckContext) -> Iterator[Diagnostic]:
    for dup in ctx.sym.duplicates:
        yield ctx.error(
            "PW121",
            f"{dup.kind} `{dup.name}` is declared twice (first at line {dup.first.line})",
            dup.again,
            "rename one of them or remove the copy",
        )
    for kind, decls in (("currency", ctx.sym.currencies), ("default", ctx.sym.defaults), ("budget", ctx.sym.budgets)):
        for again in decls[1:]:
            yield ctx.error("PW121", f"`{kind}` is declared twice", again.span, f"keep one `{kind}` declaration")
    for decl in ctx.sym.transitions.values():
        seen: dict[str, ast.TransitionField] = {}
        for tfield in decl.fields:
            if tfield.kind in ("by", "when", "approval") and tfield.kind in seen:
                yield ctx.error(
                    "PW121",
                    f"transition `{decl.name.name}` has `{tfield.kind}` twice",
                    tfield.span,
                    "combine guards with `and`, roles with `,`",
                )
            seen.setdefault(tfield.kind, tfield)
    for effect in ctx.sym.effects.values():
        seen_keys: set[str] = set()
        for efield in effect.fields:
            key = "strategy" if efield.key == "compensate" else efield.key
            if key in seen_keys and key != "egress":
                yield ctx.error("PW121", f"effect `{effect.name.name}` has `{key}` twice", efield.span, "keep one")
            seen_keys.add(key)


def _names_in(decl: ast.Decl) -> Iterator[tuple[str, ast.Ident]]:
    """Every name a declaration gives, with the kind of thing it names."""
    kinds: tuple[tuple[type[ast.Node], str], ...] = (
        (ast.RoleDecl, "role"),
        (ast.ParamDecl, "param"),
        (ast.AccountDecl, "account"),
        (ast.EffectDecl, "effect"),
        (ast.StateDecl, "state"),
        (ast.TransitionDecl, "transition"),
        (ast.InvariantDecl, "invariant"),
    )
    for node_type, kind in kinds:
        if isinstance(decl, node_type):
            yield kind, decl.name  # type: ignore[union-attr]
    if isinstance(decl, ast.ParamDecl):
        yield from (("`one of` value", option) for option in decl.options)
    if isinstance(decl, ast.TransitionDecl):
        for tfield in decl.fields:
            if isinstance(tfield, ast.StampField):
                yield "stamp", tfield.name


# New in 1.1: a word is reserved only for the names that could be written where
# the parser cannot tell it from a name (parser.reservations). Bare names in an
# expression are params, stamps and `one of` values; a split portion's share is
# a param. A clash in any other construct concerns every kind of name.
_WRITTEN_IN = {
    EXPRESSION: frozenset({"param", "stamp", "`one of` value"}),
    "a split portion": frozenset({"param"}),
}


@check("PW109")
def reserved_words(ctx: CheckContext) -> Iterator[Diagnostic]:
    reserved = reservations()
    for decl in ctx.sym.policy.decls:
        for kind, ident in _names_in(decl):
            found = reserved.get(ident.name)
            if found is None:
                continue
            clash = sorted(c for c in found.constructs if c not in _WRITTEN_IN or kind in _WRITTEN_IN[c])
            if clash:
                yield ctx.error(
                    "PW109",
                    f"`{ident.name}` cannot name a {kind}: in {' or '.join(clash)} `{ident.name}` is read as "
                    f"the keyword, so the {kind} could not be referred to",
                    ident.span,
                    f"choose another name, e.g. `{ident.name}_1`",
                )


# The store's party registry gives this role authority over every agreement (resolving parked
# effects, reading any agreement through the service: runtime/parties.py). A pact role of the same
# name would make whoever is registered to act in it an operator of the whole store.
STORE_ROLES = ("operator",)


@check("PW188")
def store_role_names(ctx: CheckContext) -> Iterator[Diagnostic]:
    for decl in ctx.sym.policy.decls:
        if isinstance(decl, ast.RoleDecl) and decl.name.name in STORE_ROLES:
            yield ctx.error(
                "PW188",
                f"role `{decl.name.name}` is the store's own role (it resolves parked effects and reads every "
                "agreement): a pact role of that name would give its parties that authority",
                decl.name.span,
                f"name the pact's role for what it does here, e.g. `{decl.name.name}_desk` or `arbiter`",
            )


@check("PW120")
def unknown_references(ctx: CheckContext) -> Iterator[Diagnostic]:
    sym = ctx.sym
    for decl in sym.transitions.values():
        for ident in (*decl.sources, decl.target):
            if ident.name not in sym.states:
                yield ctx.error(
                    "PW120", f"unknown state `{ident.name}`", ident.span, _hint(ident.name, sym.states, "state")
                )
        for tfield in decl.fields:
            if isinstance(tfield, ast.ByField):
                for role in tfield.roles:
                    if role.name not in sym.roles:
                        yield ctx.error(
                            "PW120", f"unknown role `{role.name}`", role.span, _hint(role.name, sym.roles, "role")
                        )
            elif isinstance(tfield, ast.ApprovalField):
                if tfield.role.name not in sym.roles:
                    yield ctx.error(
                        "PW120",
                        f"unknown role `{tfield.role.name}`",
                        tfield.role.span,
                        _hint(tfield.role.name, sym.roles, "role"),
                    )
            elif isinstance(tfield, ast.CallField):
                if tfield.effect.name not in sym.effects:
                    yield ctx.error(
                        "PW120",
                        f"unknown effect `{tfield.effect.name}`",
                        tfield.effect.span,
                        _hint(tfield.effect.name, sym.effects, "effect"),
                    )
            elif isinstance(tfield, ast.TransferField):
                accounts = [tfield.source]
                accounts += [tfield.destination] if tfield.destination else []
                accounts += [p.target for p in ast.leaf_portions(tfield.portions) if p.target is not None]
                for account in accounts:
                    if account.name not in sym.accounts:
                        yield ctx.error(
                            "PW120",
                            f"unknown account `{account.name}`",
                            account.span,
                            _hint(account.name, sym.accounts, "account"),
                        )
                for portion in ast.all_portions(tfield.portions):
                    if isinstance(portion.share, ast.Ident) and portion.share.name not in sym.params:
                        yield ctx.error(
                            "PW120",
                            f"unknown param `{portion.share.name}` in split",
                            portion.share.span,
                            _hint(portion.share.name, sym.params, "param"),
                        )
    for effect in sym.effects.values():
        for efield in effect.fields:
            if efield.key == "compensate":
                target = efield.args[0]
                assert isinstance(target, ast.Ident)
                if target.name not in sym.effects:
                    yield ctx.error(
                        "PW120",
                        f"unknown effect `{target.name}` to compensate with",
                        target.span,
                        _hint(target.name, sym.effects, "effect"),
                    )
            if efield.key == "key":
                for arg in efield.args:
                    if isinstance(arg, ast.Ident) and arg.name not in sym.params:
                        yield ctx.error(
                            "PW120",
                            f"unknown param `{arg.name}` in key",
                            arg.span,
                            _hint(arg.name, sym.params, "param"),
                        )
    yield from _placeholders(ctx)


def _placeholders(ctx: CheckContext) -> Iterator[Diagnostic]:
    import re

    sym = ctx.sym
    allowed = {"agreement", *sym.roles, *(n for n, p in sym.params.items() if p.type == "text")}
    for account in sym.accounts.values():
        for match in re.finditer(r"\{([^{}]*)\}", account.address.value):
            name = match.group(1)
            if name not in allowed:
                span = account.address.span
                yield ctx.error(
                    "PW120",
                    f"unknown placeholder `{{{name}}}` in account `{account.name.name}`",
                    span,
                    "placeholders are `{agreement}`, a role (its party id) or a text param",
                )


# The longest name, pact id and account address a policy may declare. The store indexes them (and a
# ledger keys its accounts by address, with params and party names filled in); PostgreSQL refuses an
# index entry past 2,704 bytes where SQLite takes any length, so without a bound one policy would run
# on one backend and be refused mid-run on the other.
MAX_NAME = 64
MAX_PACT_ID = 128
MAX_ADDRESS = 256


@check("PW189")
def name_lengths(ctx: CheckContext) -> Iterator[Diagnostic]:
    header = ctx.sym.policy.header
    if len(header.pact_id.value) > MAX_PACT_ID:
        yield ctx.error("PW189", f"the pact id is {len(header.pact_id.value)} characters long; at most {MAX_PACT_ID}",
                        header.pact_id.span, "use a shorter id, such as `team.policy`")  # fmt: skip
    kinds = (("role", ctx.sym.roles), ("param", ctx.sym.params), ("account", ctx.sym.accounts),
             ("effect", ctx.sym.effects), ("state", ctx.sym.states),
             ("transition", ctx.sym.transitions), ("invariant", ctx.sym.invariants),
             ("property", ctx.sym.properties), ("limit", ctx.sym.limits), ("stamp", ctx.sym.stamps))  # fmt: skip
    for kind, decls in kinds:
        for name, decl in decls.items():
            if len(name) > MAX_NAME:
                yield ctx.error("PW189", f"{kind} name `{name[:20]}...` is {len(name)} characters long; at most "
                                f"{MAX_NAME}", decl.name.span, "use a shorter name")  # fmt: skip
    for account in ctx.sym.accounts.values():
        address = account.address.value
        if len(address) > MAX_ADDRESS:
            yield ctx.error("PW189", f"account `{account.name.name[:20]}` has an address of {len(address)} characters; "
                            f"at most {MAX_ADDRESS}", account.address.span, "use a shorter address")  # fmt: skip
