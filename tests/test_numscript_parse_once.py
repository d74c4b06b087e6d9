"""`parse_program` parses each text once per process: same text, same program; refused text, refused again."""

from __future__ import annotations

import dataclasses

import pytest

from pactwright.errors import LedgerError
from pactwright.runtime.numscript import parse_program, run_program

PROGRAM = "vars { monetary $amount }\nsend $amount ( source = @world destination = @escrow:a1 )\n"


def test_the_same_text_gives_the_same_program_object() -> None:
    first = parse_program(PROGRAM)
    assert parse_program(PROGRAM) is first
    # A text that differs only in spacing parses to an equal program (spans are not compared), as before.
    assert parse_program(PROGRAM.replace("send", "send ")) == first


def test_a_remembered_program_cannot_be_changed_by_a_caller() -> None:
    program = parse_program(PROGRAM)
    with pytest.raises(dataclasses.FrozenInstanceError):
        program.statements = ()  # type: ignore[misc]
    assert isinstance(program.statements, tuple) and isinstance(program.variables, tuple)
    postings = run_program(parse_program(PROGRAM), {"amount": "EUR/2 100"}, {})
    assert [(p.source, p.destination, p.amount) for p in postings] == [("world", "escrow:a1", 100)]


def test_a_refused_text_is_refused_every_time_and_never_remembered() -> None:
    broken = "send [EUR/2 100] ( source = @world destination = )"
    for _ in range(2):
        with pytest.raises(LedgerError) as caught:
            parse_program(broken)
        assert caught.value.code == "PW751"
    # Nothing was remembered for it: a third call misses the cache again.
    misses = parse_program.cache_info().misses
    with pytest.raises(LedgerError):
        parse_program(broken)
    assert parse_program.cache_info().misses == misses + 1


def test_the_memory_is_bounded() -> None:
    limit = parse_program.cache_info().maxsize
    for n in range(limit + 10):
        parse_program(f"send [EUR/2 {n + 1}] ( source = @world destination = @escrow:a1 )")
    assert 0 < parse_program.cache_info().currsize <= limit
