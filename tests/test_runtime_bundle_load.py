"""What the command path re-verifies on every command, now that it reads only what it executes.

`submit` loads the agreement's bundle with `only=EXECUTED`: the manifest,
transitions.json and the ledger programs are read and re-hashed against the
manifest (and the manifest against the activated hash, the approval and
signatures against the activation), on every command. The bytes of files
it does not execute (reports, model, candidate) are not read, but their
rows must still be exactly the manifest's list, with its hashes and sizes.
`show`, `evidence`, `store verify` and activation still read every byte.
Each tampering below is a real UPDATE or DELETE on a real store.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, open_agreement, show, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import open_store
from tests.signed_bundles import BACKENDS, NOW, PACT_ID, default_trust, dump, signed, temporary_store

T0 = 1780315200
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as store_url:
        with open_store(store_url) as store:
            activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
            open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
        yield store_url


def _tamper(url: str, sql: str, params: tuple[Any, ...]) -> None:
    with open_store(url) as store, store.transaction() as db:
        db.execute(sql, params)


def _fund_refused(url: str, code: str) -> None:
    before = dump(url)
    with open_store(url) as store, pytest.raises(PactwrightError) as caught:
        submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0))
    assert caught.value.code == code, caught.value
    assert dump(url) == before


CONTENT = "UPDATE bundle_files SET content = ? WHERE path = ?"


@pytest.mark.parametrize("path", ["ledger/fund.num", "ledger/release.num", "transitions.json", "manifest.json"])
def test_an_executed_file_edited_in_the_store_refuses_every_command(url: str, path: str) -> None:
    with open_store(url) as store, store.transaction(write=False) as db:
        (data,) = db.query("SELECT content FROM bundle_files WHERE path = ?", (path,))[0]
    _tamper(url, CONTENT, (bytes(data) + b" ", path))
    _fund_refused(url, "PW703" if path == "manifest.json" else "PW705")


def test_an_unread_file_edited_in_the_store_is_caught_by_every_full_load(url: str) -> None:
    _tamper(url, CONTENT, (b"<html>edited</html>", "report.html"))
    with open_store(url) as store:
        # The command executes only the manifest, transitions.json and the ledger programs,
        # so it runs; every reader of the whole bundle refuses.
        assert submit(store, "a1", "fund", "buyer", "alice", "fund", clock=TestClock(T0)).version == 1
        with pytest.raises(PactwrightError) as caught:
            show(store, "a1")
        assert caught.value.code == "PW705"
        assert [f.code for f in store.verify_all()] == ["PW705", "PW705", "PW705"]  # bundle, activation, active


@pytest.mark.parametrize(
    ("sql", "params", "code"),
    [
        ("UPDATE bundle_files SET sha256 = ? WHERE path = ?", ("sha256:" + "0" * 64, "report.html"), "PW705"),
        ("UPDATE bundle_files SET size = size + 1 WHERE path = ?", ("model.json",), "PW705"),
        ("DELETE FROM bundle_files WHERE path = ?", ("report.md",), "PW704"),
        ("UPDATE activations SET approval = ?", (b"{}",), "PW706"),
        ("UPDATE activations SET signatures = ?", (b"{}",), "PW706"),
    ],
    ids=["unread-hash-column", "unread-size-column", "unread-file-deleted", "approval", "signatures"],
)
def test_rows_and_documents_are_checked_on_every_command(
    url: str, sql: str, params: tuple[Any, ...], code: str
) -> None:
    _tamper(url, sql, params)
    _fund_refused(url, code)
