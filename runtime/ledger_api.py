"""The one narrow interface between the runtime and any ledger.

The outbox worker, `show` and the evidence log talk to a ledger only through
these three calls, so the embedded ledgers (`InMemoryLedger`,
`DurableLedger`) and a Formance Ledger adapter are interchangeable: an
adapter is one class implementing this Protocol (docs/runtime.md, "The
ledger", maps each call to Formance's v2 API).

Contract:

- `apply(reference, program_text, variables)` runs a Numscript program (the
  bundle's `ledger/*.num` text) with its variables (Formance's string
  shapes: `"EUR/2 6490"`, `"escrow:a1"`) and commits every posting or none.
  The same reference with the same program and the same variables returns
  the original postings and moves nothing again; the same reference with
  another program or other variables is refused with PW757, naming which
  differs (`exists_with_different_program`, `exists_with_different_variables`).
  A source that is not external and cannot cover its send is refused with
  PW754 and nothing is written.
- `postings(reference)` returns the postings applied under `reference`, in
  order, or None when nothing was applied under it.
- `balances(accounts)` maps account names (without `@`) to minor units;
  with a list, exactly those accounts (0 for an account never touched), else
  every account with a non-zero balance. An agreement moves one currency,
  so one number per account is what callers need; an account holding more
  than one asset is refused (PW553) rather than summed across assets.
"""

from __future__ import annotations

from typing import Protocol

from .numscript import Posting

__all__ = ["Ledger", "Posting"]


class Ledger(Protocol):
    """Apply by reference, read postings by reference, read balances."""

    def apply(self, reference: str, program_text: str, variables: dict[str, str]) -> list[Posting]:
        """Run the program once per reference; see the module docstring for the contract."""
        ...

    def postings(self, reference: str) -> list[Posting] | None:
        """The postings applied under `reference`, in order; None if none was applied."""
        ...

    def balances(self, accounts: list[str] | None = None) -> dict[str, int]:
        """Account name -> balance in minor units."""
        ...
