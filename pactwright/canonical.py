"""The one module that turns documents into hashed bytes and back.

Every hashed document (candidate, artifacts, manifest, approvals, signature
statements, reports) is encoded here with RFC 8785 (JSON Canonicalization
Scheme) and hashed here with SHA-256. Nothing else in pactwright calls
`json.dumps` on hashed data, so two encoders can never disagree about bytes.

Floats are refused in both directions: money and percent are exact, and a
float in a hashed document is a bug waiting to change a hash.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from collections.abc import Mapping
from typing import Any

import orjson
import rfc8785

from pactwright.errors import CanonicalError

HASH_PREFIX = "sha256:"
# RFC 8785 serializes numbers as IEEE doubles; integers beyond 2**53 would
# silently lose precision, so such values must travel as decimal strings.
MAX_SAFE_INT = 2**53 - 1  # the largest integer every JSON reader holds exactly (RFC 8785, I-JSON)


def _check(value: Any, path: str) -> bool:
    """Refuse what is not canonical JSON; True when every object key is ASCII.

    With ASCII keys, RFC 8785's key order (by UTF-16 code units) is Python's
    string order, and its string escapes are exactly `json.dumps`'s with
    `ensure_ascii=False`, so the standard library gives the same bytes faster.
    """
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise CanonicalError(
                    f"string at `{path}` is not valid unicode (a lone surrogate)", code="PW017"
                ) from None
        return True
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INT:
            raise CanonicalError(
                f"integer at `{path}` exceeds 2**53; encode it as a decimal string",
                code="PW013",
            )
        return True
    if isinstance(value, float):
        raise CanonicalError(f"float at `{path}` is not allowed in a hashed document", code="PW011")
    if isinstance(value, Mapping) and not isinstance(value, dict):
        # rfc8785 encodes dicts only; anything else would escape as its own error.
        raise CanonicalError(f"mapping of type `{type(value).__name__}` at `{path}` is not JSON", code="PW014")
    if isinstance(value, Mapping):
        plain = True
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(f"non-string key `{key!r}` at `{path}`", code="PW012")
            _check(key, path)
            plain = _check(item, f"{path}/{key}") and plain and key.isascii()
        return plain
    if isinstance(value, list | tuple):
        plain = True
        for index, item in enumerate(value):
            plain = _check(item, f"{path}/{index}") and plain
        return plain
    raise CanonicalError(f"value of type `{type(value).__name__}` at `{path}` is not JSON", code="PW014")


class _Careful(Exception):
    """Raised by `_scan` for anything its fast walk does not settle; `_check` then decides."""


def _scan(document: Any) -> bool:
    """`_check`'s answer for plain documents, without recursion or path strings; `_Careful` otherwise.

    Exact types only (a `str` or `int` subclass, a float, a non-dict mapping,
    a big int, a lone surrogate, a non-string key all go to `_check`, which
    refuses or accepts them exactly as before, with the path in its message).
    """
    plain = True
    stack = [document]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is str:
            if not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError:
                    raise _Careful from None
        elif kind is dict:
            for key, item in value.items():
                if type(key) is not str:
                    raise _Careful
                if not key.isascii():
                    push(key)
                    plain = False
                push(item)
        elif kind is list or kind is tuple:
            extend(value)
        elif kind is int:
            if value > MAX_SAFE_INT or value < -MAX_SAFE_INT:
                raise _Careful
        elif value is not None and kind is not bool:
            raise _Careful
    return plain


# `json.dumps` with these arguments builds this same encoder on every call; it keeps no state between calls.
_PLAIN = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_SORTED = orjson.OPT_SORT_KEYS


def canonical_bytes(document: Any) -> bytes:
    """RFC 8785 bytes of `document`; refuses floats, big ints and non-string keys.

    Documents whose keys are all ASCII (every document pactwright writes) are
    encoded by orjson with sorted keys, whose bytes for them are RFC 8785's
    (compact, keys by code point, which for ASCII is UTF-16 order, the same
    string escapes, integers within 2**53 as written); a document of exact
    JSON types too deep for orjson's fixed nesting limit, or one that reached
    `_check` (a subclass), takes the standard library's encoder, which gives
    the same bytes; the rest go through `rfc8785`.
    tests/test_canonical_fast_path.py compares all three on generated documents.
    """
    try:
        try:
            exact = plain = _scan(document)
        except _Careful:
            exact, plain = False, _check(document, "")
        if exact:
            try:
                return orjson.dumps(document, option=_SORTED)
            except orjson.JSONEncodeError:  # nested beyond orjson's limit: the same bytes, the slow way
                return _PLAIN.encode(document).encode("utf-8")
        if plain:
            return _PLAIN.encode(document).encode("utf-8")
        return rfc8785.dumps(document)
    except RecursionError:
        raise CanonicalError("document nested too deeply", code="PW014") from None


def hash_bytes(data: bytes) -> str:
    """`sha256:<64 hex>` of raw bytes."""
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def hash_document(document: Any) -> str:
    """The hash of a document's canonical bytes."""
    return hash_bytes(canonical_bytes(document))


def is_hash(text: str) -> bool:
    """Whether `text` has the exact shape of a pactwright hash."""
    digest = text[len(HASH_PREFIX) :]
    return text.startswith(HASH_PREFIX) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


def reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise CanonicalError(f"duplicate key `{key[:60]}`", code="PW015")
        out[key] = value
    return out


def safe_int(text: str) -> int:
    # Checked on the text first: json would otherwise raise a bare ValueError
    # past Python's 4300-digit conversion limit.
    if len(text.lstrip("-")) > 16 or abs(int(text)) > MAX_SAFE_INT:
        raise CanonicalError(f"integer `{text[:20]}` exceeds 2**53; encode it as a decimal string", code="PW013")
    return int(text)


def _no_float(text: str) -> Any:
    raise CanonicalError(f"float `{text}` is not allowed", code="PW011")


def _no_constant(text: str) -> Any:
    raise CanonicalError(f"`{text}` is not JSON", code="PW016")


def _big_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:  # beyond Python's integer-string digit limit
        raise CanonicalError(f"integer of {len(text)} digits is too long", code="PW013") from None


class _SeenCanonical:
    """Byte strings `load_json(..., require_canonical=True)` has accepted in this process.

    Whether bytes are canonical JSON is a function of the bytes alone, and
    canonical bytes hold no duplicate key, float, constant or integer beyond
    2**53, so the standard parser gives exactly the value the strict one did:
    an evidence chain walked again (by every delivery of a long agreement)
    parses each record strictly once. Bounded: documents of at most 64 KiB,
    at most 4,096 of them, and 16 MiB in all counting each held object's
    size and the set's table; emptied when the next one would pass a bound,
    as bytes not held are checked in full. One lock orders the additions of
    the service's threads.
    """

    LARGEST = 64 * 1024
    MOST = 4096
    BUDGET = 16 * 1024 * 1024

    def __init__(self) -> None:
        self.held: set[bytes] = set()
        self.size = 0  # sys.getsizeof of every held object
        self._lock = threading.Lock()

    def add(self, data: bytes) -> None:
        if len(data) > self.LARGEST:
            return
        cost = sys.getsizeof(data)
        with self._lock:
            if data in self.held:
                return
            table = sys.getsizeof(self.held)
            if len(self.held) >= self.MOST or self.size + cost + table > self.BUDGET - _TABLE_GROWTH:
                self.held.clear()
                self.size = 0
            self.held.add(data)
            self.size += cost

    def clear(self) -> None:
        with self._lock:
            self.held.clear()
            self.size = 0


# The most one addition can grow the set's table by: a full table's size (a set resizes to at most
# four times its entries), so the check before an addition keeps what the set holds within BUDGET.
_TABLE_GROWTH = sys.getsizeof(set(range(_SeenCanonical.MOST)))
_SEEN_CANONICAL = _SeenCanonical()


def load_json(data: bytes, *, require_canonical: bool = False, big_ints: bool = False) -> Any:
    """Parse strict JSON: UTF-8, no duplicate keys, no floats, no NaN, no integer beyond 2**53.

    `big_ints` admits integers of any size (ledger balances in minor units may
    exceed 2**53); such documents are inputs, never hashed. With
    `require_canonical`, the bytes must also be exactly the RFC 8785 encoding
    of what they parse to, so a document's hash is a function of its
    meaning and a re-encoded (or padded) file is refused.
    """
    # The bytes themselves, copied once (a buffer changed later, or a subclass's `decode` or
    # `__bytes__`, cannot make the text checked differ from the bytes remembered).
    raw = data if type(data) is bytes else bytes(memoryview(data))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CanonicalError(f"not valid utf-8 at byte {exc.start}", code="PW017") from None
    remember = require_canonical and not big_ints
    if remember and raw in _SEEN_CANONICAL.held:
        try:
            return json.loads(text)  # a new value each call: no caller shares another's
        except RecursionError:
            pass  # too deep for this stack: the strict path below answers as it would have
    try:
        value = json.loads(
            text,
            object_pairs_hook=reject_duplicate_keys,
            parse_int=_big_int if big_ints else safe_int,
            parse_float=_no_float,
            parse_constant=_no_constant,
        )
    except json.JSONDecodeError as exc:
        raise CanonicalError(
            f"malformed json at line {exc.lineno} column {exc.colno}: {exc.msg.lower()}",
            code="PW018",
        ) from None
    except RecursionError:
        raise CanonicalError("json nested too deeply", code="PW018") from None
    if require_canonical and canonical_bytes(value) != raw:
        raise CanonicalError("json is not in canonical (RFC 8785) form", code="PW019")
    if remember:
        _SEEN_CANONICAL.add(raw)
    return value
