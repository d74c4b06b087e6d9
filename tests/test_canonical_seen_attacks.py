"""Attacks on `load_json(..., require_canonical=True)` remembering the bytes it accepted (`_SEEN_CANONICAL`).

The claim under attack: for any sequence of calls in one process, every
`load_json` call returns a value equal to what the strict path alone would
return for those bytes and raises exactly the same CanonicalError code when
the strict path would raise; no caller can change the value another call
returns; the memory held stays within the budget; and the evidence chain
check (`check_chain`, run by `pactwright evidence verify` and by the outbox
worker before each delivery) detects every tamper it detected before, even
after the same worker process has already walked the untampered chain.

Once broken (each fixed since):

- a `bytes` subclass (or any object with `decode` and `__bytes__`) was
  validated as the text it decodes to, but remembered as what `bytes()` of it
  gives: one caller made another's duplicate key, big integer, float or
  padded bytes come back as a value. The bytes are now copied once, through
  the buffer, and that copy is what is checked and remembered;
- a deeply nested document remembered at a shallow stack was read again with
  the bare standard parser: from a deeper stack it let a bare RecursionError
  out. A remembered parse that runs out of stack now falls back to the
  strict path. (One difference stays, by design: the strict path also
  re-encodes what it parsed, so from a deep enough stack it runs out of
  stack (PW018) on a document the standard parser alone still reads; the
  remembered read then gives the document's value, never another value);
- the budget counted `len(data)` only: a quarter of a million small
  documents counted as 1.5 MB held more than the whole 16 MiB budget. It now
  counts each object's size and the set's table, and holds 4,096 documents
  at most.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pactwright import canonical
from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.errors import CanonicalError
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.evidence import verify_evidence
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import Worker
from tests.signed_bundles import BACKENDS, PACT_ID
from tests.test_runtime_worker import HAPPY, PARTIES, ROOT, T0, environment, outbox_rows

SEEN = canonical._SEEN_CANONICAL


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    """Each test starts with nothing remembered and leaves nothing behind."""
    SEEN.clear()
    yield
    SEEN.clear()


def _outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """What one call gave: its value (by repr, so key order and int/bool count), a CanonicalError's code,
    or another exception's type."""
    try:
        value = call()
    except CanonicalError as exc:
        return ("CanonicalError", exc.code)
    except Exception as exc:  # the type is the outcome compared
        return ("raised", type(exc).__name__)
    try:
        return ("value", repr(value))
    except RecursionError:  # too deep to print here: compared by its canonical bytes, if it has them here
        try:
            return ("value", hash_bytes(canonical_bytes(value)))
        except CanonicalError:
            return ("value", "too deep to compare")


def _strict(data: Any, **kwargs: Any) -> tuple[str, Any]:
    """The strict path alone: nothing remembered before the call, and nothing kept after it."""
    saved_held, saved_size = set(SEEN.held), SEEN.size
    SEEN.clear()
    try:
        return _outcome(lambda: load_json(data, require_canonical=True, **kwargs))
    finally:
        SEEN.clear()
        SEEN.held.update(saved_held)
        SEEN.size = saved_size


def _as_is(data: Any, **kwargs: Any) -> tuple[str, Any]:
    """One call with the memo as it is (as many frames deep as `_strict`'s call)."""
    return _outcome(lambda: load_json(data, require_canonical=True, **kwargs))


# == documents whose strict parse might differ from the standard parser's ====================================

_TRICKY = [
    '\u0000\u001f"\\/',  # control characters and escapes
    {"": 0, "a": -9007199254740991, "b": 9007199254740991, "c": [True, False, None, 0, 1]},
    {"\U0001f600": 1, "\ufb01": 2, "é": 3, "z": "\u2028\u2029"},  # UTF-16 order differs from code-point order
    {"k": [[[[[[[[[[{"deep": [1]}]]]]]]]]]]},
    ["x" * 5000, {"n": 1234567890123456}],
    {"1": 1, "10": 10, "9": 9, "A": "a", "a": "A"},
]


@pytest.mark.parametrize("document", _TRICKY)
def test_a_remembered_tricky_document_reads_as_the_strict_parse_does(document: Any) -> None:
    """Canonical bytes with control characters, non-ASCII keys in RFC 8785 order, the largest safe integers,
    booleans beside 0 and 1, and nesting: the remembered read has the same value, key order and types,
    and is a new value each time."""
    data = canonical_bytes(document)
    strict = load_json(data, require_canonical=True)
    assert data in SEEN.held
    again = load_json(data, require_canonical=True)
    assert repr(again) == repr(strict) and again == document
    assert again is not strict or not isinstance(again, dict | list)
    assert canonical_bytes(again) == data


@pytest.mark.parametrize(
    ("remembered", "near_copy", "code"),
    [
        (b"[0]", b"[-0]", "PW019"),
        (b'"A"', b'"\\u0041"', "PW019"),
        ('"é"'.encode(), b'"\\u00e9"', "PW019"),
        (b'"\\u0000"', b'"\\u0000" ', "PW019"),
        (b'["a"]', b'["\\ud800"]', "PW017"),
        (b"[1]", b"[1.0]", "PW011"),
        (b"[1]", b"[1e0]", "PW011"),
        (b"[9007199254740991]", b"[9007199254740992]", "PW013"),
        (b'{"a":1}', b'{"a":1,"a":1}', "PW015"),
        (b"[1]", b"[Infinity]", "PW016"),
        (b"[1]", b"[1", "PW018"),
        (b"[1]", b"[\xff]", "PW017"),
    ],
)
def test_a_near_copy_of_remembered_bytes_is_refused_with_the_strict_code(
    remembered: bytes, near_copy: bytes, code: str
) -> None:
    """`-0`, an escaped letter, a lone surrogate, a float, a big integer, a duplicate key, a constant,
    a truncation or bad UTF-8 next to remembered canonical bytes: each refused with the strict path's code,
    and never remembered."""
    assert _strict(near_copy) == ("CanonicalError", code)
    load_json(remembered, require_canonical=True)
    assert remembered in SEEN.held
    with pytest.raises(CanonicalError) as refused:
        load_json(near_copy, require_canonical=True)
    assert refused.value.code == code
    assert near_copy not in SEEN.held


def test_a_bytearray_changed_after_it_was_remembered_is_checked_as_what_it_now_holds() -> None:
    """The memo keeps a copy: the caller's bytearray, rewritten in place to a duplicate key (PW015) or to the
    same pairs reordered (PW019), is refused, and the remembered bytes still read as before."""
    buffer = bytearray(b'{"amount":"1","fee":"0"}')
    assert load_json(buffer, require_canonical=True) == {"amount": "1", "fee": "0"}
    assert b'{"amount":"1","fee":"0"}' in SEEN.held and all(type(k) is bytes for k in SEEN.held)
    buffer[:] = b'{"amount":"1","amount":"9"}'
    with pytest.raises(CanonicalError) as refused:
        load_json(buffer, require_canonical=True)
    assert refused.value.code == "PW015"
    buffer[:] = b'{"fee":"0","amount":"1"}'  # same bytes, reordered: not canonical
    with pytest.raises(CanonicalError) as refused:
        load_json(buffer, require_canonical=True)
    assert refused.value.code == "PW019"
    assert load_json(b'{"amount":"1","fee":"0"}', require_canonical=True) == {"amount": "1", "fee": "0"}
    assert SEEN.held == {b'{"amount":"1","fee":"0"}'}


def test_a_memoryview_gives_the_same_outcome_remembered_or_not() -> None:
    data = b'{"a":[1,2]}'
    before = _strict(memoryview(data))
    load_json(data, require_canonical=True)
    assert data in SEEN.held
    assert _as_is(memoryview(data)) == before == ("value", "{'a': [1, 2]}")
    assert _as_is(bytearray(data)) == ("value", "{'a': [1, 2]}")


def test_big_int_calls_interleaved_neither_read_nor_write_the_memo() -> None:
    """`big_ints=True` calls always take the strict path: remembered bytes still parse, a big integer in
    canonical position is PW013 with `require_canonical`, and none of them change what is held."""
    small = b'{"n":9007199254740991}'
    big = b'{"n":9007199254740993}'
    assert load_json(small, require_canonical=True, big_ints=True) == {"n": 9007199254740991}
    assert SEEN.held == set()
    assert load_json(small, require_canonical=True) == {"n": 9007199254740991}
    assert SEEN.held == {small}
    assert load_json(small, require_canonical=True, big_ints=True) == {"n": 9007199254740991}
    assert load_json(big, big_ints=True) == {"n": 9007199254740993}
    for kwargs, code in (({"big_ints": True}, "PW013"), ({}, "PW013")):
        with pytest.raises(CanonicalError) as refused:
            load_json(big, require_canonical=True, **kwargs)
        assert refused.value.code == code
    assert load_json(small, require_canonical=True) == {"n": 9007199254740991}
    assert SEEN.held == {small} and SEEN.size == sys.getsizeof(small)


# == a caller changing what another call returns ===========================================================


class _Claims(bytes):
    """Bytes that decode to one document and give another to `bytes()`."""

    other = b""

    def __bytes__(self) -> bytes:
        return self.other


@pytest.mark.parametrize(
    ("planted", "code"),
    [
        (b'{"amount":"1","amount":"1000"}', "PW015"),
        (b'{"amount":90071992547409930}', "PW013"),
        (b'{"amount":1.5}', "PW011"),
        (b'{"amount": "1"}', "PW019"),
    ],
)
def test_no_caller_can_make_another_calls_bytes_read_as_canonical(planted: bytes, code: str) -> None:
    """One caller passes canonical bytes `{"amount":"1"}` whose `bytes()` is another document; afterwards
    an unrelated call with that other document (a duplicate key, a big integer, a float, padding) must still
    be refused with the strict path's code."""
    assert _strict(planted) == ("CanonicalError", code)
    carrier = _Claims(b'{"amount":"1"}')
    carrier.other = planted
    assert load_json(carrier, require_canonical=True) == {"amount": "1"}
    with pytest.raises(CanonicalError) as refused:
        load_json(planted, require_canonical=True)
    assert refused.value.code == code


# == deep nesting and the stack ================================================================================


def _at_depth(frames: int, call: Callable[[], Any]) -> Any:
    return call() if frames == 0 else _at_depth(frames - 1, call)


def _deepest_accepted(make: Callable[[int], bytes]) -> int:
    """The largest nesting the strict path accepts at this stack, called as the test below calls it."""
    low, high = 1, 20_000
    while low < high:
        middle = (low + high + 1) // 2
        data = make(middle)
        if _at_depth(0, lambda: _strict(data))[0] == "value":  # noqa: B023 - called at once
            low = middle
        else:
            high = middle - 1
    return low


@pytest.mark.parametrize(
    "make",
    [lambda n: b'{"a":' * n + b"1" + b"}" * n, lambda n: b"[" * n + b"]" * n],
    ids=["objects", "arrays"],
)
def test_a_remembered_deep_document_gives_the_strict_outcome_at_every_stack_depth(make: Callable[[int], bytes]) -> None:
    """Nesting as deep as the strict path accepts here is remembered, then read again from 0..40 frames
    deeper; at each depth the outcome is the strict path's outcome at that same depth, or, where the strict
    path ran out of stack (PW018), the document's own value: never another value, never a bare error."""
    data = make(_deepest_accepted(make))
    strict = {frames: _at_depth(frames, lambda: _strict(data)) for frames in range(41)}
    assert strict[0][0] == "value" and strict[40] == ("CanonicalError", "PW018")
    load_json(data, require_canonical=True)
    assert data in SEEN.held
    remembered = {frames: _at_depth(frames, lambda: _as_is(data)) for frames in range(41)}
    differing = {
        f: (strict[f], remembered[f])
        for f in strict
        if strict[f] != remembered[f] and not (strict[f] == ("CanonicalError", "PW018") and remembered[f] == strict[0])
    }
    assert differing == {}
    assert all(outcome[0] in ("value", "CanonicalError") for outcome in remembered.values())


# == the budget ================================================================================================


def test_the_memory_held_by_many_small_documents_stays_within_the_budget() -> None:
    """250,000 distinct canonical documents of 6 bytes (integers): the memory they hold (the bytes objects
    and the set) stays within the budget and the count of documents within its bound, the last ones read
    are held, and the count of what is held is exact."""
    most = 0
    for n in range(250_000):
        load_json(str(100_000 + n).encode(), require_canonical=True)
        most = max(most, len(SEEN.held))
    assert most == SEEN.MOST and str(349_999).encode() in SEEN.held
    assert SEEN.size == sum(sys.getsizeof(item) for item in SEEN.held)
    held = sys.getsizeof(SEEN.held) + SEEN.size
    assert held <= SEEN.BUDGET, f"{held} bytes held, budget {SEEN.BUDGET}"


def test_the_counted_size_never_passes_the_budget_in_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted as the memo counts (each object's size, and the set's table), one thread never holds more
    than the budget, a document above the largest is never held, and the memo is emptied when the next
    document would pass the budget."""
    budget = canonical._TABLE_GROWTH + 3000
    monkeypatch.setattr(canonical._SeenCanonical, "BUDGET", budget)
    monkeypatch.setattr(canonical._SeenCanonical, "LARGEST", 300)
    sizes = []
    for n in range(200):
        data = canonical_bytes({"n": n, "pad": "p" * (n % 7) * 40})
        load_json(data, require_canonical=True)
        assert (data in SEEN.held) == (len(data) <= 300)
        assert SEEN.size == sum(sys.getsizeof(item) for item in SEEN.held)
        assert SEEN.size + sys.getsizeof(SEEN.held) <= budget
        sizes.append(SEEN.size)
    assert sum(1 for a, b in itertools.pairwise(sizes) if b < a) >= 10


# == a long-lived worker, then a tamper in another process =====================================================

_TAMPER = r"""
import sys
from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.runtime._evidence_chain import chain_rows
from pactwright.runtime.store import open_store
from tests import _chain_tamper as chain

url = sys.argv[1]
with open_store(url) as store, store.transaction() as db:
    # Record 1 is the fund event's: its event row (store migration 15), the record's bytes derived from it.
    def payload(agreement_id):
        row = db.query("SELECT payload FROM events WHERE agreement_id = ? AND evidence_seq = 1", (agreement_id,))
        return str(row[0][0])

    def put(agreement_id, text, digest):
        db.execute("UPDATE events SET payload = ?, evidence_hash = ? WHERE agreement_id = ? AND evidence_seq = 1",
                   (text, digest, agreement_id))

    def stored_hash(agreement_id):
        return next(str(row[3]) for row in chain_rows(db, agreement_id) if int(row[0]) == 1)

    # edited: another amount, the hash left as it was
    text = payload("edit")
    assert '"amount":"6490"' in text
    put("edit", text.replace('"amount":"6490"', '"amount":"649000"'), stored_hash("edit"))
    # edited and re-hashed: the record is canonical again and hashes to its link
    record = chain.record_at(db, 1, "rehash")
    record["postings"][0]["amount"] = "649000"
    chain.write(db, record, hash_bytes(canonical_bytes(record)), agreement_id="rehash")
    # padded: the same payload with a space, the hash recomputed over the bytes the chain now reads
    text = payload("pad") + " "
    put("pad", text, hash_bytes(text.encode()))
    # spliced: the payload, time and link of a record the worker has already walked (agreement `src`, seq 1)
    chain.write(db, chain.record_at(db, 1, "src"), stored_hash("src"), agreement_id="splice")
print("tampered")
"""

_TAMPERED = ("edit", "rehash", "pad", "splice")
_CLEAN = ("src", "quiet")


def _fresh_process_problems(url: str, agreement_id: str) -> list[tuple[str, int | None]]:
    """`pactwright evidence verify` in a new process: nothing remembered there."""
    done = subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", "evidence", "verify", agreement_id, "--store", url,
         "--format", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    return [(p["code"], p["seq"]) for p in json.loads(done.stdout)["problems"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_worker_that_walked_the_clean_chains_still_quarantines_every_later_tamper(
    backend: str, tmp_path: Path
) -> None:
    """One Worker object delivers the fund entry of six agreements (walking every chain, so each record's
    bytes are remembered in this process), `evidence verify` walks them again here, and the rest of each
    agreement is committed. Another OS process then edits record 1 of four of them, the fund event's row
    (edited; edited and re-hashed; padded and re-hashed; replaced by the payload, time and link of a record
    this process already remembered). The same Worker drains again: each tampered release is quarantined
    with PW564 and nothing of it reaches the ledger, the two clean ones are delivered, and `evidence verify`
    here names exactly the problems a fresh process names."""
    ids = _TAMPERED + _CLEAN
    with environment(backend, tmp_path) as url:
        with open_store(url) as store, open_ledger(None, url) as ledger:
            for agreement_id in ids:
                open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id=agreement_id,
                               clock=TestClock(T0))  # fmt: skip
                transition, role, party = HAPPY[0]
                submit(store, agreement_id, transition, role, party, f"{agreement_id}-{transition}",
                       clock=TestClock(T0))  # fmt: skip
            worker = Worker(store, ledger, TestClock(T0))
            first = worker.drain()
            assert sorted((o.reference, o.status) for o in first) == sorted((f"{a}/1/0", "delivered") for a in ids)
            for agreement_id in ids:
                assert verify_evidence(store, agreement_id).ok
                for transition, role, party in HAPPY[1:]:
                    submit(store, agreement_id, transition, role, party, f"{agreement_id}-{transition}",
                           clock=TestClock(T0))  # fmt: skip
            remembered = len(SEEN.held)
            assert remembered >= 2 * len(ids)
            done = subprocess.run([sys.executable, "-c", _TAMPER, url], cwd=ROOT, capture_output=True, text=True,
                                  timeout=120, check=False)  # fmt: skip
            assert done.returncode == 0 and done.stdout.strip() == "tampered", done.stderr
            second = worker.drain()
            outcomes = sorted((o.reference, o.status, o.code) for o in second)
            assert outcomes == sorted(
                [(f"{a}/3/0", "quarantined", "PW564") for a in _TAMPERED]
                + [(f"{a}/3/0", "delivered", None) for a in _CLEAN]
            ), outcomes
            here = {a: [(p.code, p.seq) for p in verify_evidence(store, a).problems] for a in ids}
            references = ledger.references()
        assert sorted(references) == sorted([f"{a}/1/0" for a in ids] + [f"{a}/3/0" for a in _CLEAN])
        errors = {r["reference"]: str(r["last_error"]) for r in outbox_rows(url) if r["status"] == "quarantined"}
        assert sorted(errors) == sorted(f"{a}/3/0" for a in _TAMPERED)
        assert all(
            e.startswith(f"PW564: the evidence chain of agreement `{r.split('/')[0]}` does not verify")
            for r, e in errors.items()
        ), errors
        fresh = {a: _fresh_process_problems(url, a) for a in ids}
        assert here == fresh
        assert fresh["src"] == fresh["quiet"] == []
        # Record 1 is its event row (store migration 15), its bytes derived from the row: a re-hashed edit is the
        # event log's too, so no record disagrees with the log (PW586 at 1 before); the spliced payload and link
        # derive a record naming this agreement, its event and its outbox entry, which does not hash to `src`'s
        # hash (PW581 at 1, where the spliced record linked after `src`'s record 0 before: PW584 at 1, and its
        # event `splice/1` had no record: PW586).
        assert fresh == {
            "edit": [("PW581", 1)],
            "rehash": [("PW584", 2)],
            "pad": [("PW580", 1), ("PW584", 2), ("PW586", None)],
            "splice": [("PW581", 1), ("PW584", 2)],
            "src": [],
            "quiet": [],
        }
