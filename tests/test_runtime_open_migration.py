"""A refused `open` on a store made by the previous release leaves it exactly as it was.

tests/fixtures/stores/v1.sqlite is a schema-1 store (activations only) made
by the release before agreements existed. Opening an agreement on it
migrates it, but only once the agreement is known to be valid
(`runtime.agreements.check_open` runs every check first, reading only the
activation tables): a refusal must leave the file byte for byte as it was,
with no journal files beside it. The fixture is copied, never edited.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pactwright.cli.main import main
from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, open_agreement
from pactwright.runtime.store import open_store
from pactwright.runtime.store._migrations import LATEST

ROOT = Path(__file__).resolve().parent.parent
V1_STORE = ROOT / "tests" / "fixtures" / "stores" / "v1.sqlite"
PACT_ID = "marketplace.milestone"
PARTIES = ["--party", "buyer=alice", "--party", "seller=bob", "--party", "arbiter=carol"]
T0 = 1780315200


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    copy = tmp_path / "v1.sqlite"
    shutil.copy(V1_STORE, copy)
    return copy


def _untouched(copy: Path) -> None:
    assert copy.read_bytes() == V1_STORE.read_bytes()
    assert sorted(p.name for p in copy.parent.iterdir()) == ["v1.sqlite"]  # no -wal, -shm or -journal left


REFUSALS = [
    (["--param", "price=abc"], "PW503"),  # not money
    (["--param", "price=0.001"], "PW503"),  # finer than the currency's scale
    (["--param", "price=64.90", "--param", "colour=red"], "PW503"),  # no such param
    (["--param", "price=64.90", "--party", "courier=dan"], "PW504"),  # no such role
    (["--param", "price=64.90", "--id", "bad id!"], "PW502"),
]


@pytest.mark.parametrize(("extra", "code"), REFUSALS, ids=[c + ":" + " ".join(e) for e, c in REFUSALS])
def test_a_refused_open_through_the_cli_leaves_a_v1_store_byte_identical(
    v1: Path, extra: list[str], code: str, capsys: pytest.CaptureFixture[str]
) -> None:
    exit_code = main(["open", PACT_ID, "--store", str(v1), *PARTIES, *extra])
    err = capsys.readouterr().err
    assert exit_code != 0 and code in err and "Traceback" not in err, err
    _untouched(v1)


def test_an_open_of_an_unknown_pact_leaves_a_v1_store_byte_identical(
    v1: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["open", "no.such.pact", "--store", str(v1), "--param", "price=1.00", *PARTIES]) != 0
    assert "PW702" in capsys.readouterr().err
    _untouched(v1)


def test_a_refused_open_through_the_api_leaves_a_v1_store_unmigrated_and_a_valid_one_migrates(v1: Path) -> None:
    parties = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
    with open_store(str(v1), migrate_schema=False) as store:
        with pytest.raises(PactwrightError) as caught:
            open_agreement(store, PACT_ID, {"price": "-1.00"}, parties, agreement_id="a1", clock=TestClock(T0))
        assert caught.value.code == "PW503"
        assert store.schema_version() == 1
    _untouched(v1)
    with open_store(str(v1), migrate_schema=False) as store:
        opened = open_agreement(store, PACT_ID, {"price": "64.90"}, parties, agreement_id="a1", clock=TestClock(T0))
        assert store.schema_version() == LATEST and opened.version == 0
        assert [row[0] for row in store.dump()["agreements"]] == ["a1"]


def test_a_valid_open_through_the_cli_migrates_a_v1_store(v1: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["open", PACT_ID, "--store", str(v1), "--param", "price=64.90", *PARTIES, "--id", "a1"]) == 0
    capsys.readouterr()
    with open_store(str(v1), migrate_schema=False) as store:
        assert store.schema_version() == LATEST
        assert [row[0] for row in store.dump()["agreements"]] == ["a1"]
