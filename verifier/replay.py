"""Replay a counterexample through an independent path before reporting it.

The explorer works from `model.json` with compiled guards and its own
allotment arithmetic. Replay reads `transitions.json` instead, interprets
its guards with a small tree-walking evaluator over concrete times, and
moves money by running the emitted `.num` programs with the runtime's
Numscript interpreter. A counterexample that does not replay is a verifier
bug and fails loudly (PW390), never a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pactwright.errors import VerifyError
from pactwright.money import Percent
from pactwright.runtime.numscript import parse_program, run_program
from pactwright.verifier._replay_outcomes import SitePhases

Json = dict[str, Any]


@dataclass
class ReplayAgreement:
    """One agreement's concrete state during replay."""

    agreement: str
    state: str
    params: dict[str, Any]
    stamps: dict[str, int] = field(default_factory=dict)
    fired: dict[str, int] = field(default_factory=dict)
    reached: set[str] = field(default_factory=set)


def _value(expr: Json, agr: ReplayAgreement, now: int, balances: dict[str, int], extra: Json) -> Any:
    op = expr["op"]
    args = expr.get("args", [])
    if op == "lit":
        kind = expr["type"]
        if kind == "percent":
            return Percent.parse(expr["value"]).value
        if kind in ("money", "int", "duration"):
            return int(expr["value"])
        return expr["value"]
    if op == "param":
        return agr.params[expr["name"]]
    if op == "stamp":
        return agr.stamps.get(expr["name"])
    if op == "now":
        return now
    if op == "final":
        return extra["final"]
    if op == "balance":
        return balances.get(expr["name"], 0)
    if op in ("fired", "applied") and expr.get("value") != "effect":
        return agr.fired.get(expr["name"], 0)
    if op == "applied":
        return extra["effect_applied"].get(expr["name"], 0)
    if op == "total":
        return extra["effect_total"].get(expr["name"], 0)
    if op == "reached":
        return expr["name"] in agr.reached
    if op == "approved":
        return expr["name"] in extra["approved"]
    if op == "approvals":  # four eyes (new in 1.1): the count T's commit consumed, once it committed
        return int(expr["value"]) if expr["name"] in extra["approved"] else 0
    if op in ("acknowledged", "reconciled", "abandoned"):
        return expr["name"] in extra.get("outcomes", {}).get(op, ())
    values = [_value(a, agr, now, balances, extra) for a in args]
    if op == "not":
        return not values[0]
    if op == "neg":
        return None if values[0] is None else -values[0]
    # `and`, `or` and `+` may be one node over a long chain's terms (new in 1.1): folded left to right.
    if op in ("and", "or"):
        result = values[0]
        for value in values[1:]:
            result = (result and value) if op == "and" else (result or value)
        return result
    if op == "implies":
        return (not values[0]) or values[1]
    if op == "+" and len(values) > 2:
        return None if any(value is None for value in values) else sum(values)
    left, right = values
    if op in ("<", "<=", ">", ">=", "==", "!="):
        if left is None or right is None:
            return False
        return {
            "<": left < right,
            "<=": left <= right,
            ">": left > right,
            ">=": left >= right,
            "==": left == right,
            "!=": left != right,
        }[op]
    if left is None or right is None:
        return None
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        product = Fraction(left) * Fraction(right)
        return product.numerator // product.denominator
    if op == "/":
        if right == 0:
            return None  # undefined: comparisons with it are false, as in the explorer
        quotient = Fraction(left) / Fraction(right)
        return quotient.numerator // quotient.denominator
    raise VerifyError(f"replay cannot evaluate `{op}`", code="PW391")


class Replayer:
    """Steps through events against `transitions.json` and the ledger programs."""

    def __init__(self, table: Json, programs: dict[str, str]) -> None:
        self.table = table
        self.programs = {path: parse_program(text) for path, text in programs.items()}
        self.transitions = {t["id"]: t for t in table["transitions"]}
        self.accounts = {a["name"]: a for a in table["accounts"]}
        self.final_states = {s["name"] for s in table["states"] if s["final"]}
        self.asset = table["currency"]["asset"]
        # Ledger balances by concrete address, and by policy account name per agreement.
        self.ledger: dict[str, int] = {}
        self.now = 0
        # Each call site's latest phase, for effect outcomes; the counterexample replay fills it.
        self.site_phases = SitePhases([], [])

    def address(self, account: str, agr: ReplayAgreement) -> str:
        address: str = self.accounts[account]["address"]
        fills = {"agreement": agr.agreement, **{k: str(v) for k, v in agr.params.items()}}
        for role in self.table["roles"]:
            fills.setdefault(role["name"], f"{role['name']}-{agr.agreement}")
        for key, value in fills.items():
            address = address.replace("{" + key + "}", value)
        return address

    def balances(self, agr: ReplayAgreement, contributions: dict[str, dict[str, int]]) -> dict[str, int]:
        """Policy account -> this agreement's balance (its own postings only)."""
        own = contributions.get(agr.agreement, {})
        return {name: own.get(name, 0) for name in self.accounts}

    def command(
        self,
        agr: ReplayAgreement,
        tid: str,
        contributions: dict[str, dict[str, int]],
        extra: Json,
    ) -> list[tuple[str, str, int]]:
        """Apply one command; returns the postings it made. Refusals raise PW390."""
        transition = self._enabled(agr, tid, contributions, extra)
        refusal = self.refusal(agr, tid, contributions, extra)
        if refusal is not None:
            raise VerifyError(f"replay: the runtime would refuse `{tid}`: {refusal}", code="PW390")
        postings = self._postings(agr, transition, contributions, extra)
        self._apply(agr, tid, transition, postings, contributions)
        return postings

    def _enabled(self, agr: ReplayAgreement, tid: str, contributions: dict[str, dict[str, int]], extra: Json) -> Json:
        transition = self.transitions.get(tid)
        if transition is None:
            raise VerifyError(f"replay: unknown transition `{tid}`", code="PW390")
        if agr.state not in transition["from"]:
            raise VerifyError(f"replay: `{tid}` is not enabled in state `{agr.state}`", code="PW390")
        balances = self.balances(agr, contributions)
        if transition["guard"] is not None and not _value(transition["guard"], agr, self.now, balances, extra):
            raise VerifyError(f"replay: the guard of `{tid}` is false at t={self.now}", code="PW390")
        return transition

    def refusal(
        self, agr: ReplayAgreement, tid: str, contributions: dict[str, dict[str, int]], extra: Json
    ) -> str | None:
        """Why the runtime refuses the enabled command `tid` at commit, or None.

        The ledger program runs against this agreement's own balances
        (external sources carry their unbounded overdraft in the program), so
        an overdraft or a negative or undefined amount is the ledger's own
        refusal, found by the interpreter, not by the explorer's arithmetic.
        """
        from pactwright.errors import PactwrightError

        transition = self._enabled(agr, tid, contributions, extra)
        try:
            self._postings(agr, transition, contributions, extra)
        except PactwrightError as exc:
            if exc.code in ("PW753", "PW754"):
                return str(exc)
            raise
        return None

    def _postings(
        self, agr: ReplayAgreement, transition: Json, contributions: dict[str, dict[str, int]], extra: Json
    ) -> list[tuple[str, str, int]]:
        balances = self.balances(agr, contributions)
        postings: list[tuple[str, str, int]] = []
        if transition["ledger"]:
            variables: dict[str, str] = {}
            for var in transition["ledger"]["vars"]:
                origin = var["from"]
                if var["type"] == "account":
                    variables[var["name"]] = self.address(origin["account"], agr)
                elif origin["kind"] == "param":
                    value = agr.params[origin["param"]]
                    variables[var["name"]] = (
                        f"{self.asset} {value}" if var["type"] == "monetary" else f"{Percent(value).canonical()}%"
                    )
                else:
                    amount = _value(origin["expr"], agr, self.now, balances, extra)
                    if amount is None:
                        raise VerifyError("an undefined amount (a division by zero)", code="PW753")
                    variables[var["name"]] = f"{self.asset} {amount}"
            program = self.programs[transition["ledger"]["program"]]
            # What the runtime checks at commit: the agreement's own balances.
            own = {(self.address(name, agr), self.asset): value for name, value in balances.items()}
            for posting in run_program(program, variables, own):
                postings.append((posting.source, posting.destination, posting.amount))
        return postings

    def _apply(
        self,
        agr: ReplayAgreement,
        tid: str,
        transition: Json,
        postings: list[tuple[str, str, int]],
        contributions: dict[str, dict[str, int]],
    ) -> None:
        by_address = {self.address(name, agr): name for name in self.accounts}
        own = contributions.setdefault(agr.agreement, {})
        for source, destination, amount in postings:
            own[by_address[source]] = own.get(by_address[source], 0) - amount
            own[by_address[destination]] = own.get(by_address[destination], 0) + amount
            self.ledger[source] = self.ledger.get(source, 0) - amount
            self.ledger[destination] = self.ledger.get(destination, 0) + amount
        agr.state = transition["to"]
        agr.reached.add(agr.state)
        agr.fired[tid] = agr.fired.get(tid, 0) + 1
        for stamp in transition["stamps"]:
            agr.stamps[stamp] = self.now

    def _addresses(self, agr: ReplayAgreement) -> list[str]:
        return [self.address(name, agr) for name in self.accounts]

    def evaluate(self, expr: Json, agr: ReplayAgreement, contributions: dict[str, dict[str, int]], extra: Json) -> Any:
        return _value(expr, agr, self.now, self.balances(agr, contributions), extra)
