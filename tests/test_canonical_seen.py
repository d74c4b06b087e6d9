"""`load_json(..., require_canonical=True)` parses bytes it has accepted before with the standard parser.

What must hold: the value is the one the strict parser gives, a new one on
every call (no caller can change what another read); bytes never accepted
are checked in full whatever was accepted before, so a near copy of
accepted bytes (padded, re-ordered, a float, a duplicate key, a big integer)
is refused with its own code. (The budget, and attacks on all of this:
tests/test_canonical_seen_attacks.py.)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pactwright import canonical
from pactwright.canonical import canonical_bytes, load_json
from pactwright.errors import CanonicalError

RECORD = {"agreement": "a1", "kind": "event", "postings": [{"amount": "649", "source": "escrow"}], "seq": 3}


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    """Each test starts with nothing remembered and leaves nothing behind."""
    canonical._SEEN_CANONICAL.clear()
    yield
    canonical._SEEN_CANONICAL.clear()


def test_a_second_parse_gives_an_equal_and_separate_value() -> None:
    data = canonical_bytes(RECORD)
    first = load_json(data, require_canonical=True)
    assert data in canonical._SEEN_CANONICAL.held
    first["postings"][0]["amount"] = "0"  # a caller changing its own copy
    second = load_json(data, require_canonical=True)
    assert second == RECORD and second is not first and second["postings"] is not first["postings"]


@pytest.mark.parametrize(
    ("near_copy", "code"),
    [
        (b' {"agreement":"a1"}', "PW019"),  # padded
        (b'{"seq":3,"agreement":"a1"}', "PW019"),  # keys out of order
        (b'{"agreement":"a1","seq":3.0}', "PW011"),  # a float
        (b'{"agreement":"a1","agreement":"a2"}', "PW015"),  # a duplicate key
        (b'{"agreement":"a1","seq":9007199254740993}', "PW013"),  # beyond 2**53
        (b'{"agreement":NaN}', "PW016"),
    ],
)
def test_bytes_never_accepted_are_checked_in_full(near_copy: bytes, code: str) -> None:
    load_json(b'{"agreement":"a1"}', require_canonical=True)
    load_json(b'{"agreement":"a1","seq":3}', require_canonical=True)
    with pytest.raises(CanonicalError) as refused:
        load_json(near_copy, require_canonical=True)
    assert refused.value.code == code
    assert near_copy not in canonical._SEEN_CANONICAL.held


def test_only_canonical_loads_are_remembered() -> None:
    data = b'{"b":1,"a":2}'
    assert load_json(data) == {"b": 1, "a": 2}  # not canonical, and not asked to be
    assert data not in canonical._SEEN_CANONICAL.held
    with pytest.raises(CanonicalError) as refused:
        load_json(data, require_canonical=True)
    assert refused.value.code == "PW019"


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON)
def test_the_remembered_parse_equals_the_strict_one(document: Any) -> None:
    data = canonical_bytes(document)
    strict = load_json(data, require_canonical=True)
    again = load_json(data, require_canonical=True)
    assert strict == again == document
    assert canonical_bytes(again) == data
