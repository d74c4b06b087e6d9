"""Adversarial review of the front end and the compiler: each test is a bug that was found.

The policies here are valid but unusual (names that look like generated
identifiers, clause labels with odd characters, regular expressions that one
engine accepts and another refuses, accounts that alias) or they are bad
input that used to end in a traceback. A property test below compiles
random valid policies over such names and holds every artifact to its
promises: programs parse with both Numscript parsers and move what
`transitions.json` says, and every trace pointer lands where it claims.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactwright.canonical import load_json
from pactwright.cli.main import main as cli_main
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.formatter import format_policy
from pactwright.compiler.numscript_grammar import validate_numscript
from pactwright.compiler.pipeline import CheckResult, check_text
from pactwright.compiler.semantic_diff import render_diff_text, semantic_diff
from pactwright.runtime.numscript import parse_program, run_program
from tests.test_ledger_programs import _expected

HEAD = """pact "t" version "1"
currency EUR scale 2
role buyer
clock timer
param price: money between 1.00 and 100.00
account world "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{buyer}"
state open initial
state done final
"""


def _check(text: str) -> CheckResult:
    return check_text(text)


def _ok(text: str) -> CheckResult:
    result = _check(text)
    assert result.candidate is not None, [(d.code, d.message) for d in result.diagnostics]
    return result


def _compile(text: str) -> dict[str, bytes]:
    result = _ok(text)
    assert result.candidate is not None
    return compile_candidate(result.candidate, result.source_map, "p.pact")


def _codes(text: str) -> list[str]:
    return [d.code for d in _check(text).diagnostics]


def _resolve(document: Any, pointer: str) -> Any:
    for part in pointer.split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def _trace_problems(files: dict[str, bytes]) -> list[object]:
    """Every trace artifact must land on the transition or invariant it is listed under."""
    trace = load_json(files["trace.json"])
    problems: list[object] = []
    for transition in trace["transitions"]:
        for artifact in transition["artifacts"]:
            if "pointer" in artifact:
                node = _resolve(load_json(files[artifact["path"]]), artifact["pointer"])
                found = node.get("name") or node.get("id") or node["properties"]["transition"]["const"]
                if found != transition["id"]:
                    problems.append((transition["id"], artifact, found))
            elif "posting" in artifact:
                lines = files[artifact["path"]].decode().split("\n")
                first, last = artifact["lines"]
                if not lines[first - 1].startswith("send ") or lines[last - 1] != ")":
                    problems.append((transition["id"], artifact))
    for invariant in trace["invariants"]:
        for artifact in invariant["artifacts"]:
            if _resolve(load_json(files[artifact["path"]]), artifact["pointer"])["name"] != invariant["name"]:
                problems.append((invariant["name"], artifact))
    return problems


def _fill(address: str, agreement: str = "a1") -> str:
    return address.replace("{agreement}", agreement).replace("{", "").replace("}", "")


def _run_and_compare(files: dict[str, bytes], params: dict[str, int | Fraction]) -> None:
    """Run every ledger program; compare with an independent reading of `transitions.json`.

    `params` gives each ranged param's value: minor units for money, the
    fraction of the whole for a percent. Expression amounts here are all
    `PARAM - LITERAL`.
    """
    table = load_json(files["transitions.json"])
    asset = table["currency"]["asset"]
    addresses = {a["name"]: _fill(a["address"]) for a in table["accounts"]}
    for transition in table["transitions"]:
        if not transition["ledger"]:
            continue
        text = files[transition["ledger"]["program"]].decode()
        validate_numscript(text)
        program = parse_program(text)
        variables: dict[str, str] = {}
        values: dict[str, int | Fraction] = {}
        for var in transition["ledger"]["vars"]:
            origin = var["from"]
            if var["type"] == "account":
                variables[var["name"]] = addresses[origin["account"]]
                continue
            if origin["kind"] == "param":
                value = params[origin["param"]]
            else:
                left, right = origin["expr"]["args"]
                value = int(params[left["name"]]) - int(right["value"])
            values[var["name"]] = value
            if var["type"] == "portion":
                basis = int(Fraction(value) * 1_000_000)  # ten-thousandths of a percent
                variables[var["name"]] = f"{basis // 10_000}.{basis % 10_000:04d}%"
            else:
                variables[var["name"]] = f"{asset} {value}"
        for posting in transition["postings"]:
            for portion in posting["rule"].get("portions", []):
                if "param" in portion:
                    values.setdefault(portion["param"], params[portion["param"]])
        funded = {(address, asset): 10**12 for address in addresses.values()}
        got = [(p.source, p.destination, p.amount) for p in run_program(program, variables, funded)]
        expected = _expected(table, transition, values)
        assert sorted(got) == sorted(expected), (transition["id"], variables, text)


# --- generated Numscript variables vs param names --------------------------------------------


def test_a_param_named_like_an_expression_variable_moves_its_own_amount() -> None:
    """`transfer_0` is the variable of transfer 0's expression; a param may have that name too."""
    text = HEAD + (
        "param transfer_0: money between 1.00 and 5.00\n"
        "transition t: open -> done {\n"
        "  by buyer\n"
        "  transfer price - 1.00 from world to escrow\n"
        "  transfer transfer_0 from world to seller\n"
        "}\n"
    )
    files = _compile(text)
    table = load_json(files["transitions.json"])
    names = [v["name"] for v in table["transitions"][0]["ledger"]["vars"]]
    assert len(names) == len(set(names)), names
    _run_and_compare(files, {"price": 5000, "transfer_0": 300})
    program = files["ledger/t.num"].decode()
    assert "send $_transfer_0 (" in program and "send $transfer_0 (" in program


def test_a_param_named_like_an_account_variable_compiles() -> None:
    text = HEAD + (
        "param account_escrow: money between 1.00 and 5.00\n"
        "transition t: open -> done { by buyer transfer account_escrow from world to escrow }\n"
    )
    files = _compile(text)
    _run_and_compare(files, {"price": 100, "account_escrow": 250})


# --- trace and schema pointers -----------------------------------------------------------------


@pytest.mark.parametrize("label", ["²", "1.²", "٣.1", "x.⑤"])
def test_a_clause_label_with_a_unicode_digit_compiles(label: str) -> None:
    files = _compile(HEAD + f'clause "{label}" transition t: open -> done {{ by buyer }}\n')
    assert [c["clause"] for c in load_json(files["trace.json"])["clauses"]] == [label]


@pytest.mark.parametrize("char", ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e"])
def test_posting_lines_stay_right_when_a_label_holds_a_line_separator_python_knows(char: str) -> None:
    text = HEAD.replace('pact "t"', f'pact "t{char}t"') + (
        f'clause "4{char}1" transition t: open -> done {{ by buyer transfer price from world to escrow }}\n'
    )
    files = _compile(text)
    assert _trace_problems(files) == []


def test_transitions_whose_schema_names_used_to_collide_get_their_own_definitions() -> None:
    text = HEAD.replace("state done final", "state mid\nstate mid2\nstate done final") + (
        "transition a1: open -> mid { by buyer }\n"
        "transition a_1: mid -> mid2 { by buyer }\n"
        "transition a__1: mid2 -> done { by buyer }\n"
    )
    files = _compile(text)
    schema = load_json(files["events.schema.json"])
    refs = [r["$ref"] for r in schema["oneOf"]]
    assert len(refs) == len(set(refs)) == 6
    assert _trace_problems(files) == []


@pytest.mark.parametrize("name", ["model_config", "model_dump", "model_fields", "schema", "json", "copy", "validate"])
def test_params_named_like_pydantic_members_compile_without_warnings(name: str) -> None:
    text = HEAD + f'param {name}: text matching "[a-z]+"\ntransition t: open -> done {{ by buyer }}\n'
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        files = _compile(text)
    schema = load_json(files["events.schema.json"])
    assert name in schema["$defs"]["Params"]["properties"]
    assert schema["$defs"]["Params"]["properties"][name]["anyOf"][0]["pattern"] == "^(?:[a-z]+)$"


# --- regular expressions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    [
        "(" * 3000 + "a" + ")" * 3000,  # RecursionError inside `re`
        "a{99999999999}",  # OverflowError inside `re`
        "(?=a)a",  # Python accepts lookahead, the schema's engine does not
        "(a)\\\\1",  # a backreference
        "(?<=a)b",
        "\\\\Z",
        "(?P<n>a)(?P=n)",
        "(?x)a#",  # verbose mode: the comment would swallow the anchoring group
    ],
)
def test_a_pattern_no_engine_can_take_is_a_diagnostic_not_a_crash(pattern: str) -> None:
    text = HEAD + f'param code: text matching "{pattern}"\ntransition t: open -> done {{ by buyer }}\n'
    result = _check(text)
    assert [d.code for d in result.diagnostics] == ["PW139"]
    assert (result.diagnostics[0].span.line, result.diagnostics[0].span.column) == (11, 27)


def test_check_exits_1_on_a_pattern_that_crashed_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.pact"
    path.write_text(HEAD + 'param code: text matching "a{99999999999}"\ntransition t: open -> done { by buyer }\n')
    assert cli_main(["check", str(path)]) == 1
    assert "PW139" in capsys.readouterr().err


# --- literals and types -------------------------------------------------------------------------


def test_fmt_never_turns_a_valid_policy_into_an_invalid_one_with_a_huge_integer() -> None:
    """An integer in a money position obeys the same digit limit as the money literal fmt writes."""
    text = HEAD.replace("between 1.00 and 100.00", "between 1.00 and " + "9" * 100)
    text += "transition t: open -> done { by buyer }\n"
    before = _check(text)
    after = _check(format_policy(text))
    assert [d.code for d in before.diagnostics] == [d.code for d in after.diagnostics]
    assert before.candidate == after.candidate
    assert [d.code for d in before.diagnostics] == ["PW104"]


@pytest.mark.parametrize(
    "expr",
    [
        "transfer price / 0 from world to escrow",
        "when applied(t) / 0 >= 0",
        "when price / (2 - 2) >= 1.00",
        "when price / -0 >= 1.00",
        "transfer price / (0 * 3) from world to escrow",
    ],
)
def test_division_by_zero_is_refused(expr: str) -> None:
    assert "PW139" in _codes(HEAD + f"transition t: open -> done {{ by buyer {expr} }}\n")


def test_division_by_something_that_may_be_zero_is_left_to_the_verifier() -> None:
    assert _codes(HEAD + "transition t: open -> done { by buyer when price / (applied(t) + 1) > 1.00 }\n") == []


def test_a_negative_integer_beside_money_is_whole_units() -> None:
    """docs/language.md says `balance(x) >= -5` is a type error; the code (rightly) reads it as -5.00."""
    one = _ok(HEAD + "invariant i: balance(escrow) >= -5\ntransition t: open -> done { by buyer }\n")
    two = _ok(HEAD + "invariant i: balance(escrow) >= -5.00\ntransition t: open -> done { by buyer }\n")
    assert one.candidate is not None and two.candidate is not None
    assert one.candidate.hash() == two.candidate.hash()


def test_an_empty_budget_means_no_budget() -> None:
    body = "transition t: open -> done { by buyer }\n"
    none = _ok(HEAD + body).candidate
    empty = _ok(HEAD + "budget { }\n" + body).candidate
    assert none is not None and empty is not None
    assert none.hash() == empty.hash()


# --- accounts that alias -----------------------------------------------------------------------


def test_two_accounts_with_one_address_are_a_duplicate() -> None:
    text = HEAD + (
        'account escrow2 "escrow:{agreement}"\n'
        "transition t: open -> done { by buyer transfer price from escrow to escrow2 }\n"
    )
    result = _check(text)
    assert [(d.code, d.span.line, d.span.column) for d in result.blockers] == [("PW121", 11, 17)]


def test_world_twice_is_a_duplicate() -> None:
    text = HEAD + 'account w2 "world" external\n'
    text += "transition t: open -> done { by buyer transfer price from world to w2 }\n"
    assert [d.code for d in _check(text).blockers] == ["PW121"]


@pytest.mark.parametrize(
    ("one", "two"),
    [
        ("parties:{buyer}", "parties:{timer}"),
        ("escrow:{agreement}", "escrow:fees"),
        ("{agreement}", "world"),
        ("a{agreement}", "{buyer}b"),
    ],
)
def test_accounts_that_may_alias_once_filled_are_warned_about(one: str, two: str) -> None:
    head = HEAD.replace('account world "world" external\n', "").replace('account escrow "escrow:{agreement}"\n', "")
    head = head.replace('account seller "sellers:{buyer}"\n', "")
    text = head + f'account first "{one}" external\naccount second "{two}" external\n'
    text += "transition t: open -> done { by buyer }\n"
    result = _check(text)
    assert [d.code for d in result.diagnostics] == ["PW154"]
    assert result.ok


@pytest.mark.parametrize(
    ("one", "two"),
    [("sellers:{buyer}", "buyers:{buyer}"), ("a:{agreement}:x", "a:{agreement}:y"), ("a:b", "a:b:c"), ("x1", "x2")],
)
def test_accounts_that_can_never_alias_are_fine(one: str, two: str) -> None:
    head = HEAD.replace('account escrow "escrow:{agreement}"\n', "").replace('account seller "sellers:{buyer}"\n', "")
    text = head + f'account first "{one}"\naccount second "{two}"\ntransition t: open -> done {{ by buyer }}\n'
    assert _codes(text) == []


# --- diff and explain ------------------------------------------------------------------------------

SPLIT = HEAD + (
    'account fees "fees"\n'
    "param shipping: money = 4.90\n"
    "transition t: open -> done {\n"
    "  by buyer\n"
    "  transfer price from escrow { 1.50 to fees  remaining to seller }\n"
    "}\n"
)


def test_diff_shows_amounts_in_currency_units_not_minor_units() -> None:
    old = _ok(SPLIT).candidate
    new = _ok(SPLIT.replace("1.50 to fees", "2.50 to fees").replace("= 4.90", "= 5.00")).candidate
    assert old is not None and new is not None
    text = render_diff_text(semantic_diff(old.to_json(), new.to_json()))
    assert "1.50 to fees" in text and "2.50 to fees" in text, text
    assert "4.90" in text and "5.00" in text, text
    assert "150" not in text.replace("1.50", ""), text


def test_diff_renders_each_side_at_its_own_scale() -> None:
    old = _ok(SPLIT).candidate
    new = _ok(SPLIT.replace("scale 2", "scale 3")).candidate
    assert old is not None and new is not None
    text = render_diff_text(semantic_diff(old.to_json(), new.to_json()))
    # 1.50 at scale 2 is 150 minor units, at scale 3 it is 1500: the amounts did not change.
    assert "1.50 to fees" in text and "1.500 to fees" in text, text
    assert "0.150" not in text and "15.00" not in text, text


def _bundle(tmp_path: Path) -> Path:
    files = _compile(SPLIT.replace("transition t:", 'clause "1" transition t:'))
    out = tmp_path / "bundle"
    out.mkdir()
    for name, data in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return out


@pytest.mark.parametrize("broken", [b"[]", b'{"transitions": [{"x": 1}]}', b'{"pact": 1}'])
def test_diff_of_a_bundle_with_a_broken_candidate_is_a_usage_error(
    tmp_path: Path, broken: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "candidate.json").write_bytes(broken)
    assert cli_main(["diff", str(bundle), str(bundle)]) == 2
    assert "internal error" not in capsys.readouterr().err


@pytest.mark.parametrize("broken", [b"{}", b'{"clauses": [{"clause": "1"}]}', b'{"clauses": 5}'])
def test_explain_of_a_bundle_with_a_broken_trace_is_a_usage_error(
    tmp_path: Path, broken: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "trace.json").write_bytes(broken)
    assert cli_main(["explain", str(bundle)]) == 2
    assert "internal error" not in capsys.readouterr().err


# --- random valid policies over hostile names ----------------------------------------------------

# Names that look like what the compiler generates, or like Python/pydantic members.
_HOSTILE = ["transfer_0", "transfer_1", "account_a", "account_b", "a1", "a_1", "a__1", "model_dump", "schema", "x"]
_LABELS = ["1", "²", "4\x0c2", "a\x0bb", "10", "٣", "", "x y", '"q"']


@st.composite
def _policy(draw: st.DrawFn) -> tuple[str, dict[str, int | Fraction]]:
    names = draw(st.lists(st.sampled_from(_HOSTILE), min_size=2, max_size=5, unique=True))
    money, percent = names[:-1], names[-1]  # the last hostile name is a ranged percent param
    accounts = ["a", "b", *draw(st.lists(st.sampled_from(["c", "d", "e"]), max_size=2, unique=True))]
    addresses = {"a": "acct:{agreement}", "b": "b:{buyer}", "c": "c", "d": "d:{agreement}:x", "e": "e:{timer}"}
    lines = [
        'pact "p" version "1"',
        "currency EUR scale 2",
        "role buyer",
        "clock timer",
        'account w "world" external',
        *(f'account {n} "{addresses[n]}"' for n in accounts),
        *(f"param {p}: money between 10.00 and 20.00" for p in money),
        f"param {percent}: percent between 0% and 40%",
    ]
    steps = draw(st.integers(min_value=1, max_value=4))
    transitions = draw(st.lists(st.sampled_from(_HOSTILE), min_size=steps, max_size=steps, unique=True))
    lines += [f"state s{i}{' initial' if i == 0 else ''}" for i in range(steps)] + ["state end final"]
    for index, name in enumerate(transitions):
        target = f"s{index + 1}" if index + 1 < steps else "end"
        label = draw(st.sampled_from(_LABELS)).replace('"', '\\"')
        fields = ["by buyer"]
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            amount = draw(st.sampled_from([*money, *(f"{p} - 1.00" for p in money), "2.50"]))
            source = draw(st.sampled_from(["w", *accounts]))
            others = [a for a in accounts if a != source]
            shape = draw(st.sampled_from(["single", "percents", "amounts"]))
            if shape == "single" or len(others) < 2:
                fields.append(f"transfer {amount} from {source} to {draw(st.sampled_from(others))}")
                continue
            first, rest = draw(st.permutations(others))[:2]
            share = draw(st.sampled_from(["10%", "33.3333%", percent] if shape == "percents" else ["1.50", *money]))
            fields.append(f"transfer {amount} from {source} {{ {share} to {first}  remaining to {rest} }}")
        lines.append(f'clause "{label}" transition {name}: s{index} -> {target} {{ {"  ".join(fields)} }}')
    values: dict[str, int | Fraction] = {p: draw(st.integers(min_value=1000, max_value=2000)) for p in money}
    values[percent] = Fraction(draw(st.integers(min_value=0, max_value=400_000)), 1_000_000)
    return "\n".join(lines) + "\n", values


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_policy())
def test_random_policies_over_hostile_names_compile_and_move_what_the_table_says(
    case: tuple[str, dict[str, int | Fraction]],
) -> None:
    text, values = case
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        files = _compile(text)
    assert _trace_problems(files) == []
    schema = load_json(files["events.schema.json"])
    assert len({r["$ref"] for r in schema["oneOf"]}) == len(schema["oneOf"])
    _run_and_compare(files, values)
    formatted = format_policy(text)
    assert format_policy(formatted) == formatted
    assert _ok(formatted).candidate == _ok(text).candidate


def test_an_adversarial_policy_compiles_to_the_same_bytes_under_other_hash_seeds(tmp_path: Path) -> None:
    text = HEAD + (
        'effect e { risk R1 scopes "b", "a", "b" egress POST "https://x" egress GET "https://x" key price\n'
        "  amount price }\n"
        "param kind: one of zeta, alpha, mid\n"
        "param transfer_0: money between 1.00 and 2.00\n"
        "rule R1 allow\n"
        "default deny\n"
        'clause "²" transition t: open -> done { by buyer, timer call e transfer price - 1 from world to escrow\n'
        "  transfer transfer_0 from world to seller }\n"
    )
    policy = tmp_path / "p.pact"
    policy.write_text(text)
    outputs = []
    for seed in ("1", "2"):
        out = tmp_path / f"out{seed}"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run(
            [sys.executable, "-m", "pactwright.cli.main", "compile", str(policy), "-o", str(out)],
            env=env,
            check=True,
            capture_output=True,
        )
        outputs.append({p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert outputs[0] == outputs[1]
    manifest = json.loads(outputs[0]["manifest.json"])
    assert {entry["path"] for entry in manifest["artifacts"]} == set(outputs[0]) - {"manifest.json"}


# --- names ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("declaration", "field"),
    [('param late: text matching "[a-z]+"\n', ""), ("", "stamp late ")],
)
def test_a_one_of_value_that_is_also_a_param_or_stamp_is_refused(declaration: str, field: str) -> None:
    """`reason == late` compared `reason` with a param `late`, not with the value `late`."""
    text = HEAD + "param reason: one of late, early\n" + declaration
    text += f"transition t: open -> done {{ by buyer {field}when reason == late }}\n"
    result = _check(text)
    assert ("PW121", 11, 22) in [(d.code, d.span.line, d.span.column) for d in result.blockers]
    assert result.candidate is None


def test_fmt_of_a_policy_with_a_huge_currency_scale_is_a_diagnostic_not_a_crash() -> None:
    text = HEAD.replace("scale 2", "scale " + "9" * 5000) + "transition t: open -> done { by buyer }\n"
    assert format_policy(text) == format_policy(format_policy(text))
    assert "PW138" in _codes(text)


@pytest.mark.parametrize(
    ("guard", "warned"),
    [
        ("now >= s + 1d", True),
        ("now - s >= 1d", True),  # used to be missed
        ("1d <= now - s", True),  # used to be missed
        ("now - 1d >= s", True),  # used to be missed
        ("not (now < s + 1d)", True),  # used to be missed
        ("now < s + 1d implies final", True),  # used to be missed
        ("now < s + 1d", False),
        ("now - s < 1d", False),
        ("not (now >= s + 1d)", False),
    ],
)
def test_every_spelling_of_a_deadline_without_a_clock_is_warned_about(guard: str, warned: bool) -> None:
    text = HEAD.replace("state done final", "state mid\nstate done final")
    text += f"transition a: open -> mid {{ by buyer stamp s }}\ntransition t: mid -> done {{ by buyer when {guard} }}\n"
    assert (_codes(text) == ["PW151"]) is warned


def test_an_added_transition_shows_its_approval_and_stamps_in_the_diff() -> None:
    base = HEAD.replace("state done final", "state mid\nstate done final")
    base += "transition a: open -> mid { by buyer }\ntransition b: mid -> done { by buyer }\n"
    old = _ok(base).candidate
    added = "transition c: mid -> done { by buyer stamp late approval by buyer not requester }\n"
    new = _ok(base + added).candidate
    assert old is not None and new is not None
    text = render_diff_text(semantic_diff(old.to_json(), new.to_json()))
    assert "stamp late" in text and "approval by buyer not requester" in text, text


# `amount` is a contextual keyword ------------------------------------------------------------

_AMOUNT_EVERYWHERE = """pact "amounts" version "1"
currency EUR scale 2
default deny
role amount
param amount: money between 1.00 and 9.00
param ref: one of amount_a, amount_b
account world "world" external
account shop "shop:{amount}"
rule R1 allow
effect amount {
  risk R1
  reversibility irreversible
  key ref, amount
  amount amount
  consequence "{amount} for {ref}"
}
effect undo { risk R1 reversibility reversible }
effect other { risk R1 reversibility compensable strategy compensate with undo }
state amount initial
state done final
clause "1" transition go: amount -> done {
  by amount
  when amount >= 1.00
  stamp amount_at
  call amount
  call other amount amount + 1.00
  transfer amount from world to shop
}
invariant amount_ok: applied(amount) <= 1 and total(other) >= 0
"""


def test_amount_is_a_name_wherever_a_name_may_stand() -> None:
    result = check_text(_AMOUNT_EVERYWHERE)
    assert result.candidate is not None, [
        f"{d.code} {d.span.line}:{d.span.column} {d.message}" for d in result.diagnostics
    ]
    data = result.candidate.to_json()
    effect = next(e for e in data["effects"] if e["name"] == "amount")  # type: ignore[union-attr]
    assert effect["key"] == ["amount", "ref"]
    assert effect["amount"]["name"] == "amount"
    go = data["transitions"][0]  # type: ignore[index]
    assert go["calls"][0] == "amount"
    assert go["calls"][1]["effect"] == "other"


def test_amount_is_not_a_reserved_word_and_since_1_1_nor_most_others() -> None:
    from pactwright.compiler.parser import CONTEXTUAL_KEYWORDS, grammar_words, keywords

    assert "amount" in CONTEXTUAL_KEYWORDS
    assert "amount" not in keywords()
    assert {"call", "key", "effect"} <= grammar_words() - keywords()
    result = check_text(HEAD.replace("role buyer", "role key").replace("by buyer", "by key"))
    assert "PW109" not in {d.code for d in result.diagnostics}
    result = check_text(HEAD + "param now: money between 0.00 and 1.00\n")
    assert "PW109" in {d.code for d in result.diagnostics}


def test_a_key_list_ending_in_amount_is_followed_by_an_amount_field() -> None:
    """`key a, amount` then `amount amount`: the list ends where a name cannot follow a name."""
    text = _AMOUNT_EVERYWHERE.replace("  key ref, amount\n  amount amount\n", "  key ref, amount amount amount\n")
    first, second = check_text(_AMOUNT_EVERYWHERE).candidate, check_text(text).candidate
    assert first is not None and second is not None
    assert first.hash() == second.hash()


def test_an_amount_field_without_an_expression_is_a_syntax_error_not_a_name() -> None:
    text = _AMOUNT_EVERYWHERE.replace("  amount amount\n", "  amount\n")
    result = check_text(text)
    assert result.candidate is None
    assert [d.code for d in result.diagnostics] == ["PW100"]


def test_a_misspelt_amount_field_is_an_unknown_keyword() -> None:
    text = _AMOUNT_EVERYWHERE.replace("  amount amount\n", "  amuont amount\n")
    result = check_text(text)
    assert [d.code for d in result.diagnostics] == ["PW108"]
    assert "did you mean `amount`?" in result.diagnostics[0].hint


def test_the_formatter_keeps_every_amount_a_name_or_a_keyword_as_it_was() -> None:
    formatted = format_policy(_AMOUNT_EVERYWHERE)
    assert format_policy(formatted) == formatted
    first, second = check_text(_AMOUNT_EVERYWHERE).candidate, check_text(formatted).candidate
    assert first is not None and second is not None
    assert first.canonical_bytes() == second.canonical_bytes()
    assert "  call other amount amount + 1.00\n" in formatted
