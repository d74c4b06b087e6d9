"""Ledger programs: one Numscript program per money-moving transition.

Rendered from `templates/ledger/program.num.j2` so that an operator with a
Formance Ledger can run exactly the program the embedded ledger runs. Every
emitted program is validated by the compiler's own Numscript grammar before
it is written.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2

from pactwright import __version__
from pactwright.compiler.lower import Json
from pactwright.compiler.numscript_grammar import validate_numscript


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("pactwright.templates", "ledger"),
        autoescape=False,  # noqa: S701 - Numscript, not HTML
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )


def _account_ref(name: str, accounts: dict[str, Json], variables: dict[str, str], *, source: bool) -> str:
    account = accounts[name]
    ref = f"${variables[name]}" if account["placeholders"] else f"@{account['address']}"
    if source and account["external"] and ref != "@world":
        ref += " allowing unbounded overdraft"
    return ref


def _amount_ref(posting: Json, asset: str) -> str:
    source = posting["amount_source"]
    if source["kind"] == "literal":
        return f"[{asset} {source['minor']}]"
    return f"${source['var']}"


def _portion_ref(portion: Json, asset: str) -> str:
    if portion["kind"] == "remaining":
        return "remaining"
    if "param" in portion:
        return f"max ${portion['param']}" if portion["kind"] == "amount" else f"${portion['param']}"
    if portion["kind"] == "percent":
        return f"{portion['percent']}%"
    return f"max [{asset} {portion['max_minor']}]"


def _destinations(portions: list[Json], asset: str, accounts: dict[str, Json], variables: dict[str, str]) -> list[Json]:
    """Each portion's share and where it goes: an account, or (new in 1.1) a nested block,
    written out here as Numscript's nested destination `{ ... }` indented under its portion."""
    out: list[Json] = []
    for portion in portions:
        if "split" in portion:
            inner = _destinations(portion["split"]["portions"], asset, accounts, variables)
            lines = "".join(f"      {p['share']} to {p['to']}\n" for p in inner)
            to = "{\n" + lines + "    }"
        else:
            to = _account_ref(portion["to"], accounts, variables, source=False)
        out.append({"share": _portion_ref(portion, asset), "to": to})
    return out


def render_program(table: Json, transition: Json) -> str:
    """The Numscript source of one transition's postings."""
    asset = table["currency"]["asset"]
    accounts = {a["name"]: a for a in table["accounts"]}
    # Account -> the variable the transition table gave it (see `lower.account_var`).
    variables = {v["from"]["account"]: v["name"] for v in transition["ledger"]["vars"] if v["type"] == "account"}
    sends: list[dict[str, Any]] = []
    for posting in transition["postings"]:
        rule = posting["rule"]
        sends.append(
            {
                "index": posting["index"],
                "amount": _amount_ref(posting, asset),
                "source": _account_ref(posting["source"], accounts, variables, source=True),
                "single": (
                    _account_ref(rule["to"], accounts, variables, source=False) if rule["kind"] == "single" else None
                ),
                "portions": _destinations(rule.get("portions", []), asset, accounts, variables),
            }
        )
    text = (
        _environment()
        .get_template("program.num.j2")
        .render(
            pact_id=table["pact"]["id"],
            pact_version=table["pact"]["version"],
            transition=transition["id"],
            clause=transition["clause"],
            compiler_version=__version__,
            candidate_hash=table["candidate_hash"],
            vars=transition["ledger"]["vars"],
            sends=sends,
        )
    )
    validate_numscript(text)
    return text


def emit_ledger_programs(table: Json) -> dict[str, bytes]:
    """Path -> bytes of every ledger program, for the bundle."""
    return {
        t["ledger"]["program"]: render_program(table, t).encode("utf-8") for t in table["transitions"] if t["ledger"]
    }
