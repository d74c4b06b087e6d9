"""Transfer arithmetic for ALL values in the declared ranges, or a re-checked witness.

For every posting: the portions sum to the amount and none is negative; for
every effect call with an amount and a ceiling: the amount stays within it.
Each property is proved only when z3 answers unsat; a sat answer yields the
smallest violating amount (z3 Optimize), which is then recomputed with the
explorer's own arithmetic before it is reported as `refuted`. Each portion's
exact min and max share over the range is reported too, with the bound
proved (nothing below the min, nothing above the max) and attained by a
concrete value.
"""

from __future__ import annotations

from typing import Any

import z3

from pactwright.money import format_money
from pactwright.verifier._z3_terms import Encoder, Num, Opaque, ParamSpace, Split, Text, TextLit, Time, split
from pactwright.verifier._z3_terms import optimizer as make_optimizer
from pactwright.verifier._z3_terms import solver as make_solver
from pactwright.verifier.explorer import Bounds, Explorer
from pactwright.verifier.expressions import View
from pactwright.verifier.model import Json, Model


class ParamEnv:
    """Leaves of a transfer amount: params only; anything else is not modelled here."""

    def __init__(self, space: ParamSpace) -> None:
        self.space = space

    def param(self, name: str) -> Num | Text | TextLit:
        return self.space.values[name]

    def _state(self, what: str) -> Any:
        raise Opaque(f"the amount reads {what}, which depends on the agreement's history")

    def balance(self, name: str) -> Num:
        return self._state(f"balance({name})")

    def fired(self, name: str) -> Num:
        return self._state(f"fired({name})")

    def effect_applied(self, name: str) -> Num:
        return self._state(f"applied({name})")

    def total(self, name: str) -> Num:
        return self._state(f"total({name})")

    def reached(self, name: str) -> Any:
        return self._state(f"reached({name})")

    def approved(self, name: str) -> Any:
        return self._state(f"approved({name})")

    def final(self) -> Any:
        return self._state("final")

    def stamp(self, name: str) -> Time:
        return self._state(name)

    def now(self) -> Time:
        return self._state("now")


class _Concrete:
    """The explorer's own arithmetic at one param valuation: the re-check of a witness."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.explorer = Explorer(model, Bounds())

    def view(self, params: tuple[Any, ...]) -> View:
        model = self.model
        return View(
            ctrl=model.initial,
            p=params,
            stamps=(None,) * len(model.stamps),
            fired=(0,) * len(model.transitions),
            bal=(0,) * len(model.accounts),
            sapp=(0,) * len(model.sites),
            reached=1 << model.initial,
            approved=(0,) * len(model.approval_transitions),
            final=False,
        )

    def posting(self, posting: Json, params: tuple[Any, ...]) -> tuple[int, list[int]]:
        """(amount, each portion's share) as the explorer moves them."""
        view = self.view(params)
        amount = int(self.explorer.compiler.function(posting["amount"])(view))
        source = self.model.account_index[posting["source"]]
        moves = self.explorer._posting(view, amount, source, posting["rule"])
        return amount, [delta for _, delta in moves[1:]]

    def amount(self, expr: Json, params: tuple[Any, ...]) -> int:
        return int(self.explorer.compiler.function(expr)(self.view(params)))


class TransferProver:
    """Checks every posting and ceiling of one model; see `transfer_properties`."""

    def __init__(self, model: Model, timeout_ms: int) -> None:
        self.model = model
        self.timeout_ms = timeout_ms
        self.space = ParamSpace(model, "amount")
        self.encoder = Encoder(model, ParamEnv(self.space))
        self.concrete = _Concrete(model)

    def money(self, value: int) -> str:
        return format_money(value, self.model.scale)

    def run(self) -> list[Json]:
        out: list[Json] = []
        for t_index, transition in enumerate(self.model.transitions):
            for posting in transition["postings"]:
                out.extend(self.posting(transition, posting))
            for site in self.model.sites:
                if site.transition == t_index and site.amount is not None and site.ceiling is not None:
                    out.append(self.ceiling(transition, site.effect, site.amount, site.ceiling))
        return out

    # -- one posting ------------------------------------------------------------------------

    def posting(self, transition: Json, posting: Json) -> list[Json]:
        base = {"transition": transition["id"], "posting": posting["index"]}
        try:
            shares = split(self.encoder, self.space, posting)
        except Opaque as why:
            return [
                _entry(base, kind, text, "unknown", detail=f"not checked symbolically: {why}")
                for kind, text in (("sum", "portions sum to the amount"), ("non_negative", "no portion is negative"))
            ]
        parts = [term for _, term in shares.portions]
        total = sum(parts, z3.IntVal(0))
        out = [
            self.decide(
                base,
                "sum",
                "portions sum to the amount",
                total != shares.amount,
                shares,
                lambda amount, moved: sum(moved) != amount,
            ),
            self.decide(
                base,
                "non_negative",
                "no portion is negative",
                z3.Or(shares.amount < 0, *[p < 0 for p in parts]),
                shares,
                lambda amount, moved: amount < 0 or any(m < 0 for m in moved),
            ),
        ]
        for index, (account, term) in enumerate(shares.portions):
            out.append(self.share_range(base, index, account, term, posting))
        return out

    def decide(
        self,
        base: Json,
        kind: str,
        text: str,
        violation: Any,
        shares: Split,
        concretely_violated: Any,
    ) -> Json:
        """Proved on unsat; refuted only with the smallest witness, re-checked concretely."""
        posting = self._posting_of(base)
        found = self.search(violation, shares.amount)
        if found[0] != "sat":
            return self._undecided(base, kind, text, found[0], found[1])
        values: dict[str, int] = found[1]
        params = self.space.python_params(values)
        amount, moved = self.concrete.posting(posting, params)
        shown = self.params_text(values)
        if not concretely_violated(amount, moved):
            return _entry(
                base,
                kind,
                text,
                "unknown",
                detail=f"z3 reported a violation at {shown} that the explorer's arithmetic does not reproduce",
            )
        accounts = [a for a, _ in shares.portions]
        moved_text = ", ".join(f"{a} {self.money(m)}" for a, m in zip(accounts, moved, strict=True))
        return _entry(
            base,
            kind,
            text,
            "refuted",
            witness=str(amount),
            witness_text=self.money(amount),
            witness_params=self.params_samples(values),
            detail=f"at {shown} (smallest amount that fails{found[2]}): {self.money(amount)} splits as {moved_text}",
        )

    def _posting_of(self, base: Json) -> Json:
        transition = self.model.transitions[self.model.transition_index[base["transition"]]]
        posting: Json = transition["postings"][base["posting"]]
        return posting

    def _undecided(self, base: Json, kind: str, text: str, status: str, reason: Any) -> Json:
        if status == "unsat":
            return _entry(base, kind, text, "proved", detail=f"for every value: {self.space.describe()}")
        return _entry(base, kind, text, "unknown", detail=f"z3 answered unknown ({reason}); nothing is claimed")

    def search(self, violation: Any, amount: Any) -> tuple[str, Any, str]:
        """("unsat", None, ""), ("unknown", reason, "") or ("sat", values, note).

        On sat, the amount and then each ranged param are minimized in that
        order, so the witness is the smallest one; if the optimizer cannot
        finish, any witness is used and `note` says it may not be smallest.
        """
        check = make_solver(self.timeout_ms)
        check.add(*self.space.constraints, violation)
        status = check.check()
        if status == z3.unsat:
            return "unsat", None, ""
        if status != z3.sat:
            return "unknown", check.reason_unknown(), ""
        fallback = check.model()
        opt = make_optimizer(self.timeout_ms)
        opt.add(*self.space.constraints, violation)
        opt.minimize(amount)
        for ranged in self.space.ranged:
            opt.minimize(ranged.var)
        if opt.check() == z3.sat:
            return "sat", self.space.witness(opt.model()), ""
        return "sat", self.space.witness(fallback), "; z3 could not establish it is the smallest"

    # -- ranges -----------------------------------------------------------------------------

    def share_range(self, base: Json, index: int, account: str, term: Any, posting: Json) -> Json:
        """The exact min and max of one portion over the range, each proved and attained."""
        entry = _entry(
            {**base, "portion": index, "account": account},
            "share_range",
            f"share of `{account}`",
            "unknown",
        )
        # A ranged share of a ranged amount makes this optimisation nonlinear, and z3 can run to
        # its budget for seconds on it: such a range (a summary; the search itself is exact)
        # gets a fortieth of the budget, and an `unknown` when that is not enough.
        budget = self.timeout_ms // 40 if _nonlinear(term) else self.timeout_ms
        bounds: list[int] = []
        for direction in ("min", "max"):
            opt = make_optimizer(budget)
            opt.add(*self.space.constraints)
            if direction == "min":
                opt.minimize(term)
            else:
                opt.maximize(term)
            if opt.check() != z3.sat:
                entry["detail"] = (
                    f"z3 could not find the {direction} share ({opt.reason_unknown()}); nothing is claimed"
                )
                return entry
            values = self.space.witness(opt.model())
            value = opt.model().eval(term, model_completion=True).as_long()
            _, moved = self.concrete.posting(posting, self.space.python_params(values))
            if moved[index] != value:
                entry["detail"] = f"the {direction} share z3 found does not reproduce concretely; nothing is claimed"
                return entry
            beyond = make_solver(budget)
            beyond.add(*self.space.constraints, term < value if direction == "min" else term > value)
            status = beyond.check()
            if status != z3.unsat:
                entry["detail"] = (
                    f"the {direction} share {self.money(value)} is attained but not proved extreme ({status})"
                )
                return entry
            bounds.append(value)
        low, high = bounds
        entry.update(
            verdict="proved",
            min=str(low),
            max=str(high),
            min_text=self.money(low),
            max_text=self.money(high),
            detail=f"{account} gets {self.money(low)} .. {self.money(high)} for {self.space.describe()}",
        )
        return entry

    # -- ceilings ---------------------------------------------------------------------------

    def ceiling(self, transition: Json, effect: str, amount_expr: Json, ceiling: int) -> Json:
        base = {"transition": transition["id"], "posting": None, "effect": effect}
        text = f"`{effect}` amount within its ceiling {self.money(ceiling)}"
        try:
            amount = self.encoder.number(amount_expr)
        except Opaque as why:
            return _entry(base, "ceiling", text, "unknown", detail=f"not checked symbolically: {why}")
        if amount.den != 1:
            return _entry(base, "ceiling", text, "unknown", detail="the effect amount is not whole minor units")
        found = self.search(amount.term > ceiling, amount.term)
        if found[0] != "sat":
            return self._undecided(base, "ceiling", text, found[0], found[1])
        values: dict[str, int] = found[1]
        concrete = self.concrete.amount(amount_expr, self.space.python_params(values))
        shown = self.params_text(values)
        if concrete <= ceiling:
            return _entry(
                base, "ceiling", text, "unknown", detail=f"z3 reported {shown} above the ceiling; it does not reproduce"
            )
        return _entry(
            base,
            "ceiling",
            text,
            "refuted",
            witness=str(concrete),
            witness_text=self.money(concrete),
            witness_params=self.params_samples(values),
            detail=f"at {shown} the amount {self.money(concrete)} exceeds the ceiling; the runtime refuses the command",
        )

    # -- text ---------------------------------------------------------------------------------

    def params_text(self, values: dict[str, int]) -> str:
        return ", ".join(f"{r.name} = {r.display(values[r.name], self.model.scale)}" for r in self.space.ranged) or (
            "the fixed param values"
        )

    def params_samples(self, values: dict[str, int]) -> dict[str, str]:
        return {r.name: r.sample_text(values[r.name]) for r in self.space.ranged}


def _entry(
    base: Json,
    kind: str,
    text: str,
    verdict: str,
    *,
    witness: str | None = None,
    witness_text: str | None = None,
    witness_params: dict[str, str] | None = None,
    detail: str = "",
) -> Json:
    entry: Json = {
        **base,
        "property": text,
        "kind": kind,
        "verdict": verdict,
        "witness": witness,
        "witness_text": witness_text,
        "detail": detail,
    }
    if witness_params is not None:
        entry["witness_params"] = witness_params
    return entry


def _nonlinear(term: Any) -> bool:
    """Whether a z3 term multiplies two terms that hold unknowns (or divides by one)."""
    ground: dict[int, bool] = {}

    def constant(node: Any) -> bool:
        key = node.get_id()
        if key not in ground:
            if z3.is_int_value(node) or z3.is_rational_value(node):
                ground[key] = True
            elif z3.is_const(node):  # an uninterpreted constant: a variable
                ground[key] = False
            else:
                ground[key] = all(constant(child) for child in node.children())
        return ground[key]

    todo = [term]
    seen: set[int] = set()
    while todo:
        node = todo.pop()
        if node.get_id() in seen or not z3.is_app(node):
            continue
        seen.add(node.get_id())
        children = node.children()
        unknowns = [c for c in children if not constant(c)]
        if z3.is_mul(node) and len(unknowns) > 1:
            return True
        if (z3.is_div(node) or z3.is_idiv(node) or z3.is_mod(node)) and not constant(children[1]):
            return True
        todo.extend(children)
    return False
