"""Four eyes (new in 1.1): `approval by A, B distinct` and `approvals N by R distinct`.

Every further role must be declared (PW120) and trusted (PW133), as the
first one is (checks/names.py, checks/effects.py); a role may not be listed
twice (PW173: `approvals N by R` says that); N is a whole number from 2
(PW174) to MAX_APPROVALS (PW175); several approvals say `distinct` (PW176).
"""

from __future__ import annotations

from collections.abc import Iterator

from pactwright.compiler import ast
from pactwright.compiler.checks._registry import CheckContext, check
from pactwright.diagnostics import Diagnostic

# The most approvals one transition may require: each is a token the verifier explores.
MAX_APPROVALS = 5


def _approvals(ctx: CheckContext) -> Iterator[tuple[ast.TransitionDecl, ast.ApprovalField]]:
    for decl in ctx.sym.transitions.values():
        for tfield in decl.fields:
            if isinstance(tfield, ast.ApprovalField):
                yield decl, tfield


@check("PW120", "PW133", "PW173", "PW174", "PW175", "PW176")
def four_eyes(ctx: CheckContext) -> Iterator[Diagnostic]:
    sym = ctx.sym
    for decl, approval in _approvals(ctx):
        seen = {approval.role.name}
        for role in approval.also:
            found = sym.roles.get(role.name)
            if found is None:
                yield ctx.error("PW120", f"unknown role `{role.name}`", role.span, "declare it with `role NAME`")
            elif found.untrusted or found.clock:
                kind = "untrusted" if found.untrusted else "clock"
                yield ctx.error("PW133", f"{kind} role `{role.name}` can never approve", role.span,
                                "approvals come from a trusted human role")  # fmt: skip
            if role.name in seen:
                yield ctx.error(
                    "PW173",
                    f"role `{role.name}` is listed twice in the approval of `{decl.name.name}`",
                    role.span,
                    f"for several approvals by one role write `approvals N by {role.name} distinct`",
                )
            seen.add(role.name)
        count = approval.count
        if count is not None:
            number = int(count.text) if count.text.isdigit() else None
            if number is None or number < 2:
                yield ctx.error(
                    "PW174",
                    f"`approvals {count.text}` in `{decl.name.name}` needs a whole number of at least 2",
                    count.span,
                    f"for one approval write `approval by {approval.role.name}`",
                )
            elif number > MAX_APPROVALS:
                yield ctx.error(
                    "PW175",
                    f"`approvals {count.text}` in `{decl.name.name}` is more than {MAX_APPROVALS} approvals",
                    count.span,
                    f"require at most {MAX_APPROVALS} approvals for one transition",
                )
        several = bool(approval.also) or count is not None
        if several and not approval.distinct:
            yield ctx.error(
                "PW176",
                f"the approvals of `{decl.name.name}` must say `distinct`: each comes from a different party",
                approval.span,
                "add `distinct` after the roles (before `not requester`)",
            )
