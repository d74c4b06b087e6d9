"""PW189: names, the pact id and account addresses have a length bound, at the bound and one past it.

The store and the ledger index them, and PostgreSQL refuses an index entry
past 2,704 bytes (tests/test_backend_divergence_attacks.py runs such a
policy on both backends), so the compiler refuses a longer one.
"""

from __future__ import annotations

import pytest

from pactwright.compiler.checks.names import MAX_ADDRESS, MAX_NAME, MAX_PACT_ID
from pactwright.compiler.pipeline import check_bytes

BASE = (
    'pact "{pact}" version "1.0.0"\ncurrency EUR scale 2\ndefault deny\nrole {role}\n'
    "param {param}: money between 1.00 and 100.00\n"
    'account world "world" external\naccount {account} "{address}"\n'
    "state {state} initial\nstate done final\n"
    "transition {transition}: {state} -> done {{\n  by {role}\n  transfer {param} from world to {account}\n"
    "  stamp {stamp}\n}}\n"
)
NAMES = ("role", "param", "account", "state", "transition", "stamp")


def _policy(**given: str) -> bytes:
    fields = {"pact": "t.names", "address": "pool:x", **{k: k for k in NAMES}, **given}
    return BASE.format(**fields).encode()


def _codes(source: bytes) -> list[str]:
    return [d.code for d in check_bytes(source).diagnostics if d.severity.value == "error"]


def test_the_base_policy_compiles() -> None:
    assert _codes(_policy()) == []


@pytest.mark.parametrize("kind", NAMES)
def test_a_name_at_the_bound_compiles_and_one_past_it_is_pw189(kind: str) -> None:
    at, past = "n" * MAX_NAME, "n" * (MAX_NAME + 1)
    assert _codes(_policy(**{kind: at})) == []
    assert _codes(_policy(**{kind: past})) == ["PW189"]


def test_the_pact_id_and_the_address_have_their_own_bounds() -> None:
    assert _codes(_policy(pact="t." + "p" * (MAX_PACT_ID - 2))) == []
    assert _codes(_policy(pact="t." + "p" * (MAX_PACT_ID - 1))) == ["PW189"]
    assert _codes(_policy(address="pool:" + "a" * (MAX_ADDRESS - 5))) == []
    assert _codes(_policy(address="pool:" + "a" * (MAX_ADDRESS - 4))) == ["PW189"]
