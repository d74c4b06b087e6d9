"""Hostile input ends in diagnostics, never in a traceback, and in reasonable time.

Every input goes through `check_bytes` in-process and, for a corpus of them,
through the real `pactwright check` process (text and `--format json`).
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pactwright.canonical import is_hash
from pactwright.codes import CODES
from pactwright.compiler.parser import grammar_words
from pactwright.compiler.pipeline import MAX_POLICY_BYTES, CheckResult, check_bytes
from tests.conftest import REFERENCE_POLICIES

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEADER = b'pact "hostile" version "1.0.0"\ncurrency EUR scale 2\n'
SKELETON = HEADER + b"role a\nstate s initial\nstate e final\ntransition go: s -> e { by a }\n"
REFERENCES = [path.read_bytes() for path in REFERENCE_POLICIES]


def assert_well_formed(data: bytes, result: CheckResult) -> None:
    """Diagnostics (or a candidate) with documented codes, one-line text and spans inside the file."""
    assert result.diagnostics or result.candidate is not None
    if result.candidate is None:
        assert result.blockers, "no candidate but no blocker either"
    else:
        assert is_hash(result.candidate.hash())
    lines = data.count(b"\n") + data.count(b"\r") + 1
    for diagnostic in result.diagnostics:
        assert diagnostic.code in CODES, diagnostic.code
        assert diagnostic.message and "\n" not in diagnostic.message
        assert diagnostic.hint and "\n" not in diagnostic.hint
        span = diagnostic.span
        assert 1 <= span.line <= lines, (span, lines)
        assert span.column >= 1 and (span.end_line, span.end_column) >= (span.line, span.column)


def check(data: bytes) -> CheckResult:
    result = check_bytes(data)
    assert_well_formed(data, result)
    return result


def codes(data: bytes) -> list[str]:
    return [d.code for d in check(data).diagnostics]


# --- fixed hostile inputs ------------------------------------------------------------------

_NESTED_PARENS = SKELETON + b"invariant i: " + b"(" * 10_000 + b"1 > 0" + b")" * 10_000 + b"\n"
_NESTED_NOTS = SKELETON + b"invariant i: " + b"not " * 10_000 + b"1 > 0\n"
_NESTED_IMPLIES = SKELETON + b"invariant i: 1 > 0" + b" implies 1 > 0" * 10_000 + b"\n"
_NESTED_NEGATIONS = SKELETON + b"invariant i: " + b"-" * 10_000 + b"1 > 0\n"
_LONG_SUM = SKELETON + b"invariant i: 1" + b" + 1" * 10_000 + b" > 0\n"

HOSTILE: dict[str, tuple[bytes, str | None]] = {
    # name: (bytes, a code the result must contain, or None when it must pass)
    "empty": (b"", "PW111"),
    "whitespace": (b" \t\n\r\n   \n", "PW111"),
    "comment_only": (b"# just a comment\n# and another", "PW111"),
    "binary": (bytes(range(256)) * 64, "PW110"),
    "invalid_utf8": (SKELETON + b"role \xc3\x28\n", "PW110"),
    "truncated_utf8": (SKELETON + b"# caf\xc3", "PW110"),
    "utf16": ("pact".encode("utf-16"), "PW110"),
    "nul_byte": (SKELETON + b"role b\x00\n", "PW110"),
    "bom": (b"\xef\xbb\xbf" + SKELETON, None),
    "bom_twice": (b"\xef\xbb\xbf\xef\xbb\xbf" + SKELETON, "PW101"),
    "bom_inside": (SKELETON + b"\xef\xbb\xbfrole b\n", "PW101"),
    "ten_megabytes": (SKELETON + b"# " + b"x" * (10 * 1024 * 1024) + b"\n", "PW114"),
    "just_over_the_limit": (b"#" * (MAX_POLICY_BYTES + 1), "PW114"),
    "nested_parentheses_10k": (_NESTED_PARENS, None),
    "unbalanced_parentheses_10k": (SKELETON + b"invariant i: " + b"(" * 10_000 + b"\n", "PW100"),
    "nested_not_10k": (_NESTED_NOTS, "PW113"),
    "nested_implies_10k": (_NESTED_IMPLIES, "PW113"),
    "nested_negation_10k": (_NESTED_NEGATIONS, "PW113"),
    # New in 1.1: a flat chain is not nesting (PW113) but too long a chain is PW187.
    "sum_of_10k_terms": (_LONG_SUM, "PW187"),
    "long_name": (SKELETON + b"role " + b"r" * 1_000_000 + b"\n", "PW189"),
    "long_string": (SKELETON + b'account z "' + b"a" * 1_000_000 + b'"\n', "PW189"),
    "long_bad_string": (SKELETON + b'account z "' + b"a b" * 300_000 + b'"\n', "PW141"),
    "long_comment": (SKELETON + b"#" + b"x" * 2_000_000 + b"\n", None),
    "long_number": (SKELETON + b"param p: money = " + b"9" * 1_000_000 + b"\n", "PW104"),
    "long_money_scale": (SKELETON + b"param p: money = 1." + b"0" * 100_000 + b"\n", "PW104"),
    "huge_currency_scale": (SKELETON.replace(b"scale 2", b"scale " + b"9" * 5000), "PW138"),
    "int_beyond_2_53": (SKELETON + b"budget { max_turns 9007199254740992 }\n", "PW139"),
    "long_line_of_tokens": (SKELETON + b"role b " * 10_000 + b"\n", "PW121"),
    "cr_only_line_endings": (REFERENCES[0].replace(b"\n", b"\r"), None),
    "crlf_line_endings": (REFERENCES[0].replace(b"\n", b"\r\n"), None),
    "form_feeds_and_tabs": (SKELETON.replace(b" ", b"\t\x0c"), None),
    "vertical_tab": (SKELETON + b"role\x0bb\n", "PW101"),
    "bidi_override_in_comment": (SKELETON + "# \u202e}\n".encode(), "PW101"),
    "bidi_isolate_in_string": (SKELETON + 'account z "a\u2066b"\n'.encode(), "PW101"),
    "line_separator_in_comment": (SKELETON + "# x\u2028role b\n".encode(), "PW101"),
    "zero_width_space": (SKELETON + "role\u200bb\n".encode(), "PW101"),
    "control_characters": (SKELETON + b"role \x01\x02\x1b[31m\n", "PW101"),
    "lone_surrogate_escape": (SKELETON + b'account z "\\ud800"\n', "PW103"),
    "malformed_percent_in_split": (
        SKELETON + b'account x "x"\nparam f: percent = 3.3.3%\n'
        b"transition t: s -> e { by a transfer 1.00 from x { f to x remaining to x } }\n",
        "PW106",
    ),
    "only_a_header": (HEADER, "PW122"),
    "header_twice": (SKELETON + SKELETON, "PW112"),
    "keyword_soup": (b" ".join(sorted(k.encode() for k in grammar_words())), "PW100"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_ends_in_diagnostics(name: str) -> None:
    data, code = HOSTILE[name]
    result = check(data)
    if code is None:
        assert result.candidate is not None, [(d.code, d.message) for d in result.diagnostics]
    else:
        assert code in [d.code for d in result.diagnostics], [(d.code, d.message) for d in result.diagnostics]
        assert result.candidate is None


def test_bom_is_ignored() -> None:
    plain = check(REFERENCES[0]).candidate
    with_bom = check(b"\xef\xbb\xbf" + REFERENCES[0]).candidate
    assert plain is not None and with_bom is not None
    assert plain.hash() == with_bom.hash()


def test_line_endings_do_not_change_the_meaning() -> None:
    hashes = set()
    for ending in (b"\n", b"\r\n", b"\r"):
        candidate = check(REFERENCES[0].replace(b"\n", ending)).candidate
        assert candidate is not None
        hashes.add(candidate.hash())
    assert len(hashes) == 1


def test_a_lone_cr_cannot_hide_a_declaration_in_a_comment() -> None:
    """Editors show `# x\\rrole b` as two lines; the compiler must read two lines too."""
    result = check(SKELETON + b"# looks like a comment\rrole a\n")
    assert [d.code for d in result.diagnostics] == ["PW121"]


def test_hundred_thousand_declarations() -> None:
    body = b"".join(b"role r%d\n" % i for i in range(100_000))
    start = time.perf_counter()
    result = check(SKELETON + body)
    elapsed = time.perf_counter() - start
    assert result.candidate is not None
    assert len(result.candidate.roles) == 100_001
    assert elapsed < 60, f"{elapsed:.1f}s"


def test_many_unknown_names_stay_linear() -> None:
    """Fuzzy suggestions against big tables were quadratic (seconds per thousand names)."""
    n = 5_000
    body = b"".join(b"role r%d\n" % i for i in range(n))
    body += b"".join(b"transition t%d: s -> e { by q%d }\n" % (i, i) for i in range(n))
    body += b"".join(b"invariant i%d: w%d > 0\n" % (i, i) for i in range(n))
    start = time.perf_counter()
    found = codes(SKELETON + body)
    elapsed = time.perf_counter() - start
    assert found.count("PW120") == 2 * n
    assert elapsed < 15, f"{elapsed:.1f}s"


def test_many_calls_with_ceilings_stay_linear() -> None:
    n = 5_000
    body = b'default deny\nrule R1 allow\naccount x "x" external\naccount y "y"\n'
    body += b"param p: money between 1.00 and 2.00\neffect f { risk R1 ceiling 1.00 amount p }\n"
    body += b"".join(b"transition t%d: s -> e { by a call f transfer p from x to y }\n" % i for i in range(n))
    start = time.perf_counter()
    assert codes(SKELETON + body) == ["PW152"]
    assert time.perf_counter() - start < 15


# --- generated input ------------------------------------------------------------------------

_PUNCTUATION = ["{", "}", "(", ")", ",", ":", "->", "==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "=", "#"]
_WORDS = [*sorted(grammar_words()), "a", "s", "e", "go", "x", "price", "R1", "R9", "EUR", "GET"]
_LITERALS = [
    "0",
    "1",
    "12.50",
    "12.505",
    "10%",
    "2.55555%",
    "14d",
    "1d12h",
    "1h1d",
    "12x",
    '"s"',
    '"{agreement}"',
    '"\\q"',
    '"',
]
_TOKEN = st.sampled_from(_PUNCTUATION + _WORDS + _LITERALS)
_GAP = st.sampled_from([" ", " ", "\n", "", "\t", "\r"])


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    check(data)


@FUZZ
@given(st.text(max_size=2000))
def test_random_text(text: str) -> None:
    check(text.encode("utf-8", errors="surrogatepass"))


@FUZZ
@given(st.booleans(), st.lists(st.tuples(_TOKEN, _GAP), max_size=200))
def test_token_soup(with_header: bool, soup: list[tuple[str, str]]) -> None:
    text = "".join(token + gap for token, gap in soup)
    check((SKELETON if with_header else b"") + text.encode())


@st.composite
def mutated_reference(draw: st.DrawFn) -> bytes:
    """A reference policy after a few deletions, insertions, swaps and duplications."""
    data = bytearray(draw(st.sampled_from(REFERENCES)))
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["delete", "insert", "swap", "duplicate", "byte"]))
        at = draw(st.integers(0, len(data)))
        if kind == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif kind == "insert":
            piece = draw(_TOKEN | st.text(max_size=4))
            data[at:at] = (" " + piece + " ").encode("utf-8", errors="surrogatepass")
        elif kind == "swap":
            other = draw(st.integers(0, len(data)))
            lo, hi = sorted((at, other))
            size = draw(st.integers(1, 20))
            first, second = bytes(data[lo : lo + size]), bytes(data[hi : hi + size])
            if lo + size <= hi:
                data[hi : hi + size] = first
                data[lo : lo + size] = second
        elif kind == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 200))]
        elif data:
            data[min(at, len(data) - 1)] = draw(st.integers(0, 255))
    return bytes(data)


@FUZZ
@given(mutated_reference())
def test_mutated_reference_policies(data: bytes) -> None:
    check(data)


# Well-formed policies over a small pool of names, so that references sometimes
# resolve: this reaches the checks, the typer and the normalizer, not just the parser.
_NAME = st.sampled_from(["a", "b", "s", "e", "q", "x", "y", "p", "f", "t0", "go"])
_UPPER = st.sampled_from(["R1", "R2", "R4", "R9", "EUR", "GET", "X"])
_NUMBER = st.sampled_from(["0", "1", "12.5", "0.01", "1.005", "10%", "60%", "2.5%", "14d", "1d12h", "12x", "3"])
_STRING = st.sampled_from(['"x"', '"world"', '"a:{agreement}"', '"a:{p}"', '"(["', '"a b"', '""'])


def _expr(depth: int = 2) -> st.SearchStrategy[str]:
    call = st.builds(
        "{}({})".format, st.sampled_from(["balance", "applied", "fired", "total", "reached", "approved"]), _NAME
    )
    leaf = st.one_of(_NUMBER, _NAME, _STRING, st.sampled_from(["now", "final"]), call)
    if depth == 0:
        return leaf
    sub = _expr(depth - 1)
    ops = st.sampled_from(["+", "-", "*", "/", "==", "!=", "<", ">=", "and", "or", "implies"])
    return st.one_of(
        leaf, st.builds("{} {} {}".format, sub, ops, sub), sub.map("not ({})".format), sub.map("-{}".format)
    )


_FIELD = st.one_of(
    st.lists(_NAME, min_size=1, max_size=3).map(lambda n: "by " + ", ".join(n)),
    _expr().map("when {}".format),
    _NAME.map("stamp {}".format),
    st.builds("transfer {} from {} to {}".format, _expr(1), _NAME, _NAME),
    st.builds(
        "transfer {} from {} {{ {} remaining to {} }}".format,
        _expr(0),
        _NAME,
        st.lists(st.builds("{} to {}".format, _NUMBER | _NAME, _NAME), max_size=3).map(" ".join),
        _NAME,
    ),
    _NAME.map("call {}".format),
    _NAME.map("approval by {} not requester".format),
)
_EFFECT_FIELD = st.one_of(
    _UPPER.map("risk {}".format),
    st.sampled_from(["reversibility irreversible", "strategy retry", "strategy reconcilable", "max_calls 0"]),
    _NAME.map("strategy compensate with {}".format),
    st.builds("{} {}".format, st.sampled_from(["max_calls", "timeout", "ceiling"]), _NUMBER),
    _NAME.map("key {}".format),
    _STRING.map("consequence {}".format),
)
_DECLARATION = st.one_of(
    st.just("default deny"),
    st.builds("role {}{}".format, _NAME, st.sampled_from(["", " untrusted"])),
    _NAME.map("clock {}".format),
    st.builds("param {}: money between {} and {}".format, _NAME, _NUMBER, _NUMBER),
    st.builds("param {}: percent = {}".format, _NAME, _NUMBER),
    st.builds("param {}: duration = {}".format, _NAME, _NUMBER),
    st.builds("param {}: one of {}, {}".format, _NAME, _NAME, _NAME),
    st.builds("account {} {}{}".format, _NAME, _STRING, st.sampled_from(["", " external"])),
    st.builds("budget {{ ceiling {} max_turns {} }}".format, _NUMBER, _NUMBER),
    st.builds("rule {} {}".format, _UPPER, st.sampled_from(["allow", "require_approval", "deny"])),
    st.builds("effect {} {{ {} }}".format, _NAME, st.lists(_EFFECT_FIELD, max_size=4).map(" ".join)),
    st.builds("state {} {}".format, _NAME, st.sampled_from(["", "initial", "final", "final final"])),
    st.builds(
        'clause "1" transition {}: {} -> {} {{ {} }}'.format,
        _NAME,
        _NAME,
        _NAME,
        st.lists(_FIELD, max_size=5).map(" ".join),
    ),
    st.builds("invariant {}: {}".format, _NAME, _expr()),
)


@FUZZ
@given(st.lists(_DECLARATION, max_size=12))
def test_random_well_formed_policies(declarations: list[str]) -> None:
    check(SKELETON + "\n".join(declarations).encode() + b"\n")


# --- the real CLI process -------------------------------------------------------------------

_DIAGNOSTIC_KEYS = {"code", "severity", "line", "column", "end_line", "end_column", "message", "hint"}


# Thousands of diagnostics on one very long line: the text renderer's caret
# lines are not cut (see `test_cli_text_output_stays_small`), so these are
# checked in-process and through JSON only.
_TOO_MUCH_FOR_TEXT = {"long_line_of_tokens", "long_number", "long_money_scale"}


def _corpus(directory: Path, *, for_text: bool = False) -> list[Path]:
    """Every fixed hostile input plus seeded random mutations, written to files."""
    rng = random.Random(8785)
    files = []
    for name, (data, _) in sorted(HOSTILE.items()):
        if for_text and name in _TOO_MUCH_FOR_TEXT:
            continue
        files.append(directory / f"{name}.pact")
        files[-1].write_bytes(data)
    for index in range(60):
        data = bytearray(rng.choice(REFERENCES))
        for _ in range(rng.randint(1, 5)):
            at = rng.randrange(len(data))
            if rng.random() < 0.5:
                del data[at : at + rng.randint(1, 30)]
            else:
                data[at:at] = rng.choice(_PUNCTUATION + _WORDS + _LITERALS).encode() + b" "
        files.append(directory / f"mutant{index:02d}.pact")
        files[-1].write_bytes(bytes(data))
    for path in REFERENCE_POLICIES:
        files.append(directory / path.name)
        files[-1].write_bytes(path.read_bytes())
    return files


def _run(cli: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(cli), "check", *args], capture_output=True, text=True, errors="replace", timeout=300, check=False
    )
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output[-3000:]
    assert "internal error" not in output, output[-3000:]
    assert done.returncode in (0, 1, 2), (done.returncode, output[-3000:])
    return done


def test_cli_json_over_a_hostile_corpus(cli: Path, tmp_path: Path) -> None:
    files = _corpus(tmp_path)
    done = _run(cli, "--format", "json", *map(str, files))
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert set(report) == {"files"}
    assert [entry["file"] for entry in report["files"]] == [str(f) for f in files]
    for entry in report["files"]:
        assert set(entry) == {"file", "ok", "candidate_hash", "diagnostics"}
        assert isinstance(entry["ok"], bool)
        if entry["ok"]:
            assert is_hash(entry["candidate_hash"])
        else:
            assert entry["candidate_hash"] is None
            assert any(d["severity"] == "error" for d in entry["diagnostics"]), entry["file"]
        for diagnostic in entry["diagnostics"]:
            assert set(diagnostic) == _DIAGNOSTIC_KEYS
            assert diagnostic["code"] in CODES
            assert diagnostic["severity"] in ("error", "warning")
            for key in ("line", "column", "end_line", "end_column"):
                assert isinstance(diagnostic[key], int) and diagnostic[key] >= 1
            assert isinstance(diagnostic["message"], str) and isinstance(diagnostic["hint"], str)


def test_cli_text_and_sarif_over_a_hostile_corpus(cli: Path, tmp_path: Path) -> None:
    files = _corpus(tmp_path, for_text=True)
    assert _run(cli, *map(str, files)).returncode == 1
    sarif = json.loads(_run(cli, "--format", "sarif", *map(str, files)).stdout)
    assert sarif["version"] == "2.1.0"


@pytest.mark.parametrize("name", ["empty", "binary", "ten_megabytes", "nested_not_10k", "nested_parentheses_10k"])
def test_cli_one_hostile_file(cli: Path, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.pact"
    data, code = HOSTILE[name]
    path.write_bytes(data)
    done = _run(cli, str(path))
    assert done.returncode == (0 if code is None else 1)
    if code is not None:
        assert f"[{code}]" in done.stderr


def test_cli_unreadable_and_missing_files(cli: Path, tmp_path: Path) -> None:
    assert _run(cli, str(tmp_path / "missing.pact")).returncode == 2
    assert _run(cli, str(tmp_path)).returncode == 2  # a directory
    done = _run(cli, "--format", "json", str(tmp_path / "missing.pact"))
    assert done.returncode == 2
    assert json.loads(done.stdout)["files"][0]["ok"] is False


def test_cli_text_output_stays_small(cli: Path, tmp_path: Path) -> None:
    path = tmp_path / "one_long_line.pact"
    path.write_bytes(SKELETON + b"role b " * 3_000 + b"\n")  # 2,999 duplicates on one 21 kB line
    done = _run(cli, str(path))
    assert done.returncode == 1
    assert len(done.stderr) < 3_000_000, f"{len(done.stderr):,} characters of output for 2,999 diagnostics"
