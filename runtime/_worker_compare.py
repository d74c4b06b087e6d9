"""The posting comparison the outbox worker runs after every delivery.

The command path stores, at commit, the postings it expects the ledger to
make (`source_address`, `destination_address`, `amount` as a decimal
string, `asset`). After `Ledger.apply` the worker compares what the ledger
RETURNED with those, exactly: same length, same order, same accounts, same
amounts, same asset. Anything else (nothing returned, a value that is not a
posting, a different posting) is a mismatch and the entry is quarantined,
never marked delivered: a ledger that answers with something the commit did
not expect is either not the ledger the store committed against, or one of
the two was changed behind the runtime's back, and a human must decide.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["Mismatch", "compare", "ledger_side", "normalize_expected"]

_KEYS = ("source_address", "destination_address", "amount", "asset")


class Mismatch(Exception):
    """Why the ledger's postings are not the expected ones (one line)."""


def normalize_expected(stored: Any) -> list[dict[str, str]]:
    """The stored expected postings as a list of four-key string dicts (Mismatch if the row is malformed)."""
    if not isinstance(stored, list):
        raise Mismatch("the expected postings stored at commit are not a list")
    out = []
    for index, item in enumerate(stored):
        if not isinstance(item, dict) or sorted(item) != sorted(_KEYS):
            raise Mismatch(f"expected posting {index} stored at commit is malformed")
        if not all(isinstance(item[k], str) for k in _KEYS) or not item["amount"].isdigit():
            raise Mismatch(f"expected posting {index} stored at commit is malformed")
        out.append({k: str(item[k]) for k in _KEYS})
    return out


def _one(item: object) -> dict[str, str] | None:
    """One ledger posting as the comparison's dict, or None when it is not a well-formed posting."""
    source, destination = getattr(item, "source", None), getattr(item, "destination", None)
    amount, asset = getattr(item, "amount", None), getattr(item, "asset", None)
    if not (isinstance(source, str) and isinstance(destination, str) and isinstance(asset, str)):
        return None
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        return None
    return {"source_address": source, "destination_address": destination, "amount": str(amount), "asset": asset}


def ledger_side(returned: object) -> list[dict[str, str]] | list[str] | None:
    """What the ledger returned, in a form that can be stored and shown (malformed items as short text)."""
    if returned is None:
        return None
    if not isinstance(returned, list | tuple):
        return [f"not a list: {type(returned).__name__}"]
    shown: list[Any] = []
    for item in returned:
        one = _one(item)
        shown.append(one if one is not None else f"malformed: {item!r:.120}")
    return shown


def compare(
    expected: Sequence[dict[str, str]], returned: object, hook: Callable[[int], None] | None = None
) -> list[dict[str, str]]:
    """The ledger's postings if they equal `expected`, else Mismatch; `hook(i)` runs before posting i."""
    if returned is None:
        raise Mismatch("the ledger returned no postings for the reference")
    if not isinstance(returned, list | tuple):
        raise Mismatch(f"the ledger returned `{type(returned).__name__}`, not a list of postings")
    got: list[dict[str, str]] = []
    for index, item in enumerate(returned):
        if hook is not None:
            hook(index)
        one = _one(item)
        if one is None:
            raise Mismatch(f"ledger posting {index} is malformed")
        got.append(one)
    if len(got) != len(expected):
        raise Mismatch(f"the ledger made {len(got)} postings, the commit expected {len(expected)}")
    for index, (mine, theirs) in enumerate(zip(expected, got, strict=True)):
        for key in _KEYS:
            if mine[key] != theirs[key]:
                raise Mismatch(
                    f"posting {index}: `{key}` is `{theirs[key]}` in the ledger, `{mine[key]}` expected at commit"
                )
    return got
