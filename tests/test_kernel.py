"""The kernel's exact values: canonical JSON, money, percents and durations."""

from __future__ import annotations

import math
from collections import OrderedDict
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pactwright.canonical import canonical_bytes, hash_bytes, hash_document, is_hash, load_json
from pactwright.errors import CanonicalError, MoneyError
from pactwright.money import (
    MAX_DIGITS,
    MAX_SCALE,
    Currency,
    Percent,
    format_duration,
    format_money,
    parse_duration,
    parse_money,
)

# --- canonical JSON ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "code"),
    [
        pytest.param({"a": 1.5}, "PW011", id="float"),
        pytest.param([1.0], "PW011", id="integral-float"),
        pytest.param({"a": math.nan}, "PW011", id="nan"),
        pytest.param({"a": math.inf}, "PW011", id="infinity"),
        pytest.param({1: "a"}, "PW012", id="int-key"),
        pytest.param({True: "a"}, "PW012", id="bool-key"),
        pytest.param({"a": {None: 1}}, "PW012", id="nested-none-key"),
        pytest.param({"a": 2**53}, "PW013", id="int-2**53"),
        pytest.param([-(2**53)], "PW013", id="negative-int-2**53"),
        pytest.param({"a": 10**400}, "PW013", id="huge-int"),
        pytest.param({"a": {1, 2}}, "PW014", id="set"),
        pytest.param({"a": object()}, "PW014", id="object"),
        pytest.param({"a": b"bytes"}, "PW014", id="bytes"),
        pytest.param({"a": bytearray(b"x")}, "PW014", id="bytearray"),
        pytest.param({"a": range(3)}, "PW014", id="range"),
        pytest.param(MappingProxyType({"a": 1}), "PW014", id="non-dict-mapping"),
        pytest.param({"a": "\ud800"}, "PW017", id="lone-surrogate-value"),
        pytest.param({"\udfff": 1}, "PW017", id="lone-surrogate-key"),
    ],
)
def test_canonical_bytes_refuses(document: Any, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes(document)
    assert caught.value.code == code


def test_canonical_bytes_refuses_deep_nesting() -> None:
    document: list[Any] = []
    for _ in range(5000):
        document = [document]
    with pytest.raises(CanonicalError) as caught:
        canonical_bytes(document)
    assert caught.value.code == "PW014"


def test_largest_safe_integers_are_accepted() -> None:
    assert canonical_bytes([2**53 - 1, -(2**53 - 1)]) == b"[9007199254740991,-9007199254740991]"


def test_canonical_bytes_sorts_keys_and_drops_whitespace() -> None:
    document = OrderedDict([("b", [1, "é", None, True]), ("a", {"d": False, "c": ""})])
    assert canonical_bytes(document) == '{"a":{"c":"","d":false},"b":[1,"é",null,true]}'.encode()
    # RFC 8785 orders keys by UTF-16 code units, not by code points.
    assert canonical_bytes({"\U0001f600": 1, "\uffff": 2}) == '{"\U0001f600":1,"\uffff":2}'.encode()


@pytest.mark.parametrize(
    ("data", "code"),
    [
        pytest.param(b'{"a":1,"a":2}', "PW015", id="duplicate-key"),
        pytest.param(b'{"a":{"b":1,"b":1}}', "PW015", id="nested-duplicate-key"),
        pytest.param(b"1.5", "PW011", id="float"),
        pytest.param(b"1e400", "PW011", id="overflowing-float"),
        pytest.param(b"[1E2]", "PW011", id="exponent"),
        pytest.param(b"NaN", "PW016", id="nan"),
        pytest.param(b"[-Infinity]", "PW016", id="negative-infinity"),
        pytest.param(b"9007199254740992", "PW013", id="int-2**53"),
        pytest.param(b"-9007199254740992", "PW013", id="negative-int-2**53"),
        pytest.param(b"1" * 5000, "PW013", id="int-with-5000-digits"),
        pytest.param(b'"\xff"', "PW017", id="invalid-utf8"),
        pytest.param(b"\xef\xbb\xbf{}", "PW018", id="bom"),
        pytest.param(b"{", "PW018", id="truncated"),
        pytest.param(b"", "PW018", id="empty"),
        pytest.param(b"[" * 100_000 + b"]" * 100_000, "PW018", id="deeply-nested"),
    ],
)
def test_load_json_refuses(data: bytes, code: str) -> None:
    with pytest.raises(CanonicalError) as caught:
        load_json(data)
    assert caught.value.code == code


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b'{"b":1,"a":2}', id="unsorted-keys"),
        pytest.param(b'{"a": 1}', id="space"),
        pytest.param(b'{"a":1}\n', id="trailing-newline"),
        pytest.param(b'"\\u0041"', id="needless-escape"),
        pytest.param(b"-0", id="negative-zero"),
    ],
)
def test_load_json_refuses_non_canonical_bytes(data: bytes) -> None:
    load_json(data)  # well-formed JSON...
    with pytest.raises(CanonicalError) as caught:
        load_json(data, require_canonical=True)  # ...but not its own canonical form
    assert caught.value.code == "PW019"


def test_lone_surrogate_escape_is_never_canonical() -> None:
    with pytest.raises(CanonicalError) as caught:
        load_json(b'"\\ud800"', require_canonical=True)
    assert caught.value.code == "PW017"


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(_json)
def test_canonical_bytes_round_trip(document: Any) -> None:
    data = canonical_bytes(document)
    assert load_json(data, require_canonical=True) == document
    assert canonical_bytes(load_json(data)) == data
    assert hash_document(document) == hash_bytes(data)
    assert is_hash(hash_bytes(data))


def test_hash_shape() -> None:
    assert hash_bytes(b"") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert not is_hash("sha256:" + "A" * 64)
    assert not is_hash("sha256:" + "a" * 63)
    assert not is_hash("md5:" + "a" * 64)


# --- money --------------------------------------------------------------------------------------


@given(st.integers(-(10**30), 10**30), st.integers(0, MAX_SCALE))
def test_money_format_parse_round_trip(minor: int, scale: int) -> None:
    text = format_money(minor, scale)
    assert parse_money(text, scale) == minor
    if scale:
        assert len(text.rpartition(".")[2]) == scale


@given(st.integers(0, 10**20), st.integers(0, MAX_SCALE), st.data())
def test_money_with_fewer_decimals_means_the_same(minor: int, scale: int, data: st.DataObject) -> None:
    """`12.5` is `12.50`: trailing zeros and missing decimals never change the amount."""
    text = format_money(minor, scale)
    if scale:
        trimmed = text.rstrip("0").rstrip(".")
        assert parse_money(trimmed, scale) == minor
    extra = data.draw(st.integers(0, MAX_SCALE - scale))
    if extra and scale:
        assert parse_money(text + "0" * extra, scale + extra) == minor * 10**extra


@given(st.integers(0, MAX_SCALE), st.integers(1, 9))
def test_money_with_too_many_decimals_is_refused(scale: int, digit: int) -> None:
    with pytest.raises(MoneyError) as caught:
        parse_money("1." + "0" * scale + str(digit), scale)
    assert caught.value.code == "PW022"


def test_money_examples() -> None:
    assert parse_money("12.5", 2) == 1250
    assert parse_money("12.50", 2) == 1250
    assert parse_money("12", 2) == 1200
    assert parse_money("-0.05", 2) == -5
    assert parse_money("7", 0) == 7
    assert format_money(-5, 2) == "-0.05"
    assert format_money(1250, 0) == "1250"
    assert Currency("EUR", 2).asset == "EUR/2"
    assert Currency("JPY", 0).asset == "JPY"
    with pytest.raises(MoneyError) as caught:
        parse_money("12.505", 2)
    assert caught.value.code == "PW022"


@pytest.mark.parametrize("text", ["", ".5", "1.", "+1", " 1", "1 ", "1,00", "1e5", "١٢", "0x10", "1..2"])
def test_not_money(text: str) -> None:
    with pytest.raises(MoneyError) as caught:
        parse_money(text, 2)
    assert caught.value.code == "PW021"


def test_money_with_absurdly_many_digits_is_refused_not_crashed() -> None:
    for text in ("1" * 5000, "9" * (MAX_DIGITS - 1) + ".99", "1." + "0" * 5000):
        with pytest.raises(MoneyError):
            parse_money(text, 2)


# --- percent ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "canonical"),
    [
        ("10%", Fraction(1, 10), "10"),
        ("10.0%", Fraction(1, 10), "10"),
        ("2.5%", Fraction(1, 40), "2.5"),
        ("33.3333%", Fraction(333333, 1000000), "33.3333"),
        ("0%", Fraction(0), "0"),
        ("100%", Fraction(1), "100"),
        ("150%", Fraction(3, 2), "150"),
        ("7", Fraction(7, 100), "7"),
    ],
)
def test_percent_parse(text: str, value: Fraction, canonical: str) -> None:
    percent = Percent.parse(text)
    assert percent.value == value
    assert percent.canonical() == canonical
    assert str(percent) == canonical + "%"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("2.55555%", "PW024"),
        ("33.33333%", "PW024"),
        ("-5%", "PW023"),
        ("%", "PW023"),
        ("10%%", "PW023"),
        ("ten%", "PW023"),
        ("1" * 5000 + "%", "PW023"),
    ],
)
def test_bad_percent(text: str, code: str) -> None:
    with pytest.raises(MoneyError) as caught:
        Percent.parse(text)
    assert caught.value.code == code


@given(st.integers(0, 10**6), st.integers(0, 4))
def test_percent_canonical_round_trip(units: int, decimals: int) -> None:
    text = format_money(units, decimals) + "%"
    percent = Percent.parse(text)
    assert Percent.parse(str(percent)) == percent


@given(st.integers(0, 1_000_000), st.integers(0, 10**12))
def test_share_rounds_down_exactly(ten_thousandths_of_a_percent: int, minor: int) -> None:
    percent = Percent.parse(format_money(ten_thousandths_of_a_percent, 4) + "%")
    share = percent.share_of(minor)
    exact = percent.value * minor
    assert share == math.floor(exact)
    assert 0 <= exact - share < 1


def test_share_examples() -> None:
    assert Percent.parse("10%").share_of(15) == 1
    assert Percent.parse("33.3333%").share_of(100) == 33
    assert Percent.parse("2.5%").share_of(1999) == 49
    assert Percent.parse("100%").share_of(1234) == 1234


# --- durations -----------------------------------------------------------------------------------


@given(st.integers(0, 10**12))
def test_duration_format_parse_round_trip(seconds: int) -> None:
    text = format_duration(seconds)
    assert parse_duration(text) == seconds
    assert format_duration(parse_duration(text)) == text


@given(st.integers(0, 99), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
def test_duration_any_spelling_means_its_seconds(d: int, h: int, m: int, s: int) -> None:
    parts = [(d, "d"), (h, "h"), (m, "m"), (s, "s")]
    text = "".join(f"{n}{u}" for n, u in parts if n) or "0s"
    seconds = d * 86400 + h * 3600 + m * 60 + s
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


def test_duration_examples() -> None:
    assert parse_duration("1d12h") == parse_duration("36h") == 129600
    assert parse_duration("14d") == 14 * 86400
    assert parse_duration("30m") == 1800
    assert parse_duration("15s") == 15
    assert format_duration(129600) == "1d12h"
    assert format_duration(0) == "0s"
    assert format_duration(90061) == "1d1h1m1s"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("12x", "PW025"),
        ("", "PW025"),
        ("d", "PW025"),
        ("1d 2h", "PW025"),
        ("1.5h", "PW025"),
        ("12", "PW025"),
        ("1" * 5000 + "s", "PW025"),
        ("1h1d", "PW026"),
        ("1d1d", "PW026"),
        ("1s1m", "PW026"),
    ],
)
def test_bad_duration(text: str, code: str) -> None:
    with pytest.raises(MoneyError) as caught:
        parse_duration(text)
    assert caught.value.code == code
