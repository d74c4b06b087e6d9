"""Money movement: where one transfer's amount goes, exactly as Numscript moves it.

A transfer in `transitions.json` and `model.json` takes an amount (integer
minor units) from a source account and hands it on by a rule:

- `single`: all of it to one account (`{"kind": "single", "to": NAME}`);
- `allotment`: portions with a `share` (`"1/10"`) or a percent `param`, and
  last a `remaining` portion worth 1 minus the others. Each portion gets
  floor(amount x share); the units left over go one at a time to the
  portions in order, so the parts always add up to the amount;
- `capped`: portions with a cap (`max_minor`, or a money `param`), each
  taking min(cap, what is left) in order, and `remaining` the rest.

A portion's part goes `to` an account or, new in 1.1, on to a nested
`split` (a rule of its own, applied to that part), as a Numscript
destination nests: `{ max [EUR/2 500] to @fees remaining to { 10% to @fees
remaining to @seller } }`. `split` lists the accounts' parts in written
order, nested ones in place.

This is the one definition of that arithmetic. The verifier's explorer moves
money with it on every concrete path, and the runtime's command path
computes it beside the ledger program's own result and refuses to commit
when the two differ, so what was verified is what the ledger is asked to
do. Everything is integers and `Fraction`s, never floats.

The Numscript interpreter (`runtime/numscript`) is a separate
implementation of the same semantics, from the program text; the tests
compare the two over generated amounts, shares and caps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

__all__ = ["ParamValue", "allot", "ledger_postings", "move", "params_of", "rule_accounts", "rule_portions", "split"]

# A param a rule reads: a money cap in minor units, or a percent as the fraction of the whole.
ParamValue = int | Fraction


def allot(amount: int, shares: Sequence[Fraction]) -> list[int]:
    """Split `amount` by `shares` (which sum to 1) as a Numscript allotment does.

    Each part is floor(amount x share); the units left over (fewer than
    there are shares) go one at a time to the parts in order.
    """
    if amount < 0 or sum(shares, Fraction(0)) != 1 or any(share < 0 for share in shares):
        raise ValueError(f"cannot allot `{amount}` by shares `{list(map(str, shares))}`: non-negative, summing to 1")
    parts = [amount * share.numerator // share.denominator for share in shares]
    left = amount - sum(parts)
    for index in range(left):
        parts[index] += 1
    return parts


def rule_portions(rule: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every portion of a rule, each nested split's right after the portion that holds it."""
    out: list[Mapping[str, Any]] = []
    for portion in rule.get("portions", ()):
        out.append(portion)
        if "split" in portion:
            out.extend(rule_portions(portion["split"]))
    return out


def rule_accounts(rule: Mapping[str, Any]) -> list[str]:
    """The accounts a rule pays, in the order `split` lists their parts."""
    if rule["kind"] == "single":
        return [str(rule["to"])]
    return [str(p["to"]) for p in rule_portions(rule) if "split" not in p]


def params_of(rule: Mapping[str, Any]) -> tuple[str, ...]:
    """The params a rule reads (ranged caps and percents), in portion order."""
    return tuple(dict.fromkeys(str(p["param"]) for p in rule_portions(rule) if "param" in p))


def split(amount: int, rule: Mapping[str, Any], params: Mapping[str, ParamValue]) -> list[tuple[str, int]]:
    """(account name, minor units) for each destination of the rule, in order, zero parts included.

    `params` holds the value of every param the rule reads (`params_of`).
    Raises `ValueError` for a negative amount, a rule of an unknown kind, a
    `remaining` that is missing or misplaced, an allotment over 100%, or a
    param of the wrong kind or sign: inputs no checked bundle produces.
    """
    if type(amount) is not int or amount < 0:
        raise ValueError(f"a transfer amount is a non-negative whole number of minor units, not `{amount}`")
    kind = rule["kind"]
    if kind == "single":
        return [(str(rule["to"]), amount)]
    if kind not in ("allotment", "capped"):
        raise ValueError(f"unknown transfer rule `{kind}`")
    portions = list(rule["portions"])
    parts = allot(amount, _shares(portions, params)) if kind == "allotment" else _capped(amount, portions, params)
    out: list[tuple[str, int]] = []
    for portion, part in zip(portions, parts, strict=True):
        if "split" in portion:
            out.extend(split(part, portion["split"], params))  # a nested split (new in 1.1) shares out its part
        else:
            out.append((str(portion["to"]), part))
    return out


def move(amount: int, source: str, rule: Mapping[str, Any], params: Mapping[str, ParamValue]) -> list[tuple[str, int]]:
    """(account name, delta): the source gives `amount`, then each destination's part, in order."""
    return [(source, -amount), *split(amount, rule, params)]


def ledger_postings(
    amount: int, source: str, rule: Mapping[str, Any], params: Mapping[str, ParamValue]
) -> list[tuple[str, str, int]]:
    """(source, destination, minor units) as the ledger records the send.

    Numscript writes no zero posting and merges consecutive parts to the
    same destination into one posting.
    """
    out: list[tuple[str, str, int]] = []
    for target, part in split(amount, rule, params):
        if part == 0:
            continue
        merged = part + out.pop()[2] if out and out[-1][1] == target else part
        out.append((source, target, merged))
    return out


def _param(params: Mapping[str, ParamValue], name: str) -> ParamValue:
    if name not in params:
        raise ValueError(f"the rule reads param `{name}`, which has no value")
    return params[name]


def _shares(portions: list[Mapping[str, Any]], params: Mapping[str, ParamValue]) -> list[Fraction]:
    """Each portion's share of the whole; `remaining` (last, as Numscript requires) gets 1 minus the others."""
    shares: list[Fraction] = []
    remaining: list[int] = []
    for index, portion in enumerate(portions):
        if portion["kind"] == "remaining":
            remaining.append(index)
            shares.append(Fraction(0))
            continue
        if "share" in portion:
            num, den = str(portion["share"]).split("/")
            share = Fraction(int(num), int(den))
        else:
            value = _param(params, str(portion["param"]))
            if not isinstance(value, Fraction):
                raise ValueError(f"percent param `{portion['param']}` must be a fraction, not `{value}`")
            share = value
        if not 0 <= share <= 1:
            raise ValueError(f"a share is between 0 and 1, not `{share}`")
        shares.append(share)
    total = sum(shares, Fraction(0))
    if total > 1:
        raise ValueError(f"allotment shares sum to `{total}`, over 100%")
    if remaining not in ([], [len(portions) - 1]):
        raise ValueError("an allotment's one `remaining` portion is its last")
    if remaining:
        shares[-1] = 1 - total
    return shares


def _capped(amount: int, portions: list[Mapping[str, Any]], params: Mapping[str, ParamValue]) -> list[int]:
    """min(cap, what is left) for each capped portion in order, then `remaining` the rest."""
    if not portions or portions[-1]["kind"] != "remaining" or any(p["kind"] == "remaining" for p in portions[:-1]):
        raise ValueError("a capped rule ends with its one `remaining` portion")
    parts: list[int] = []
    left = amount
    for portion in portions[:-1]:
        cap = int(portion["max_minor"]) if "max_minor" in portion else _param(params, str(portion["param"]))
        if type(cap) is not int or cap < 0:
            raise ValueError(f"a cap is a non-negative whole number of minor units, not `{cap}`")
        take = min(cap, left)
        parts.append(take)
        left -= take
    parts.append(left)
    return parts
