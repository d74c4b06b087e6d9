"""The standard-library fast path of `canonical_bytes` gives RFC 8785's bytes exactly.

`canonical_bytes` encodes documents whose object keys are all ASCII with
`json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)`.
This compares that path with the `rfc8785` package itself on generated
documents (any unicode in string values, ASCII keys), on the reference
bundles' documents, and checks that non-ASCII keys still go through
`rfc8785` (their order differs: UTF-16 code units, not code points).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from pactwright.canonical import canonical_bytes, load_json

GOLDEN = Path(__file__).resolve().parent / "golden"

# Valid unicode text (no lone surrogates), which canonical_bytes accepts.
_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
_ASCII_KEYS = st.text(alphabet=st.characters(max_codepoint=127), max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1) | _TEXT


def _documents(keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        _SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=20,
    )


@settings(max_examples=400, deadline=None)
@given(_documents(_ASCII_KEYS))
def test_ascii_keyed_documents_encode_exactly_as_rfc8785(document: Any) -> None:
    assert canonical_bytes(document) == rfc8785.dumps(document)


@settings(max_examples=200, deadline=None)
@given(_documents(_TEXT))
def test_any_keys_encode_exactly_as_rfc8785(document: Any) -> None:
    assert canonical_bytes(document) == rfc8785.dumps(document)


def test_keys_beyond_the_basic_plane_keep_utf16_order() -> None:
    # U+FF61 sorts after U+1F600 by UTF-16 code units (0xFF61 > 0xD83D), before it by code point.
    document = {"\U0001f600": 1, "\uff61": 2}
    assert canonical_bytes(document) == rfc8785.dumps(document)
    assert canonical_bytes(document).index("\U0001f600".encode()) < canonical_bytes(document).index("\uff61".encode())


def test_every_golden_document_is_byte_identical_through_both_encoders() -> None:
    files = sorted(GOLDEN.rglob("*.json"))
    assert files
    for path in files:
        data = path.read_bytes()
        document = load_json(data)
        assert canonical_bytes(document) == rfc8785.dumps(document), path


def test_documents_deeper_than_orjson_nests_take_the_standard_encoder_with_the_same_bytes() -> None:
    # orjson refuses nesting past a fixed depth (254); such a document of plain types is still canonical
    # JSON and must encode, byte for byte, as rfc8785 encodes it.
    for depth in (250, 260, 400):
        document: Any = "leaf"
        for level in range(depth):
            document = {"k": document} if level % 2 else [document, level]
        assert canonical_bytes(document) == rfc8785.dumps(document)
