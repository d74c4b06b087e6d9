"""Attacks on activation that the tamper suite does not make, each found by an adversarial review.

Every case uses real signed bundles written to disk and real stores
(SQLite files and PostgreSQL schemas, both where the backend matters), and
asserts the refusal's code and that the store did not change:

- store tampering that keeps every row consistent with every other: the
  active pointer set back to an older activation, or deleted, which would
  let an older signed bundle in without `--force-rollback` (and make the
  runtime execute the older version at once); an activation history with a
  record removed or a forced rollback re-labelled;
- rows of the wrong type (text where bytes were stored): a refusal with a
  PW70x code, never an internal error;
- a refusal must leave an SQLite store byte for byte as it was, even one
  restored in rollback-journal mode (the read after a refusal switched it
  to WAL, rewriting its header);
- two activations racing on a new SQLite store: one "database is locked"
  at open, not an outcome;
- a bundle changed while it is read (a file vanishing between the size pass
  and the read), a bundle of many directories (one open descriptor each
  until the read), a directory of very many names: PW421 and PW423, never
  a usage error;
- an `expires` spelled with non-ASCII digits (`２０３０-...`), which the
  parser read as a second spelling of a time; a `--now` that overflows;
- a PostgreSQL URL whose schema does not exist: PW700, not a traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.cli.main import main
from pactwright.errors import PactwrightError, StoreError
from pactwright.runtime import _bundle_reader
from pactwright.runtime.activation import FixedClock, Limits, Refusal, activate_files, read_bundle, verify_bundle
from pactwright.runtime.store import open_store
from tests.signed_bundles import (
    BACKENDS,
    NOW,
    PACT_ID,
    POSTGRES_URL,
    default_trust,
    dump,
    signed,
    temporary_store,
    write,
)

CLOCK = FixedClock(datetime.fromisoformat(NOW))


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as url:
        yield url


def _sql(url: str, *statements: str) -> None:
    """Change the store behind pactwright's back, as someone with database access would."""
    if url.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)
        return
    with sqlite3.connect(url) as conn:
        for statement in statements:
            conn.execute(statement)


def _activated(url: str, *versions: str) -> None:
    with open_store(url) as store:
        for version in versions:
            activate_files(store, signed(version), default_trust(), clock=CLOCK)


def _activate_cli(tmp_path: Path, url: str, files: dict[str, bytes], name: str, *args: str) -> int:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    bundle = write(files, tmp_path / name)
    return main(["activate", str(bundle), "--trust", str(trust), "--store", url, "--now", NOW, *args])


# The active pointer is the rollback guard: it must name the pact's latest activation ----------


_POINT_BACK = (
    "UPDATE active SET activation_id = 1, pact_version = (SELECT pact_version FROM activations WHERE id = 1), "
    "manifest_hash = (SELECT manifest_hash FROM activations WHERE id = 1)"
)


def test_an_active_pointer_set_back_consistently_is_refused_at_load_and_at_activation(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One UPDATE, every column consistent with activation 1: no longer the runtime's active version."""
    _activated(store_url, "1.0.0", "1.1.0", "1.2.0")
    _sql(store_url, _POINT_BACK)
    with open_store(store_url) as store, pytest.raises(StoreError) as caught:
        store.load_active(PACT_ID)  # would have returned 1.0.0: a rollback nobody signed
    assert caught.value.code == "PW707"
    before = dump(store_url)
    capsys.readouterr()
    assert _activate_cli(tmp_path, store_url, signed("1.1.0"), "b") == 1  # 1.1.0 < 1.2.0: not an upgrade
    assert "error[PW707]" in capsys.readouterr().err
    assert dump(store_url) == before
    assert main(["store", "verify", "--store", store_url]) == 1
    assert "error[PW707]: active version of marketplace.milestone" in capsys.readouterr().err


def test_a_deleted_active_row_does_not_let_an_older_version_in(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _activated(store_url, "1.0.0", "1.1.0")
    _sql(store_url, "DELETE FROM active")
    before = dump(store_url)
    capsys.readouterr()
    assert _activate_cli(tmp_path, store_url, signed("1.0.0"), "old") == 1  # was "activated ... (first version)"
    assert "error[PW707]" in capsys.readouterr().err
    assert dump(store_url) == before
    assert main(["store", "verify", "--store", store_url]) == 1
    assert "no version of `marketplace.milestone` is active, but activation 2" in capsys.readouterr().err


@pytest.mark.parametrize(
    "statements",
    [
        # The middle record removed: 1.2.0 says it replaced 1.1.0, but 1.0.0 is before it now.
        ("DELETE FROM activations WHERE id = 2",),
        # A forced rollback re-labelled as an ordinary upgrade (its reason erased).
        ("UPDATE activations SET forced = 0, reason = NULL WHERE id = 4",),
        # An ordinary upgrade re-labelled as a forced rollback.
        ("UPDATE activations SET forced = 1, reason = 'made up' WHERE id = 2",),
        # The record of what was replaced rewritten.
        ("UPDATE activations SET previous_version = '0.0.1' WHERE id = 3",),
    ],
    ids=["middle-record-deleted", "rollback-relabelled", "upgrade-relabelled", "previous-rewritten"],
)
def test_an_edited_activation_history_is_found_by_store_verify(
    store_url: str, statements: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    _activated(store_url, "1.0.0", "1.1.0", "1.2.0")
    with open_store(store_url) as store:
        activate_files(store, signed("1.1.0"), default_trust(), clock=CLOCK, force_reason="incident 7")
    assert main(["store", "verify", "--store", store_url]) == 0
    _sql(store_url, *statements)
    capsys.readouterr()
    assert main(["store", "verify", "--store", store_url]) == 1
    assert "error[PW707]: activations of marketplace.milestone" in capsys.readouterr().err


# Rows of the wrong type: a refusal, never an internal error ------------------------------------


_SQLITE_RETYPED = [
    pytest.param("UPDATE bundle_files SET content = CAST(content AS TEXT) WHERE path = 'model.json'", "PW705"),
    pytest.param("UPDATE bundle_files SET size = 'large' WHERE path = 'model.json'", "PW705"),
    pytest.param("UPDATE activations SET approval = CAST(approval AS TEXT)", "PW706"),
    pytest.param("UPDATE activations SET signatures = CAST(signatures AS TEXT)", "PW706"),
    pytest.param("UPDATE active SET activation_id = 'one'", "PW707"),
]
_POSTGRES_RETYPED = [
    pytest.param(
        "ALTER TABLE bundle_files ALTER COLUMN content TYPE TEXT USING convert_from(content, 'UTF8')", "PW705"
    ),
    pytest.param("ALTER TABLE activations ALTER COLUMN signatures TYPE TEXT USING encode(signatures, 'hex')", "PW706"),
]


def _retyped(backend: str, statement: str, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with temporary_store(backend, tmp_path) as url:
        _activated(url, "1.0.0")
        _sql(url, statement)
        with open_store(url) as store, pytest.raises(StoreError) as caught:
            store.load_active(PACT_ID)
        assert caught.value.code == code
        capsys.readouterr()
        assert main(["store", "verify", "--store", url]) == 1
        assert f"error[{code}]" in capsys.readouterr().err
        before = dump(url)
        assert _activate_cli(tmp_path, url, signed("1.1.0"), "next") == 1
        assert f"error[{code}]" in capsys.readouterr().err
        assert dump(url) == before


@pytest.mark.parametrize(("statement", "code"), _SQLITE_RETYPED)
def test_sqlite_rows_of_the_wrong_type_are_refused(
    statement: str, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _retyped("sqlite", statement, code, tmp_path, capsys)


@pytest.mark.parametrize(("statement", "code"), _POSTGRES_RETYPED)
def test_postgresql_columns_of_the_wrong_type_are_refused(
    statement: str, code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _retyped("postgresql", statement, code, tmp_path, capsys)


# Byte for byte, and racing on a new store -------------------------------------------------------


def _file_state(url: str) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(url).parent.glob("store.db*"))}


@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_a_refusal_leaves_an_sqlite_store_byte_for_byte(
    journal: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No file of the store changes or appears, even for a store restored from a dump (rollback journal)."""
    url = str(tmp_path / "store.db")
    _activated(url, "1.1.0")
    with contextlib.closing(sqlite3.connect(url)) as conn:
        assert conn.execute(f"PRAGMA journal_mode={journal}").fetchone()[0] == journal
    before = _file_state(url)
    assert list(before) == ["store.db"]
    tampered = signed("1.2.0")
    tampered["model.json"] += b" "
    assert _activate_cli(tmp_path, url, tampered, "tampered") == 1  # PW434: the store is only read
    assert _activate_cli(tmp_path, url, signed("1.0.0"), "older") == 1  # PW460: refused in the transaction
    assert _activate_cli(tmp_path, url, signed("1.1.0"), "same") == 0  # already active: nothing changes
    assert main(["store", "verify", "--store", url]) == 0
    err = capsys.readouterr().err
    assert "error[PW434]" in err
    assert "error[PW460]" in err
    assert _file_state(url) == before
    assert _activate_cli(tmp_path, url, signed("1.2.0"), "next") == 0  # a real write may switch it to WAL
    with contextlib.closing(sqlite3.connect(url)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with open_store(url) as store:
        assert store.load_active(PACT_ID).pact_version == "1.2.0"


def test_opening_a_new_sqlite_store_waits_for_another_process_creating_it(tmp_path: Path) -> None:
    """SQLite refuses a journal switch at once (no busy wait) while another connection writes the new file."""
    url = str(tmp_path / "store.db")
    creator = sqlite3.connect(url, isolation_level=None, check_same_thread=False)
    creator.execute("BEGIN IMMEDIATE")
    # What another process opening the new store writes first (a table of someone else's would be refused).
    creator.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    release = threading.Timer(0.3, lambda: creator.execute("COMMIT"))
    release.start()
    try:
        with open_store(url) as store:  # was: PW700 "cannot open the store: database is locked"
            assert store.schema_version() >= 1
    finally:
        release.join()
        creator.close()


def test_racing_activations_of_two_versions_on_a_new_store_have_one_outcome(store_url: str) -> None:
    files = {version: signed(version) for version in ("1.1.0", "1.2.0")}
    barrier = threading.Barrier(2)
    results: dict[str, str] = {}

    def worker(version: str) -> None:
        barrier.wait()
        try:
            with open_store(store_url) as store:
                results[version] = activate_files(store, files[version], default_trust(), clock=CLOCK).decision.action
        except PactwrightError as exc:
            results[version] = exc.code

    threads = [threading.Thread(target=worker, args=(version,)) for version in files]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results["1.2.0"] == "activate"
    assert results["1.1.0"] in {"activate", "PW460"}  # before 1.2.0, or refused after it
    with open_store(store_url) as store:
        assert store.load_active(PACT_ID).pact_version == "1.2.0"
        history = [(r.pact_version, r.previous_version) for r in store.history(PACT_ID)]
        assert store.verify_all() == []
    assert history in ([("1.2.0", None)], [("1.1.0", None), ("1.2.0", "1.1.0")])


# Reading the directory: PW421 and PW423, never a usage error -----------------------------------


def test_a_file_removed_between_sizing_and_reading_is_pw421(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = write(signed(), tmp_path / "b")
    read = _bundle_reader._read

    def remove_first(entry: Any) -> bytes:
        if entry.path == "model.json":
            (bundle / "model.json").unlink()
        return read(entry)

    monkeypatch.setattr(_bundle_reader, "_read", remove_first)
    with pytest.raises(Refusal) as caught:
        read_bundle(bundle)
    assert caught.value.code == "PW421"


def test_a_file_removed_between_listing_and_sizing_is_pw421(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = write(signed(), tmp_path / "b")
    stat = os.stat

    def remove_first(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if path == "trace.json" and "dir_fd" in kwargs and (bundle / "trace.json").exists():
            (bundle / "trace.json").unlink()
        return stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", remove_first)
    with pytest.raises(Refusal) as caught:
        read_bundle(bundle)
    assert caught.value.code == "PW421"


_FEW_DESCRIPTORS = """
import resource, sys
from pactwright.errors import PactwrightError
from pactwright.runtime.activation import read_bundle
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
try:
    read_bundle(sys.argv[1])
except PactwrightError as exc:
    print(exc.code)
"""


def test_a_bundle_of_many_directories_is_pw423_not_out_of_descriptors(tmp_path: Path) -> None:
    """Each directory stays open until every file is read; 200 of them exhaust a 128-descriptor process."""
    bundle = write(signed(), tmp_path / "b")
    for index in range(200):
        (bundle / f"d{index}").mkdir()
        (bundle / f"d{index}" / "f").write_bytes(b"")
    result = subprocess.run(
        [sys.executable, "-c", _FEW_DESCRIPTORS, str(bundle)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.stdout.strip() == "PW423", result.stdout + result.stderr  # was PW001: "Too many open files"


def test_a_directory_of_very_many_names_is_refused_without_listing_all_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = write(signed(), tmp_path / "b")
    for index in range(300):
        (bundle / f"e{index:03d}").write_bytes(b"")
    seen = 0
    scandir = os.scandir

    class Counting:
        def __init__(self, fd: Any) -> None:
            self.inner = scandir(fd)

        def __enter__(self) -> Counting:
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

        def __iter__(self) -> Iterator[os.DirEntry[str]]:
            nonlocal seen
            for entry in self.inner:
                seen += 1
                yield entry

    monkeypatch.setattr(os, "scandir", Counting)
    with pytest.raises(Refusal) as caught:
        read_bundle(bundle, Limits(max_files=20, max_directories=2))
    assert caught.value.code == "PW423"
    assert seen <= 23  # the limits plus the one entry that broke them, not all 313


# Time: one spelling of `expires`, and a `--now` that overflows ---------------------------------


@pytest.mark.parametrize(
    "expires", ["\uff12\uff10\uff13\uff10-01-01T00:00:00Z", "\u0662\u0660\u0663\u0660-01-01T00:00:00Z"]
)
def test_expires_with_non_ascii_digits_is_refused(expires: str) -> None:
    """A validly signed statement, but `expires` in full-width or Arabic-Indic digits: not the documented form."""
    files = signed(expires=expires)
    with pytest.raises(Refusal) as caught:
        verify_bundle(files, default_trust(), now=datetime.fromisoformat(NOW))
    assert caught.value.code == "PW437"


@pytest.mark.parametrize(
    "now", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "\uff12\uff10\uff12\uff16-06-01"]
)
def test_an_unusable_now_is_a_usage_error(now: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trust = tmp_path / "trust.json"
    trust.write_bytes(default_trust())
    bundle = write(signed(), tmp_path / "b")
    url = str(tmp_path / "store.db")
    assert main(["activate", str(bundle), "--trust", str(trust), "--store", url, "--now", now]) == 2  # was 3 or 0
    assert "error[PW001]: `--now` value" in capsys.readouterr().err
    assert not Path(url).exists()


# PostgreSQL: a schema that does not exist ------------------------------------------------------


def test_a_postgresql_store_without_its_schema_is_pw700(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    separator = "&" if "?" in POSTGRES_URL else "?"
    url = f"{POSTGRES_URL}{separator}options=-csearch_path%3Dpw_no_such_schema_{os.getpid()}"
    assert _activate_cli(tmp_path, url, signed(), "b") == 2  # was 3: an internal error
    assert "error[PW700]: cannot open the store" in capsys.readouterr().err


# Trust: a public key anyone can sign for -------------------------------------------------------

_P = 2**255 - 19
_ORDER_8_Y = 2707385501144840649318225287225658788936804267575313519463743609750303402022
_SMALL_ORDER = {"order-1": 1, "order-2": _P - 1, "order-4": 0, "order-8": _ORDER_8_Y, "order-8-neg": _P - _ORDER_8_Y}


def _raw(y: int, sign: int = 0) -> bytes:
    return (y | (sign << 255)).to_bytes(32, "little")


def _trust_with_signer(raw: bytes) -> bytes:
    from pactwright.canonical import canonical_bytes, hash_bytes
    from pactwright.signing import TRUST_FORMAT, encode_b64
    from tests.signed_bundles import key

    entries = [
        {"keyid": key("alice").keyid, "public_key": key("alice").public_b64, "roles": ["approver"]},
        {"keyid": hash_bytes(raw), "public_key": encode_b64(raw), "roles": ["signer"]},
    ]
    keys = [{**entry, "scope": None, "revoked": False} for entry in entries]
    return canonical_bytes({"format": TRUST_FORMAT, "threshold": 1, "keys": sorted(keys, key=lambda k: k["keyid"])})


def _forged(raw: bytes) -> dict[str, bytes]:
    """A bundle "signed" by the small-order key `raw` without any private key: no signer was involved."""
    from pactwright.canonical import canonical_bytes, hash_bytes
    from pactwright.signing import (
        APPROVAL_PATH,
        SIGNATURES_FORMAT,
        SIGNATURES_PATH,
        encode_b64,
        public_key_from_raw,
        signature_statement,
        verify_statement,
    )
    from tests.signed_bundles import approval_bytes, built, key, manifest_of

    files = built()
    files[APPROVAL_PATH] = approval_bytes(manifest_of(files), key("alice"))
    candidates = [encode_b64(_raw(y, sign) + bytes(32)) for y in _SMALL_ORDER.values() for sign in (0, 1)]
    for second in range(600):  # grind the expiry until the statement's hash suits one of the candidates
        statement = signature_statement(
            manifest_hash=hash_bytes(files["manifest.json"]),
            approval_hash=hash_bytes(files[APPROVAL_PATH]),
            expires=f"2030-01-01T00:{second // 60:02d}:{second % 60:02d}Z",
            keyid=hash_bytes(raw),
        )
        for signature in candidates:
            if verify_statement(public_key_from_raw(raw), statement, signature):
                entry = {"statement": statement, "signature": signature}
                files[SIGNATURES_PATH] = canonical_bytes({"format": SIGNATURES_FORMAT, "signatures": [entry]})
                return files
    raise AssertionError("no forgery found")  # pragma: no cover


def test_a_bundle_signed_by_nobody_under_a_small_order_key_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The all-zero public key verifies forged signatures; a trust file listing it is refused (exit 2)."""
    raw = _raw(0)
    trust = tmp_path / "trust.json"
    trust.write_bytes(_trust_with_signer(raw))
    bundle = write(_forged(raw), tmp_path / "forged")
    url = str(tmp_path / "store.db")
    assert main(["activate", str(bundle), "--trust", str(trust), "--store", url, "--now", NOW]) == 2  # was 0
    assert "error[PW405]" in capsys.readouterr().err
    assert not Path(url).exists()


@pytest.mark.parametrize(
    "raw",
    [
        *(pytest.param(_raw(y, sign), id=f"{name}-sign{sign}") for name, y in _SMALL_ORDER.items() for sign in (0, 1)),
        pytest.param(_raw(_P + 5), id="non-canonical"),
    ],
)
def test_the_trust_file_refuses_weak_public_keys(raw: bytes) -> None:
    from pactwright.trust import parse_trust

    with pytest.raises(PactwrightError) as caught:
        parse_trust(_trust_with_signer(raw))
    assert caught.value.code == "PW405"


def test_trust_add_refuses_a_small_order_public_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    pem = Ed25519PublicKey.from_public_bytes(_raw(_ORDER_8_Y)).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (tmp_path / "weak.pub").write_bytes(pem)
    trust = tmp_path / "trust.json"
    assert main(["trust", "add", str(tmp_path / "weak.pub"), "--role", "signer", "--file", str(trust)]) == 2
    assert "error[PW402]" in capsys.readouterr().err
    assert not trust.exists()
