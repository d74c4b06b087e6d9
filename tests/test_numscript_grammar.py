"""The two Numscript parsers: the runtime's hand-written one and the compiler's lark grammar.

They are independent implementations of one subset; these tests hold them to
the same accept/reject answer (a differential test, on a fixed corpus and on
generated programs) and check that each refusal says where and what.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pactwright.compiler.numscript_grammar import validate_numscript
from pactwright.errors import CompileError, LedgerError, PactwrightError
from pactwright.runtime.numscript import parse_program

VALID = [
    "",
    "// nothing but a comment\n",
    "send [EUR/2 100] ( source = @world destination = @escrow:a1 )",
    textwrap.dedent(
        """\
        vars {
          monetary $price
          account $escrow
          account $seller
        }
        send [EUR/2 $price] (
          source = $escrow
          destination = {
            10% to @platform:fees
            remaining to $seller
          }
        )
        """
    ),
    "vars { number $amount }\nsend [EUR/2 $amount] ( source = @world destination = @a )",
    "vars { monetary $m }\nsend $m ( source = @a allowing overdraft up to $m destination = @b )",
    "send [EUR/2 1] ( source = @merchant:refunds allowing unbounded overdraft destination = @buyer_1 )",
    "send [EUR/2 1] ( source = @a allowing overdraft up to [EUR/2 500] destination = @b )",
    "send [EUR/2 1] ( source = @a destination = { max [EUR/2 500] to @platform:fees remaining to @seller } )",
    "send [EUR/2 1] ( source = @a destination = { remaining to @b } )",
    "send [EUR/2 1] ( source = @a destination = { 2.5% to @b 1/3 to @c 1 / 6 to @d remaining to @e } )",
    "send [EUR/2 1] ( source = @a destination = { 50% to @b 50% to @c } )",
    "send [EUR/2 1] ( source = @a destination = { 50% to { max [EUR/2 1] to @x remaining to @y } remaining to @c } )",
    "vars { portion $p }\nsend [X 1] ( source = @a destination = { $p to @b remaining to @c } )",
    "send [X 1] ( source = @a destination = @b )\nsend [X 2] ( source = @b destination = @c )",
    "send/**/[X 1](source=@a destination=@b)/* trailing */",
    "send [X 1] ( source = @a-b_c:D-9 destination = @world )",
    "send [X 99999999999999999999999999999999] ( source = @world destination = @a )",
]

# source, the runtime's code, line, column: both parsers must refuse with this position.
MALFORMED = [
    ("send [EUR/2 100] (\n  source = @a\n  destination = @b\n", "PW751", 4, 1),
    ("send [EUR/2 100] (\n  source = @a\n  destinaton = @b\n)", "PW751", 3, 3),
    ("send [EUR/2 100] (\n  source = @a\n  destination = { 60% to @b 50% to @c }\n)", "PW756", 3, 17),
    ("send [EUR/2 100] (\n  source = @a\n  destination = { 60% to @b }\n)", "PW756", 3, 17),
    ("send [EUR/2 1] ( source = @a destination = { remaining to @b 10% to @c } )", "PW751", 1, 61),
    ("send [EUR/2 1] ( source = @a destination = { 10% to @b max [EUR/2 3] to @c remaining to @d } )", "PW751", 1, 56),
    ("send [EUR/2 -100] ( source = @a destination = @b )", "PW751", 1, 13),
    ("send [eur 100] ( source = @a destination = @b )", "PW751", 1, 7),
    ("send [EUR/2 100] ( source = a destination = @b )", "PW751", 1, 29),
    ("send [EUR/2 1] ( source = @a destination = { 1/0 to @b remaining to @c } )", "PW756", 1, 46),
    ("send [EUR/2 1] ( source = @a destination = {} )", "PW751", 1, 45),
    ("send [EUR/2 1] ( source = @a allowing overdraft destination = @b )", "PW751", 1, 49),
    ("send [EUR/2 1] ( source = @a destination = @b ) send", "PW751", 1, 53),
    ("send [EUR/2 1] ( source = @a destination = { remainingto @b } )", "PW751", 1, 46),
    ("vars { monetary $x }\nsend $y ( source = @a destination = @b )", "PW753", 2, 6),
    ("vars { portion $p }\nsend $p ( source = @a destination = @b )", "PW753", 2, 6),
    ("vars { account $a }\nsend [X 1] ( source = @a destination = { $a to @b remaining to @c } )", "PW753", 2, 42),
]

UNSUPPORTED = [
    "send [EUR/2 *] ( source = @a destination = @b )",
    "save [EUR/2 100] from @a",
    'set_tx_meta("k", 1)',
    "send [EUR/2 1] ( source = @a destination = { 50% kept remaining to @b } )",
    "send [EUR/2 1] ( source = { @a @b } destination = @c )",
    "send [EUR/2 1] ( source = max [EUR/2 1] from @a destination = @c )",
    "vars { asset $a }",
    "vars { string $s }",
    "vars { monetary $m = balance(@a, EUR/2) }",
    "send [EUR/2 1_000] ( source = @a destination = @b )",
    "vars { number $id }\nsend [EUR/2 1] ( source = @a:$id destination = @b )",
    "send [EUR/2 1] ( source = @a destination = @b ) /* a /* b */ */",
    "send [EUR/2 1] ( source = @a destination = oneof { max [EUR/2 1] to @b remaining to @c } )",
    "#! feature\nsend [EUR/2 1] ( source = @a destination = @b )",
    "send [EUR/2 1] ( source = @a destination = @b if 1 else @c )",
]


def runtime_accepts(source: str) -> bool:
    try:
        parse_program(source)
    except LedgerError:
        return False
    return True


def compiler_accepts(source: str) -> bool:
    try:
        validate_numscript(source)
    except CompileError as exc:
        if exc.code != "PW210":
            raise
        return False
    return True


@pytest.mark.parametrize("source", VALID)
def test_valid_programs_are_accepted_by_both(source: str) -> None:
    parse_program(source)
    validate_numscript(source)


@pytest.mark.parametrize(("source", "code", "line", "column"), MALFORMED)
def test_malformed_programs_are_refused_by_both_with_their_position(
    source: str, code: str, line: int, column: int
) -> None:
    position = re.compile(r"line (\d+), column (\d+)")
    with pytest.raises(LedgerError) as runtime:
        parse_program(source)
    with pytest.raises(CompileError) as compiler:
        validate_numscript(source)
    assert runtime.value.code == code
    assert compiler.value.code == "PW210"
    for error in (runtime.value, compiler.value):
        match = position.search(error.message)
        assert match is not None, error.message
        assert int(match[1]) == line
        assert abs(int(match[2]) - column) <= 1, error.message  # one parser points at `[`, the other inside
        assert "\n" not in error.message


def test_syntax_errors_say_what_was_expected() -> None:
    source = "send [EUR/2 100] (\n  source = @a\n  destinaton = @b\n)"
    with pytest.raises(LedgerError) as runtime:
        parse_program(source)
    with pytest.raises(CompileError) as compiler:
        validate_numscript(source)
    for error in (runtime.value, compiler.value):
        assert "expected" in error.message
        assert "`destination`" in error.message
        assert "`destinaton`" in error.message
    assert compiler.value.expected is not None
    assert "`destination`" in compiler.value.expected


@pytest.mark.parametrize("source", UNSUPPORTED)
def test_unsupported_numscript_is_refused_by_both(source: str) -> None:
    with pytest.raises(LedgerError) as runtime:
        parse_program(source)
    assert runtime.value.code == "PW752", runtime.value.message
    assert "not supported" in runtime.value.message
    assert not compiler_accepts(source)


def test_number_beyond_the_digit_limit_is_refused_by_both() -> None:
    source = f"send [X {'9' * 5000}] ( source = @world destination = @a )"
    assert not runtime_accepts(source)
    assert not compiler_accepts(source)


def test_reindenting_a_program_does_not_change_it() -> None:
    assert parse_program(VALID[3]) == parse_program(" ".join(VALID[3].split()))


# -- differential -------------------------------------------------------------------

CORPUS = VALID + [row[0] for row in MALFORMED] + UNSUPPORTED


def _mutations(source: str) -> list[str]:
    """Every program one deletion, duplication or swap of a token away."""
    tokens = source.split()
    out = []
    for i in range(len(tokens)):
        out.append(" ".join(tokens[:i] + tokens[i + 1 :]))
        out.append(" ".join(tokens[: i + 1] + tokens[i:]))
        if i + 1 < len(tokens):
            swapped = [*tokens[:i], tokens[i + 1], tokens[i], *tokens[i + 2 :]]
            out.append(" ".join(swapped))
    return out


MUTANTS = sorted({m for source in VALID[2:14] for m in _mutations(source)})


@pytest.mark.parametrize("source", CORPUS)
def test_parsers_agree_on_the_corpus(source: str) -> None:
    assert runtime_accepts(source) == compiler_accepts(source)


def test_parsers_agree_on_every_single_token_mutation() -> None:
    disagreements = [m for m in MUTANTS if runtime_accepts(m) != compiler_accepts(m)]
    assert len(MUTANTS) > 500
    assert disagreements == []


FRAGMENTS = [
    "send", "vars", "{", "}", "(", ")", "[", "]", "=", "/", "%", "source", "destination", "to", "max",
    "remaining", "allowing", "unbounded", "overdraft", "up", "kept", "monetary", "account", "portion",
    "number", "$m", "$a", "$p", "$n", "@a", "@b:c", "@world", "EUR/2", "X", "0", "1", "3", "100", "10%",
    "2.5%", "1/3", "1/0", "//c\n", "/*c*/", "\n", "remainingto", "@", "$", "-", "*",
]  # fmt: skip

DECLS = "vars { monetary $m account $a portion $p number $n }\n"


@settings(max_examples=400, deadline=None)
@given(
    body=st.lists(st.sampled_from(FRAGMENTS), max_size=30),
    declared=st.booleans(),
    glue=st.sampled_from([" ", ""]),
)
def test_parsers_agree_on_generated_token_soup(body: list[str], declared: bool, glue: str) -> None:
    source = (DECLS if declared else "") + glue.join(body)
    assert runtime_accepts(source) == compiler_accepts(source), source


send_amount = st.sampled_from(["[X 1]", "[X $n]", "[X $m]", "$m", "[Y 1]", "[X $a]"])
account = st.sampled_from(["@a", "$a", "@world", "$p"])
cap = st.sampled_from(["[X 5]", "$m", "[Y 5]", "[X $n]"])
portion = st.sampled_from(["10%", "50%", "60%", "1/3", "2/3", "$p", "1/0", "100%", "0%"])


@st.composite
def destinations(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["account", "allotment", "inorder"] if depth < 2 else ["account"]))
    if kind == "account":
        return draw(account)
    if kind == "allotment":
        clauses = [f"{draw(portion)} to {draw(destinations(depth + 1))}" for _ in range(draw(st.integers(1, 3)))]
        if draw(st.booleans()):
            clauses.append(f"remaining to {draw(destinations(depth + 1))}")
        return "{ " + " ".join(clauses) + " }"
    clauses = [f"max {draw(cap)} to {draw(destinations(depth + 1))}" for _ in range(draw(st.integers(0, 2)))]
    return "{ " + " ".join([*clauses, f"remaining to {draw(destinations(depth + 1))}"]) + " }"


@settings(max_examples=300, deadline=None)
@given(
    amount=send_amount,
    source=account,
    overdraft=st.sampled_from(["", " allowing unbounded overdraft", " allowing overdraft up to ", ""]),
    bound=cap,
    destination=destinations(),
)
def test_parsers_agree_on_generated_programs(
    amount: str, source: str, overdraft: str, bound: str, destination: str
) -> None:
    suffix = overdraft + (bound if overdraft.endswith("to ") else "")
    program = f"{DECLS}send {amount} ( source = {source}{suffix} destination = {destination} )"
    assert runtime_accepts(program) == compiler_accepts(program), program


# -- the runtime stays free of the compiler's dependencies ----------------------------


def test_runtime_imports_without_lark_jinja2_networkx_or_z3() -> None:
    code = textwrap.dedent(
        """
        import sys
        for name in ("lark", "jinja2", "networkx", "z3"):
            sys.modules[name] = None  # any import of them now fails
        from pactwright.runtime.ledger import InMemoryLedger
        from pactwright.runtime.numscript import parse_program
        from pactwright.runtime.numscript.cli_support import run_from_json
        ledger = InMemoryLedger()
        ledger.apply("r1", parse_program("send [X 1] ( source = @world destination = @a )"), {})
        assert ledger.balance("a", "X") == 1
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_every_refusal_is_a_one_line_pactwright_error() -> None:
    messages: list[str] = []
    for source in [*CORPUS, *MUTANTS]:
        for check in (parse_program, validate_numscript):
            try:
                check(source)
            except PactwrightError as exc:  # anything else escapes and fails the test
                messages.append(exc.message)
    assert len(messages) > 500
    assert [m for m in messages if "\n" in m or m != m.strip() or not m[0].islower()] == []
