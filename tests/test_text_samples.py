"""Stand-in texts for `text matching` params: drawn from the pattern, never refused by it.

Two layers: the generator (`compiler/_regex_samples.py`), which lists the
texts a pattern fully matches, shortest first in a fixed order; and the
model's samples (`compiler/emit_model.py`), which must let every compared
literal hold, let params compared with each other be equal or differ where
their patterns allow, and contain nothing the runtime would refuse at
agreement creation.
"""

from __future__ import annotations

import itertools
import json
import re

import pytest

from pactwright.compiler._regex_samples import MAX_LENGTH, Unsupported, texts
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes

# --- the generator -----------------------------------------------------------------------

GENERATED = [
    # pattern, the first texts in order
    ("ORD-[0-9]{1,12}", ["ORD-0", "ORD-1", "ORD-2"]),
    ("EU|US", ["EU", "US"]),
    ("EU", ["EU"]),
    ("[A-Z]{2}", ["AA", "AB", "AC"]),
    ("[a-z]+", ["a", "b", "c"]),
    ("x?", ["", "x"]),
    ("(ab|c)*d", ["d", "cd", "abd"]),
    (r"\d{3}-\w+", ["000-a", "000-b", "000-c"]),
    ("a{0,3}b{2}", ["bb", "abb", "aabb"]),
    ("(a?){3}", ["", "a", "aa"]),
    ("^EU$", ["EU"]),
    ("(?:EU|US)-[0-9]", ["EU-0", "EU-1", "EU-2"]),
    ("[^a-z]", ["A", "B", "C"]),
    (r"\S\s", ["a ", "a\t", "a\n"]),
    ("(?i)eu", ["eu"]),
    ("[!-~]{2}", ["aa", "ab", "ac"]),  # a wide range tries its readable characters first
]


@pytest.mark.parametrize(("pattern", "first"), GENERATED)
def test_the_generator_lists_texts_shortest_first_in_a_fixed_order(pattern: str, first: list[str]) -> None:
    found = list(texts(pattern, len(first)))
    assert found == first
    assert all(re.fullmatch(pattern, t) for t in found)


@pytest.mark.parametrize("pattern", [p for p, _ in GENERATED] + ["[A-Za-z0-9._-]{3,8}", "(a|b)(c|d)+"])
def test_every_generated_text_is_fully_matched_distinct_and_no_longer_than_earlier_ones(pattern: str) -> None:
    found = list(texts(pattern, 40))
    assert found, pattern
    assert len(found) == len(set(found))
    assert all(re.fullmatch(pattern, t) for t in found)
    assert [len(t) for t in found] == sorted(len(t) for t in found)


def test_a_finite_language_is_listed_whole_and_nothing_more() -> None:
    assert sorted(texts("(a|b)(c|d)", 100)) == ["ac", "ad", "bc", "bd"]
    assert list(texts("[^\\s\\S]", 10)) == []  # a class that admits nothing


def test_texts_longer_than_the_cap_are_not_found() -> None:
    assert list(texts(f"a{{{MAX_LENGTH + 1}}}", 5)) == []
    assert list(texts(f"a{{{MAX_LENGTH}}}", 5)) == ["a" * MAX_LENGTH]


@pytest.mark.parametrize("pattern", ["(?=a)a", "(a)\\1", "\\bx"])
def test_constructs_the_generator_does_not_enumerate_are_reported(pattern: str) -> None:
    with pytest.raises(Unsupported):
        list(texts(pattern, 3))


def test_an_unbounded_repeat_of_something_that_may_be_empty_terminates() -> None:
    assert list(texts("(a*)*b", 3)) == ["b", "ab", "aab"]


# --- the model's samples -----------------------------------------------------------------

HEADER = """
pact "samples.test" version "1.0.0"
currency EUR scale 2
role buyer
param price: money between 1.00 and 100.00
account world  "world" external
account seller "sellers:{agreement}"
state open initial
state done final
"""


def _samples(params: str, guards: list[str]) -> dict[str, list[str]]:
    body = "".join(
        f"transition t{i}: open -> done {{\n  by buyer\n  when {guard}\n  transfer price from world to seller\n}}\n"
        for i, guard in enumerate(guards)
    )
    body += "transition close: open -> done {\n  by buyer\n}\n"  # so `open` always has a way out
    result = check_bytes((HEADER + params + body).encode("utf-8"))
    assert result.ok and result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, "samples.pact")
    model = json.loads(files["model.json"])
    return {p["name"]: p["samples"] for p in model["params"] if p["type"] == "text"}


def test_a_pattern_stand_in_is_a_readable_text_the_pattern_admits() -> None:
    assert _samples('param order_id: text matching "ORD-[0-9]{1,12}"\n', []) == {"order_id": ["ORD-0"]}


def test_a_stand_in_differs_from_every_compared_literal() -> None:
    samples = _samples('param code: text matching "[A-C]"\n', ['code == "A"', 'code != "B"'])
    assert samples == {"code": ["C", "A", "B"]}


def test_a_pattern_admitting_only_the_compared_literals_gets_no_stand_in() -> None:
    samples = _samples('param region: text matching "EU|US"\n', ['region == "EU"', 'region == "US"'])
    assert samples == {"region": ["EU", "US"]}


def test_a_literal_the_pattern_refuses_is_not_a_sample() -> None:
    samples = _samples('param region: text matching "EU|US"\n', ['region == "EU"', 'region == "XX"'])
    assert samples == {"region": ["US", "EU"]}


def test_two_params_whose_pattern_admits_one_text_share_it() -> None:
    params = 'param src: text matching "EU"\nparam dst: text matching "EU"\n'
    assert _samples(params, ["src == dst"]) == {"src": ["EU"], "dst": ["EU"]}


def test_two_params_with_one_pattern_can_be_equal_or_differ() -> None:
    params = 'param src: text matching "[A-Z]{2}"\nparam dst: text matching "[A-Z]{2}"\n'
    assert _samples(params, ["src == dst"]) == {"src": ["AA", "AB"], "dst": ["AA", "AB"]}


def test_params_whose_patterns_overlap_in_one_text_can_still_be_equal() -> None:
    # Each pattern alone would give its own first texts (a, b and c, d): never equal.
    # The one text both admit is `x`, so `left == right` must be explorable.
    params = 'param left: text matching "a|b|x"\nparam right: text matching "c|d|x"\n'
    samples = _samples(params, ["left == right"])
    assert set(samples["left"]) & set(samples["right"]) == {"x"}
    assert any(a != b for a, b in itertools.product(samples["left"], samples["right"]))


def test_three_params_compared_with_each_other_reach_every_equality_pattern() -> None:
    params = "".join(f'param p{i}: text matching "[a-c]"\n' for i in range(3))
    samples = _samples(params, ["p0 == p1", "p1 == p2"])
    assert all(re.fullmatch("[a-c]", t) for values in samples.values() for t in values)
    shapes = {(a == b, b == c, a == c) for a, b, c in itertools.product(samples["p0"], samples["p1"], samples["p2"])}
    assert shapes == {
        (True, True, True),
        (True, False, False),
        (False, True, False),
        (False, False, True),
        (False, False, False),
    }


def test_a_pattern_the_generator_cannot_read_keeps_the_old_stand_in_only_if_admitted() -> None:
    # A word boundary is not enumerated; `any` fits `\\ban.\\b`, so it stays.
    assert _samples('param tag: text matching "\\\\ban.\\\\b"\n', []) == {"tag": ["any"]}


def test_with_no_admitted_text_at_all_the_old_stand_in_is_the_fallback() -> None:
    # Only texts longer than the generator's cap match, and `any` does not: nothing
    # is known to be admitted, so the param keeps `any` (a possible false alarm).
    pattern = f"z{{{MAX_LENGTH + 1}}}"
    assert _samples(f'param tag: text matching "{pattern}"\n', []) == {"tag": ["any"]}


def test_samples_are_the_same_bytes_every_time() -> None:
    params = 'param left: text matching "a|b|x"\nparam right: text matching "[a-z]+"\n'
    assert _samples(params, ["left == right", 'right != "a"']) == _samples(params, ["left == right", 'right != "a"'])
