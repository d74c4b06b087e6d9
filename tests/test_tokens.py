"""Bearer tokens on both backends: issued once, stored as a hash, refused alike when wrong, never the clock.

Every test runs against a real SQLite file and a real PostgreSQL schema.
A refusal is checked for its code, its HTTP status and that the store is
byte for byte what it was. The secret is looked for in every row (and, for
SQLite, in the database files themselves). That an unknown token id and a
wrong secret cost the same is checked here by counting the work each does
(one lookup, one hash, one constant-time compare); the wall-clock ratio is
measured by bench/auth_bench.py.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.cli.main import main
from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, open_agreement
from pactwright.runtime import tokens as tokens_module
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.parties import add_party
from pactwright.runtime.store import _migrations as migrations
from pactwright.runtime.store import open_store
from pactwright.runtime.store._backend import connect
from pactwright.runtime.tokens import (
    AuthenticationError,
    AuthorizationError,
    Principal,
    authenticate,
    authorize,
    issue_token,
    list_tokens,
    pact_clock_roles,
    require_role,
    revoke_token,
)
from tests.signed_bundles import BACKENDS, NOW, PACT_ID, default_trust, dump, signed, temporary_store

T0 = 1780315200  # 2026-06-01T12:00:00Z
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as store_url:
        with open_store(store_url) as store:
            add_party(store, "alice", "buyer", None, T0)
            add_party(store, "bob", "seller", None, T0)
        yield store_url


def _bearer(token: str) -> str:
    return f"Bearer {token}"


def _refused(url: str, header: str | None) -> PactwrightError:
    """Authenticate with `header`: it must be refused (401) and leave the store as it was."""
    before = dump(url)
    with open_store(url, migrate_schema=False) as store, pytest.raises(AuthenticationError) as caught:
        authenticate(store, header)
    assert caught.value.http_status == 401
    assert dump(url) == before
    return caught.value


# Issue, authenticate, revoke ---------------------------------------------------------


def test_an_issued_token_authenticates_as_its_party_until_revoked(url: str) -> None:
    with open_store(url) as store:
        issued = issue_token(store, "alice", T0)
        prefix, token_id, secret = issued.token.split("_", 2)
        assert (prefix, token_id, len(secret)) == ("pwt", issued.token_id, 43)
        principal = authenticate(store, _bearer(issued.token))
        assert principal == Principal("alice", frozenset({"buyer"}), issued.token_id)
        assert authenticate(store, f"bearer  {issued.token}") == principal  # the scheme is case-insensitive
        revoke_token(store, issued.token_id, T0 + 5)
        listed = list_tokens(store)
    assert [(t.token_id, t.party, t.created_at, t.revoked_at) for t in listed] == [
        (issued.token_id, "alice", T0, T0 + 5)
    ]
    assert _refused(url, _bearer(issued.token)).code == "PW671"


def test_revoking_twice_changes_nothing_and_an_unknown_id_is_refused(url: str) -> None:
    with open_store(url) as store:
        issued = issue_token(store, "alice", T0)
        revoke_token(store, issued.token_id, T0 + 5)
    before = dump(url)
    with open_store(url) as store:
        revoke_token(store, issued.token_id, T0 + 99)  # idempotent: the first revocation time stays
    assert dump(url) == before
    with open_store(url) as store, pytest.raises(PactwrightError) as caught:
        revoke_token(store, "0123456789abcdef", T0)
    assert caught.value.code == "PW675"
    assert dump(url) == before


def test_a_token_only_for_a_registered_party(url: str) -> None:
    before = dump(url)
    with open_store(url) as store, pytest.raises(PactwrightError) as caught:
        issue_token(store, "mallory", T0)
    assert caught.value.code == "PW674"
    assert dump(url) == before


def test_roles_are_read_at_each_call(url: str) -> None:
    with open_store(url) as store:
        issued = issue_token(store, "alice", T0)
        assert authenticate(store, _bearer(issued.token)).roles == {"buyer"}
        add_party(store, "alice", "arbiter", None, T0 + 1)
        assert authenticate(store, _bearer(issued.token)).roles == {"buyer", "arbiter"}


def test_the_secret_is_never_stored(url: str, tmp_path: Path) -> None:
    with open_store(url) as store:
        issued = issue_token(store, "alice", T0)
    secret = issued.token.split("_", 2)[2]
    rows = dump(url)
    assert secret not in repr(rows)
    assert rows["tokens"] == [(issued.token_id, "alice", hashlib.sha256(secret.encode()).hexdigest(), T0, None)]
    for path in tmp_path.glob("store.db*"):  # SQLite: the file and its WAL hold no copy either
        assert secret.encode() not in path.read_bytes()


# Refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "pwt_0123456789abcdef_" + "A" * 43,  # no scheme
        "Basic YWxpY2U6cGFzcw==",
        "Bearer ",
        "Bearer pwt_0123456789abcdef_" + "A" * 42,  # truncated
        "Bearer pwt_0123456789ABCDEF_" + "A" * 43,  # not the id alphabet
        "Bearer pwt_0123456789abcdef_" + "A" * 43 + " extra",
        "Bearer " + "x" * 300,
        "Bearer pwt_0123456789abcdef_" + "\u00e9" * 43,
    ],
    ids=["none", "empty", "no-scheme", "basic", "no-token", "truncated", "upper-id", "extra", "long", "non-ascii"],
)
def test_a_missing_or_malformed_header_is_pw670(url: str, header: str | None) -> None:
    assert _refused(url, header).code == "PW670"


def test_unknown_wrong_and_revoked_tokens_are_one_refusal(url: str) -> None:
    with open_store(url) as store:
        good = issue_token(store, "alice", T0)
        revoked = issue_token(store, "bob", T0)
        revoke_token(store, revoked.token_id, T0 + 1)
    secret = good.token.split("_", 2)[2]
    wrong = secret[:-1] + ("A" if secret[-1] != "A" else "B")
    cases = {
        "unknown": _bearer(f"pwt_0123456789abcdef_{secret}"),
        "wrong": _bearer(f"pwt_{good.token_id}_{wrong}"),
        "other-id": _bearer(f"pwt_{revoked.token_id}_{secret}"),
        "revoked": _bearer(revoked.token),
    }
    refusals = {name: _refused(url, header) for name, header in cases.items()}
    assert {e.code for e in refusals.values()} == {"PW671"}
    assert len({e.message for e in refusals.values()}) == 1  # the same words, whichever it was
    assert len({json.dumps(e.to_json(), sort_keys=True) for e in refusals.values()}) == 1


def test_unknown_id_and_wrong_secret_do_the_same_work(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The unknown-id path hashes and compares as the wrong-secret path does, and runs the same queries."""
    with open_store(url) as store:
        good = issue_token(store, "alice", T0)
        secret = good.token.split("_", 2)[2]
        wrong = secret[:-1] + ("A" if secret[-1] != "A" else "B")
        work: list[str] = []
        real_hash, real_compare = tokens_module._hash, tokens_module.hmac.compare_digest

        def hashed(value: str) -> str:
            work.append("hash")
            return real_hash(value)

        def compared(a: bytes, b: bytes) -> bool:
            work.append(f"compare {len(a)} {len(b)}")
            return real_compare(a, b)

        backend: Any = store._db  # counting the queries authentication sends
        real_query = backend.query

        def query(sql: str, params: Any = ()) -> Any:
            work.append(sql)
            return real_query(sql, params)

        monkeypatch.setattr(tokens_module, "_hash", hashed)
        monkeypatch.setattr(tokens_module.hmac, "compare_digest", compared)
        monkeypatch.setattr(backend, "query", query)
        traces = []
        for header in (_bearer(f"pwt_0123456789abcdef_{secret}"), _bearer(f"pwt_{good.token_id}_{wrong}")):
            work.clear()
            with pytest.raises(AuthenticationError):
                authenticate(store, header)
            traces.append(list(work))
    assert traces[0] == traces[1]
    assert traces[0].count("hash") == 1
    assert traces[0].count("compare 64 64") == 1


# Authority ---------------------------------------------------------------------------


def test_a_role_the_party_does_not_hold_is_pw672(url: str) -> None:
    with open_store(url) as store:
        buyer = authenticate(store, _bearer(issue_token(store, "alice", T0).token))
    require_role(buyer, "buyer")
    with pytest.raises(AuthorizationError) as caught:
        require_role(buyer, "seller")
    assert caught.value.code == "PW672"
    assert caught.value.http_status == 403


@pytest.fixture(params=BACKENDS)
def agreement_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The marketplace milestone pact (`clock scheduler`) active, agreement `a1` open."""
    with temporary_store(request.param, tmp_path) as store_url:
        with open_store(store_url) as store:
            activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
            open_agreement(store, PACT_ID, {"price": "64.90"}, PARTIES, agreement_id="a1", clock=TestClock(T0))
            add_party(store, "alice", "buyer", None, T0)
        yield store_url


def test_the_clock_role_is_never_a_tokens_even_when_registered(agreement_url: str) -> None:
    with open_store(agreement_url) as store:
        assert pact_clock_roles(store, "a1") == {"scheduler"}
        add_party(store, "scheduler", "scheduler", None, T0)  # someone registers the clock's name as a party
        clock = authenticate(store, _bearer(issue_token(store, "scheduler", T0).token))
        buyer = authenticate(store, _bearer(issue_token(store, "alice", T0).token))
        assert "scheduler" in clock.roles
        before = store.dump()
        with pytest.raises(AuthorizationError) as caught:
            authorize(store, clock, "a1", "scheduler")
        assert (caught.value.code, caught.value.http_status) == ("PW673", 403)
        with pytest.raises(AuthorizationError) as caught:
            require_role(clock, "scheduler", clock_roles={"scheduler"})
        assert caught.value.code == "PW673"
        with pytest.raises(AuthorizationError) as caught:
            authorize(store, buyer, "a1", "seller")  # a buyer's token acting as the seller
        assert caught.value.code == "PW672"
        authorize(store, buyer, "a1", "buyer")
        with pytest.raises(PactwrightError) as caught:
            authorize(store, buyer, "no-such", "buyer")
        assert caught.value.code == "PW501"
        assert store.dump() == before


# Migration 7 -------------------------------------------------------------------------


def _store_at_version_6(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store made by the release before tokens: migrations 1 to 6 only, with a registered party."""
    with monkeypatch.context() as patched:
        patched.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:6])
        backend = connect(url)
        try:
            assert migrations.migrate(backend) == 6
        finally:
            backend.close()
    with open_store(url, migrate_schema=False) as store:
        assert store.schema_version() == 6
        add_party(store, "alice", "buyer", None, T0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_migration_7_upgrades_a_version_6_store(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with temporary_store(backend, tmp_path) as url:
        _store_at_version_6(url, monkeypatch)
        before = dump(url)
        assert "tokens" not in before
        with open_store(url, migrate_schema=False) as store:
            assert list_tokens(store) == []
            assert _refused(url, _bearer("pwt_0123456789abcdef_" + "A" * 43)).code == "PW671"
            with pytest.raises(PactwrightError) as caught:
                issue_token(store, "mallory", T0)  # refused before migrating: the store is unchanged
            assert caught.value.code == "PW674"
            assert store.schema_version() == 6
        assert dump(url) == before
        with open_store(url, migrate_schema=False) as store:
            issued = issue_token(store, "alice", T0)
            assert store.schema_version() == migrations.LATEST >= migrations.TOKEN_TABLES
            assert authenticate(store, _bearer(issued.token)).party == "alice"
        after = dump(url)
        assert (7, "bearer tokens") in after["schema_migrations"]
        assert max(v for v, _ in after["schema_migrations"]) == migrations.LATEST
        assert after["parties"] == before["parties"]
        with open_store(url) as store:  # a current store: opening migrates nothing
            assert store.dump() == after


# CLI ---------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def _clock(tmp_path: Path) -> str:
    path = tmp_path / "clock"
    path.write_text(f"{T0}\n")
    return str(path)


def test_cli_add_with_token_then_token_tokens_and_revoke(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = ("--store", url, "--clock-file", _clock(tmp_path))
    code, out, _ = _cli(capsys, "parties", "add", "carol", "--role", "arbiter", *clock, "--token")
    assert code == 0
    text_token = next(w for w in out.split() if w.startswith("pwt_"))
    assert "shown once" in out
    code, out, _ = _cli(capsys, "parties", "token", "carol", *clock, "--format", "json")
    assert code == 0
    issued = json.loads(out)
    assert issued["party"] == "carol" and issued["created_at"] == T0
    code, out, _ = _cli(capsys, "parties", "add", "dora", "--role", "buyer", *clock, "--token", "--format", "json")
    assert code == 0
    added = json.loads(out)
    assert added["party"] == "dora" and added["token"]["token"].startswith("pwt_")
    with open_store(url) as store:
        for token, party in ((text_token, "carol"), (issued["token"], "carol"), (added["token"]["token"], "dora")):
            assert authenticate(store, _bearer(token)).party == party
    code, out, _ = _cli(capsys, "parties", "revoke", issued["token_id"], *clock)
    assert (code, out) == (0, f"revoked {issued['token_id']}\n")
    code, out, _ = _cli(capsys, "parties", "tokens", "--store", url, "--format", "json")
    listed = {t["token_id"]: t for t in json.loads(out)}
    assert code == 0 and len(listed) == 3
    assert listed[issued["token_id"]]["revoked_at"] == T0
    assert all("token" not in t and "secret_hash" not in t for t in listed.values())
    code, out, _ = _cli(capsys, "parties", "tokens", "--store", url)
    assert code == 0 and out.endswith("3 tokens\n") and "pwt_" not in out
    _refused(url, _bearer(issued["token"]))


def test_cli_refusals_change_nothing(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clock = ("--store", url, "--clock-file", _clock(tmp_path))
    before = dump(url)
    code, _, err = _cli(capsys, "parties", "token", "mallory", *clock)
    assert code == 2 and err.startswith("error[PW674]")
    code, _, err = _cli(capsys, "parties", "revoke", "0123456789abcdef", *clock)
    assert code == 2 and err.startswith("error[PW675]")
    assert dump(url) == before
