"""Accounts: addresses must be ledger account names once placeholders are filled."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.diagnostics import Diagnostic

# Numscript account names: segments of [a-zA-Z0-9_-] separated by `:`.
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_PLACEHOLDER = re.compile(r"\{[a-z][a-z0-9_]*\}")


@check("PW141")
def account_addresses(ctx: CheckContext) -> Iterator[Diagnostic]:
    for account in ctx.sym.accounts.values():
        address = account.address.value
        # A placeholder stands for one or more valid characters; check the rest.
        filled = _PLACEHOLDER.sub("x", address)
        segments = filled.split(":")
        if not all(_SEGMENT.fullmatch(segment) for segment in segments):
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
