"""Emitted ledger programs move exactly what the transition table says.

For every money-moving transition of every policy in `policies/`, the
program emitted into the bundle is executed by the embedded Numscript
interpreter, and its postings are compared with an independent reading of
`transitions.json` (split rules resolved by the compiler), for boundary and
random amounts. Both grammars (the compiler's lark grammar and the runtime's
hand-written parser) must accept every emitted program.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.numscript_grammar import validate_numscript
from pactwright.compiler.pipeline import check_bytes
from pactwright.runtime.numscript import parse_program, run_program

POLICIES = sorted((Path(__file__).resolve().parent.parent / "policies").glob("*.pact"))


@cache
def _bundle(path: Path) -> dict[str, bytes]:
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None
    return compile_candidate(result.candidate, result.source_map, path.name)


def _money_transitions() -> list[tuple[Path, str]]:
    out = []
    for path in POLICIES:
        table = load_json(_bundle(path)["transitions.json"])
        out.extend((path, t["id"]) for t in table["transitions"] if t["ledger"])
    return out


CASES = _money_transitions()


def _fill(address: str, agreement: str) -> str:
    return address.replace("{agreement}", agreement).replace("{", "").replace("}", "")


def _expected(
    table: dict[str, Any], transition: dict[str, Any], values: dict[str, int | Fraction]
) -> list[tuple[str, str, int]]:
    """Postings derived from the transition table alone (independent of Numscript).

    Zero parts post nothing and consecutive parts of one send to one account
    are one posting, as Numscript writes them (a nested split, new in 1.1,
    can pay the platform twice in a row); two transfers are two sends."""
    accounts = {a["name"]: _fill(a["address"], "a1") for a in table["accounts"]}
    out: list[tuple[str, str, int]] = []
    for posting in transition["postings"]:
        source = posting["amount_source"]
        amount = int(source["minor"]) if source["kind"] == "literal" else int(values[source["var"]])
        src = accounts[posting["source"]]
        first = len(out)  # parts merge within one send, never across two transfers
        for name, part in _parts(amount, posting["rule"], values):
            if part == 0:
                continue
            if len(out) > first and out[-1][:2] == (src, accounts[name]):
                part += out.pop()[2]
            out.append((src, accounts[name], part))
    return out


def _parts(amount: int, rule: dict[str, Any], values: dict[str, int | Fraction]) -> list[tuple[str, int]]:
    """(account, part) of one rule, a nested split's parts in place of its portion."""
    if rule["kind"] == "single":
        return [(rule["to"], amount)]
    portions = rule["portions"]
    if rule["kind"] == "capped":
        takes: list[int] = []
        left = amount
        for portion in portions:
            take = (
                left
                if portion["kind"] == "remaining"
                else min(left, int(portion.get("max_minor") or values[portion["param"]]))
            )
            takes.append(take)
            left -= take
    else:
        shares = [
            Fraction(portion["share"]) if "share" in portion else Fraction(values[portion["param"]])
            for portion in portions
            if portion["kind"] != "remaining"
        ]
        fractions = [*shares, 1 - sum(shares)]
        exact = [amount * f for f in fractions]
        takes = [int(x.numerator // x.denominator) for x in exact]
        for index in range(amount - sum(takes)):
            takes[index] += 1
    out: list[tuple[str, int]] = []
    for portion, take in zip(portions, takes, strict=True):
        out.extend(_parts(take, portion["split"], values) if "split" in portion else [(portion["to"], take)])
    return out


def _run(path: Path, tid: str, amount_seed: int, percent_seed: int) -> None:
    files = _bundle(path)
    table = load_json(files["transitions.json"])
    transition = next(t for t in table["transitions"] if t["id"] == tid)
    params = {p["name"]: p for p in table["params"]}
    asset = table["currency"]["asset"]
    variables: dict[str, str] = {}
    values: dict[str, int | Fraction] = {}
    for var in transition["ledger"]["vars"]:
        origin = var["from"]
        if var["type"] == "account":
            account = next(a for a in table["accounts"] if a["name"] == origin["account"])
            variables[var["name"]] = _fill(account["address"], "a1")
        elif var["type"] == "monetary" and origin["kind"] != "param":
            # An amount computed at commit (`balance(escrow)`, an expression): the program and the table
            # must agree for every amount, so any non-negative one will do.
            amount = amount_seed % 10**7
            values[var["name"]] = amount
            variables[var["name"]] = f"{asset} {amount}"
        elif var["type"] == "monetary":
            param = params[origin["param"]]
            low, high = int(param.get("min", param.get("value"))), int(param.get("max", param.get("value")))
            amount = low + amount_seed % (high - low + 1)
            values[var["name"]] = amount
            variables[var["name"]] = f"{asset} {amount}"
        elif var["type"] == "portion":
            param = params[origin["param"]]
            low, high = Fraction(param["min"]) * 10000, Fraction(param["max"]) * 10000
            basis = int(low + percent_seed % (int(high - low) + 1))
            values[var["name"]] = Fraction(basis, 1_000_000)
            variables[var["name"]] = (
                f"{Fraction(basis, 10000)}%" if basis % 10000 == 0 else f"{basis // 10000}.{basis % 10000:04d}%"
            )
    program = parse_program(files[transition["ledger"]["program"]].decode())
    rich = {(_fill(a["address"], "a1"), asset): 10**15 for a in table["accounts"] if not a["external"]}
    postings = run_program(program, variables, rich)
    got = [(p.source, p.destination, p.amount) for p in postings]
    assert all(p.asset == asset for p in postings)
    expected = _expected(table, transition, values)
    assert sorted(got) == sorted(expected), f"{path.name}:{tid} with {variables}"
    moved = sum(x for _, _, x in got)
    total = sum(
        int(values.get(p["amount_source"].get("var", ""), 0)) or int(p["amount_source"].get("minor", 0))
        for p in transition["postings"]
    )
    assert moved == total, "nothing is lost to rounding"


@pytest.mark.parametrize(("path", "tid"), CASES, ids=[f"{p.stem}:{t}" for p, t in CASES])
def test_emitted_program_is_accepted_by_both_grammars(path: Path, tid: str) -> None:
    files = _bundle(path)
    table = load_json(files["transitions.json"])
    text = files[next(t for t in table["transitions"] if t["id"] == tid)["ledger"]["program"]].decode()
    validate_numscript(text)
    parse_program(text)


@pytest.mark.parametrize(("path", "tid"), CASES, ids=[f"{p.stem}:{t}" for p, t in CASES])
def test_boundary_amounts_move_exactly_what_the_table_says(path: Path, tid: str) -> None:
    for seed in (0, 1, 2, 3, 7, 99, 10**6 - 1, 10**9 + 7):
        _run(path, tid, seed, seed)


@settings(max_examples=60, deadline=None)
@given(
    case=st.sampled_from(CASES),
    amount_seed=st.integers(min_value=0, max_value=10**12),
    percent_seed=st.integers(min_value=0, max_value=10**7),
)
def test_random_amounts_move_exactly_what_the_table_says(
    case: tuple[Path, str], amount_seed: int, percent_seed: int
) -> None:
    _run(case[0], case[1], amount_seed, percent_seed)


def test_insufficient_funds_moves_nothing() -> None:
    path = next(p for p in POLICIES if p.stem == "marketplace_milestone")
    files = _bundle(path)
    program = parse_program(files["ledger/release.num"].decode())
    variables = {"price": "EUR/2 1000", "account_escrow": "escrow:a1", "account_seller": "sellers:s:payable"}
    from pactwright.errors import LedgerError

    with pytest.raises(LedgerError) as caught:
        run_program(program, variables, {("escrow:a1", "EUR/2"): 999})
    assert caught.value.code == "PW754"
