"""Several PostgreSQL reads in one statement, answered exactly as the reads one by one would be.

Imported only by the PostgreSQL backend (psycopg is loaded lazily). Each read
becomes one column of one statement, `ARRAY(SELECT ROW(t.*) FROM (<read>) t)`:
its rows as an array of records, in the read's own order (PostgreSQL never
flattens a subquery with ORDER BY into the outer query, and an ARRAY of a
subquery holds its rows as the subquery yields them; the store's own checks
do not depend on that order either). Answered in binary, each field of a
record carries its type's OID and is loaded by that type's loader, as a
column of a read of its own is.

Where that would not give the same answer, the reads go one by one instead:

- a field whose type this connection has no binary loader for. A record
  carries a domain's own OID where a read of its own reports the domain's
  base type, so a column altered to a domain over `text` would come back as
  raw bytes: a hash compared as `b'sha256:...'`, an evidence link written
  as one. The answer of the statement is then dropped (the statement read
  only) and the reads run again, one by one;
- a read whose text holds `;` or a comment, which pasted inside parentheses
  would end the statement or swallow the rest of it;
- a read whose `?` count differs from its parameters: bound as one list,
  one read would take another's value where, alone, it fails;
- more reads, or parameters, than one statement may hold.

One limit remains: the answer is one row, and PostgreSQL builds a row of at
most 1 GB, so reads whose answers together pass that fail where one by one
each would not (a bundle's contents are capped far below, 64 MiB by default).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg import pq
from psycopg.abc import Buffer
from psycopg.types.composite import RecordBinaryLoader

MAX_READS = 1000  # one SELECT holds at most 1,664 columns
MAX_PARAMETERS = 65535  # the protocol's limit on one statement's parameters
_COUNT = struct.Struct("!i")
_FIELD = struct.Struct("!Ii")  # a field's type OID and length (-1 for NULL)


class UntypedField(Exception):
    """A record field of a type with no binary loader here: the reads must go one by one."""


class _TypedRecordLoader(RecordBinaryLoader):
    """`record` in binary, refusing (`UntypedField`) a field of a type this connection cannot load."""

    _typed: frozenset[int] = frozenset()

    def load(self, data: Buffer) -> tuple[Any, ...]:
        adapters = self._ctx.adapters if self._ctx is not None else psycopg.adapters
        (count,) = _COUNT.unpack_from(data, 0)
        offset = 4
        for _ in range(count):
            oid, length = _FIELD.unpack_from(data, offset)
            offset += 8 + max(length, 0)
            if oid not in self._typed:
                if adapters.get_loader(oid, pq.Format.BINARY) is None:
                    raise UntypedField(oid)
                self._typed = self._typed | {oid}
        return super().load(data)


def mergeable(statements: Sequence[tuple[str, Sequence[Any]]]) -> bool:
    """Whether these reads can travel as one statement and come back as they would one by one."""
    if not 1 < len(statements) <= MAX_READS or sum(len(p) for _, p in statements) > MAX_PARAMETERS:
        return False
    return all(
        ";" not in sql and "--" not in sql and "/*" not in sql and sql.count("?") == len(params)
        for sql, params in statements
    )


def together_sql(statements: Sequence[tuple[str, Sequence[Any]]]) -> tuple[str, tuple[Any, ...]]:
    """The one statement (with `?` placeholders) and its parameters, the reads' own in order."""
    columns = ", ".join(f"ARRAY(SELECT ROW(t.*) FROM ({sql}) t)" for sql, _ in statements)  # noqa: S608
    return f"SELECT {columns}", tuple(v for _, params in statements for v in params)


def typed_cursor(connection: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """A binary cursor of `connection` whose records refuse a field it cannot load as its own type."""
    cursor = connection.cursor(binary=True)
    cursor.adapters.register_loader("record", _TypedRecordLoader)
    return cursor
