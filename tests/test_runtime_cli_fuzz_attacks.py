"""Hostile command lines for the runtime's commands: every bad input is a code, exit 1 or 2, and changes nothing.

`open`, `submit` (with `--dry-run`, `--expect-version`, `--param`, `--key`),
`show`, `worker --drain`, `scheduler`, `outbox list`, `evidence` and
`evidence verify`, `effects`, `approvals` and `parties` are given odd store
and ledger URLs (relative, `sqlite://` forms, a directory, a file that is not
a database, a PostgreSQL database or schema that is not there, NUL and bytes
that are not UTF-8), numbers out of every range, empty and repeated options,
control and unicode characters in ids, keys and party names, a read-only
store and a store written by a newer release. Each case asserts the exit
code, the code printed, that no traceback reached stderr, and for a refusal
that every table of the store (and for SQLite its file, byte for byte) is as
it was.

Most cases run in-process through `main([...])`; argv bytes that are not
UTF-8, a store file the process may not write and the scheduler's waiting
loop need a real process and run as one.

Once broken here, each since fixed: a name holding bytes that are not UTF-8
reached the database driver (an internal error); a PostgreSQL store URL with
such bytes or a NUL (cut at the NUL, so another store was opened); a
search_path naming no schema that exists (the worker made a ledger schema,
`parties add` crashed); the worker making its ledger before refusing a bad
`--lease-seconds` or a read-only store; `show --ledger` of a file that is no
database; `parties add` on a store whose migration table is gone; a
scheduler interval too long to wait; an approval expiring after year 9999
printed; a quoted `--head` on a strict UTF-8 terminal.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from pactwright.cli.main import main
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.activation import FixedClock, activate_files
from pactwright.runtime.store import open_store
from tests.signed_bundles import NOW, PACT_ID, POSTGRES_URL, default_trust, dump, signed, temporary_store

ROOT = Path(__file__).resolve().parent.parent
T0 = 1780315200  # 2026-06-01T12:00:00Z
WINDOW = 14 * 86400
MAX_CLOCK = 253402300799  # 9999-12-31T23:59:59Z, the latest instant a clock file may hold
PARTIES = ["--party", "buyer=alice", "--party", "seller=bob", "--party", "arbiter=carol"]
SUBMIT = ["submit", "a1", "deliver", "--as", "seller:bob"]
PG_BASE = POSTGRES_URL.split("?")[0]
CODE_RE = re.compile(r"PW\d{3}")


# Stores ---------------------------------------------------------------------------


def _populate(url: str) -> None:
    """The reference pact active, agreement a1 opened and funded (version 1), olga an operator."""
    with open_store(url) as store:
        activate_files(store, signed("1.0.0"), default_trust(), clock=FixedClock(datetime.fromisoformat(NOW)))
        open_agreement(store, PACT_ID, {"price": "64.90"}, {"buyer": "alice", "seller": "bob", "arbiter": "carol"},
                       agreement_id="a1", clock=TestClock(T0))  # fmt: skip
        submit(store, "a1", "fund", "buyer", "alice", "k1", clock=TestClock(T0))
    assert main(["parties", "add", "olga", "--role", "operator", "--store", url, "--clock-file", _clock_file(T0)]) == 0


_CLOCK_DIR: list[Path] = []


@pytest.fixture(scope="module", autouse=True)
def _clock_dir(tmp_path_factory: pytest.TempPathFactory) -> None:
    _CLOCK_DIR[:] = [tmp_path_factory.mktemp("clocks")]


def _clock_file(seconds: int) -> str:
    """A clock file holding `seconds` (one per value, shared by the module's tests)."""
    path = _CLOCK_DIR[0] / f"{seconds}"
    if not path.exists():
        path.write_text(f"{seconds}\n")
    return str(path)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, _clock_dir: None) -> Path:
    path = tmp_path_factory.mktemp("template") / "store.db"
    _populate(str(path))
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path


@pytest.fixture
def store(template: Path, tmp_path: Path) -> str:
    """A private copy of the populated SQLite store."""
    target = tmp_path / "store.db"
    shutil.copy(template, target)
    return str(target)


@pytest.fixture(scope="module")
def pg_store(tmp_path_factory: pytest.TempPathFactory, _clock_dir: None) -> Iterator[str]:
    """One populated PostgreSQL store (its own schema) shared by refusals that must change nothing in it."""
    with temporary_store("postgresql", tmp_path_factory.mktemp("pg")) as url:
        _populate(url)
        yield url


# Schemas other tests make and drop while these run (pytest-xdist workers, a second run on the same server):
# temporary stores and their ledgers, which a refusal here cannot make, except this file's own store's.
_OTHERS = re.compile(r"pw_(test|store_test|ledger_test|bench)_[0-9a-f]+(_ledger)?")


def _schemas(own: str = "") -> set[str]:
    """The server's schemas a command given these tests' input could make: any but other tests' temporary ones
    (`own`: the schema of the store under test, whose derived names do count)."""
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=10) as admin:
        names = {str(r[0]) for r in admin.execute("SELECT nspname FROM pg_namespace").fetchall()}
    return {n for n in names if not _OTHERS.fullmatch(n) or (own and n.startswith(own))}


def _drop_schemas(*names: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=10) as admin:
        for name in names:
            admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
def missing_schema() -> Iterator[str]:
    """A store URL whose `search_path` names a schema that does not exist (dropped again if anything made it)."""
    name = f"pw_fuzz_missing_{secrets.token_hex(6)}"
    try:
        yield f"{PG_BASE}?options=-csearch_path%3D{name}"
    finally:
        _drop_schemas(name, f"{name}_ledger")


# Running the CLI ------------------------------------------------------------------


class Shown(str):
    """A hostile argument whose repr is ASCII, so a failure report can name it (a lone surrogate cannot be sent)."""

    def __repr__(self) -> str:
        return ascii(str(self))


class ShownList(list[Any]):
    def __repr__(self) -> str:
        return ascii([str(v) for v in self])


def shown(value: Any) -> Any:
    """Parametrize values with ASCII reprs: strings, lists of strings, and tuples of them."""
    if isinstance(value, str):
        return Shown(value)
    if isinstance(value, list):
        return ShownList(shown(v) for v in value)
    if isinstance(value, tuple):
        return tuple(shown(v) for v in value)
    return value


def _cli(*args: str) -> tuple[int, str, str]:
    """`main(args)` with stdout and stderr as a real process has them, UTF-8 (stderr with `backslashreplace`).

    capsys writes strictly, which a process's stderr never does: a message quoting an argv byte
    that is not UTF-8 would fail in the test and not for the user. Both streams come back
    ASCII-safe (backslash escapes), so a report about them can always be shown.
    """
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace", write_through=True)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return (code, out_bytes.getvalue().decode("utf-8", "backslashreplace"),
            err_bytes.getvalue().decode("utf-8", "backslashreplace"))  # fmt: skip


def _file_state(url: str) -> dict[str, Any]:
    """Every table, and for a SQLite store every file beside it (the store and any ledger), byte for byte."""
    state: dict[str, Any] = {"tables": dump(url)}
    if "://" not in url and Path(url).is_file():
        # -wal and -shm come and go with every connection; the store, the ledger and nothing else stay.
        state["files"] = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(Path(url).parent.iterdir())
                          if p.is_file() and not p.name.endswith(("-wal", "-shm"))}  # fmt: skip
    return state


def _refused(url: str, args: list[str], code: str, exit_code: int) -> str:
    """Run a command that must be refused with `code`, changing nothing; returns stderr."""
    before = _file_state(url)
    got, out, err = _cli(*args)
    assert "Traceback" not in err + out
    assert got == exit_code, err
    assert f"error[{code}]" in err, err
    assert _file_state(url) == before
    return err


def _process(*args: str | bytes, prefix: tuple[str, ...] = (), timeout: float = 60,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:  # fmt: skip
    argv = [
        *prefix,
        sys.executable,
        "-m",
        "pactwright.cli.main",
        *(a if isinstance(a, bytes) else str(a) for a in args),
    ]
    return subprocess.run(argv, capture_output=True, cwd=ROOT, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})  # fmt: skip


# Store URLs -----------------------------------------------------------------------

COMMANDS: dict[str, list[str]] = {
    "show": ["show", "a1"],
    "show-json": ["show", "a1", "--format", "json"],
    "submit": ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2"],
    "submit-dry-run": ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2", "--dry-run"],
    "open": ["open", PACT_ID, "--id", "b1", "--param", "price=1.00", *PARTIES],
    "worker": ["worker", "--drain"],
    "scheduler": ["scheduler", "--once"],
    "outbox": ["outbox", "list"],
    "evidence": ["evidence", "a1"],
    "evidence-verify": ["evidence", "verify", "a1"],
    "effects-list": ["effects", "list"],
    "effects-abandon": ["effects", "abandon", "a1", "refund", "--reason", "r", "--as", "olga"],
    "approvals-list": ["approvals", "list"],
    "approvals-show": ["approvals", "show", "apr-1"],
    "parties-list": ["parties", "list"],
    "parties-add": ["parties", "add", "pete", "--role", "operator"],
    "parties-tokens": ["parties", "tokens"],
    "parties-token": ["parties", "token", "olga"],
    "parties-revoke": ["parties", "revoke", "t1"],
}


def _odd_sqlite_url(kind: str, directory: Path) -> str:
    if kind == "sqlite-no-path":
        return "sqlite://"
    if kind == "sqlite-relative":
        return "sqlite://store.db"
    if kind == "sqlite-colon-relative":
        return "sqlite:store.db"
    if kind == "empty":
        return ""
    if kind == "directory":
        return str(directory)
    if kind == "text-file":
        (directory / "notes.db").write_bytes(b"this is not a database\n" * 64)
        return str(directory / "notes.db")
    if kind == "random-bytes":
        (directory / "noise.db").write_bytes(bytes(range(256)) * 32)
        return str(directory / "noise.db")
    if kind == "sqlite-header-then-noise":
        (directory / "half.db").write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
        return str(directory / "half.db")
    if kind == "dangling-symlink":
        (directory / "link.db").symlink_to(directory / "gone.db")
        return str(directory / "link.db")
    if kind == "missing-parent":
        return str(directory / "no" / "such" / "store.db")
    if kind == "sqlite-missing-parent":
        return "sqlite://" + str(directory / "no" / "such" / "store.db")
    if kind == "other-scheme":
        return "http://example.com/store"
    if kind == "file-scheme":
        return "file://" + str(directory / "store.db")
    if kind == "nul-in-path":
        return str(directory / "a\x00b.db")
    if kind == "dev-null":
        return "/dev/null"
    raise AssertionError(kind)


ODD_SQLITE = ["sqlite-no-path", "sqlite-relative", "sqlite-colon-relative", "empty", "directory", "text-file",
              "random-bytes", "sqlite-header-then-noise", "dangling-symlink", "missing-parent",
              "sqlite-missing-parent", "other-scheme", "file-scheme", "nul-in-path", "dev-null"]  # fmt: skip


@pytest.mark.parametrize("kind", ODD_SQLITE)
def test_every_command_refuses_an_odd_store_url_with_pw700_and_creates_nothing(kind: str, tmp_path: Path) -> None:
    url = _odd_sqlite_url(kind, tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    contents = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    for name, args in COMMANDS.items():
        code, _out, err = _cli(*args, "--store", url)
        assert "Traceback" not in err, (name, err)
        assert (code, CODE_RE.findall(err)[:1]) == (2, ["PW700"]), (name, err)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == contents


def test_a_relative_store_path_works_and_a_relative_ledger_naming_the_store_is_refused(
    store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(store).parent)
    code, out, err = _cli("show", "a1", "--store", "store.db", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["version"] == 1
    for ledger in ("store.db", "./store.db", f"sqlite://{store}", store, f"../{Path(store).parent.name}/store.db"):
        _refused(store, ["worker", "--drain", "--store", "store.db", "--ledger", ledger], "PW550", 2)
        _refused(store, ["show", "a1", "--store", store, "--ledger", ledger], "PW550", 2)


def test_a_ledger_that_is_a_link_to_the_store_is_refused(store: str) -> None:
    symlink, hardlink = Path(store).with_name("sym.sqlite"), Path(store).with_name("hard.sqlite")
    symlink.symlink_to(store)
    os.link(store, hardlink)
    for ledger in (symlink, hardlink):
        _refused(store, ["worker", "--drain", "--store", store, "--ledger", str(ledger)], "PW550", 2)
        _refused(store, ["show", "a1", "--store", store, "--ledger", str(ledger)], "PW550", 2)


@pytest.mark.parametrize("ledger", ["", "a\x00b", "/dev/null", "sqlite://rel.sqlite", "ftp://x/ledger",
                                    "/no/such/dir/l.sqlite", "DIR"])  # fmt: skip
def test_a_bad_ledger_url_is_pw550_and_writes_nothing(store: str, ledger: str) -> None:
    ledger = str(Path(store).parent) if ledger == "DIR" else ledger
    _refused(store, ["worker", "--drain", "--store", store, "--ledger", ledger], "PW550", 2)
    _refused(store, ["show", "a1", "--store", store, "--ledger", ledger], "PW550", 2)


def _not_a_database(store: str) -> str:
    path = Path(store).with_name("notes.sqlite")
    path.write_bytes(b"these are notes, not a ledger\n" * 64)
    return str(path)


def test_the_worker_refuses_a_ledger_file_that_is_not_a_database(store: str) -> None:
    for ledger in (_not_a_database(store), "/etc/passwd"):
        _refused(store, ["worker", "--drain", "--store", store, "--ledger", ledger], "PW550", 2)


@pytest.mark.parametrize("which", ["notes-file", "etc-passwd"])
def test_show_refuses_a_ledger_file_that_is_not_a_database(store: str, which: str) -> None:
    ledger = _not_a_database(store) if which == "notes-file" else "/etc/passwd"
    _refused(store, ["show", "a1", "--store", store, "--ledger", ledger], "PW550", 2)


# PostgreSQL URLs ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [f"{PG_BASE.rsplit('/', 1)[0]}/pw_no_such_database_{secrets.token_hex(4)}",
     f"{PG_BASE}?options=-cbogus_setting%3D1",
     f"{PG_BASE}?sslmode=bogus",
     PG_BASE.replace(":5432", ":65536"),
     f"{PG_BASE}?options=-csearch_path%3D%22%00%22"],
    ids=["missing-database", "bad-option", "bad-sslmode", "port-out-of-range", "percent-encoded-nul"],
)  # fmt: skip
def test_every_command_refuses_an_unreachable_postgresql_store_with_pw700(url: str) -> None:
    _every_command_is_pw700(url)


def _every_command_is_pw700(url: str) -> None:
    """Every command given `--store url`: PW700, exit 2, no traceback, and no schema made on the server."""
    schemas = _schemas()
    for name, args in COMMANDS.items():
        code, _out, err = _cli(*args, "--store", url)
        assert "Traceback" not in err, (name, err)
        assert (code, CODE_RE.findall(err)[:1]) == (2, ["PW700"]), (name, err)
    assert _schemas() == schemas


def test_a_store_schema_that_does_not_exist_is_refused_by_every_command_with_pw700(missing_schema: str) -> None:
    """A search_path naming no schema that exists is a store that is not there (as a missing SQLite file is):
    PW700 for every command, and no schema made (once the readers answered PW501/PW702/PW601/PW674/PW675 as
    for an empty store, and `parties add` and the worker wrote or crashed)."""
    _every_command_is_pw700(missing_schema)


def test_the_worker_on_a_postgresql_store_schema_that_does_not_exist_is_refused_and_creates_nothing(
    missing_schema: str,
) -> None:
    schemas = _schemas()
    code, out, err = _cli("worker", "--drain", "--store", missing_schema)
    made = _schemas() - schemas
    assert "Traceback" not in err
    assert made == set()
    assert code == 2 and "error[PW700]" in err, (code, out, err)


def test_parties_add_on_a_postgresql_store_schema_that_does_not_exist_is_pw700(missing_schema: str) -> None:
    schemas = _schemas()
    code, _out, err = _cli("parties", "add", "olga", "--role", "operator", "--store", missing_schema)
    assert _schemas() == schemas
    assert "Traceback" not in err
    assert code == 2 and "error[PW700]" in err, err


def test_a_postgresql_store_url_with_bytes_that_are_not_utf8_is_pw700(pg_store: str) -> None:
    done = _process(b"outbox", b"list", b"--store", pg_store.encode() + b"\xff")
    assert b"Traceback" not in done.stderr
    assert done.returncode == 2 and b"error[PW700]" in done.stderr, done.stderr


def test_a_postgresql_store_url_with_a_nul_is_refused_like_the_ledger_url(pg_store: str) -> None:
    _refused(pg_store, ["show", "a1", "--store", pg_store, "--ledger", pg_store + "\x00"], "PW550", 2)
    _refused(pg_store, ["outbox", "list", "--store", pg_store + "\x00&options=-csearch_path%3Dpublic"],
             "PW700", 2)  # fmt: skip


def test_a_postgresql_ledger_equal_to_the_store_or_malformed_is_pw550(pg_store: str) -> None:
    bad_schema = pg_store.replace("search_path%3D", "search_path%3DUpper")
    missing_db = f"{PG_BASE.rsplit('/', 1)[0]}/pw_no_such_database_{secrets.token_hex(4)}"
    own = pg_store.rsplit("search_path%3D", 1)[-1]
    schemas = _schemas(own)
    for ledger in (pg_store, bad_schema, missing_db):
        _refused(pg_store, ["worker", "--drain", "--store", pg_store, "--ledger", ledger], "PW550", 2)
        _refused(pg_store, ["show", "a1", "--store", pg_store, "--ledger", ledger], "PW550", 2)
    assert _schemas(own) == schemas


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    shown([(["submit", "a1", "deliver", "--as", "seller:bob", "--key", "a\x00b"], "PW519", 1),
     (["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k", "--expect-version", str(2**63)], "PW509", 1),
     (["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k", "--param", "x=\x00"], "PW516", 1),
     (["open", PACT_ID, "--id", "z", "--param", "price=1.00", "--party", "buyer=a\x00", "--party", "seller=bob",
       "--party", "arbiter=carol"], "PW504", 1),
     (["parties", "add", "a\x00b", "--role", "operator"], "PW611", 2),
     (["parties", "add", "pete", "--role", "oper\x00ator"], "PW611", 2),
     (["effects", "abandon", "a1", "x", "--reason", "r\x00", "--as", "olga"], "PW643", 2),
     (["show", "a1\x00"], "PW501", 1),
     (["evidence", "verify", "a1\x00"], "PW501", 1),
     (["approvals", "show", "apr\x00"], "PW601", 1)]),
    ids=["nul-key", "expect-version-2**63", "nul-param", "nul-party", "nul-party-name", "nul-role", "nul-reason",
         "nul-show", "nul-evidence", "nul-approval"],
)  # fmt: skip
def test_nul_and_out_of_range_input_on_postgresql_is_a_code_and_changes_nothing(
    pg_store: str, args: list[str], code: str, exit_code: int
) -> None:
    _refused(pg_store, [*args, "--store", pg_store], code, exit_code)


# Numbers ---------------------------------------------------------------------------

HUGE = str(2**70)


@pytest.mark.parametrize("value", [HUGE, f"-{HUGE}", "-1", "0", "2", "2147483648", "9223372036854775807",
                                   "9223372036854775808", "-9223372036854775809"])  # fmt: skip
@pytest.mark.parametrize("dry_run", [False, True], ids=["submit", "dry-run"])
def test_an_expect_version_out_of_range_is_a_stale_version_and_changes_nothing(
    store: str, value: str, dry_run: bool
) -> None:
    args = ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2", "--store", store, "--expect-version", value]
    _refused(store, args + (["--dry-run"] if dry_run else []), "PW509", 1)


@pytest.mark.parametrize("value", ["", "nan", "0x10", "1.5", "one", "9" * 5000],
                         ids=["empty", "nan", "hex", "fraction", "word", "5000-digits"])  # fmt: skip
def test_an_expect_version_that_is_not_an_integer_is_pw001(store: str, value: str) -> None:
    args = ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2", "--store", store, "--expect-version", value]
    _refused(store, args, "PW001", 2)


LEASES = ["0", "-1", f"-{HUGE}", HUGE, "9223372036854775807", "31622401", "2147483648"]


@pytest.mark.parametrize("value", [*LEASES, "", "nan", "1.5", "9" * 5000],
                         ids=[*LEASES, "empty", "nan", "fraction", "5000-digits"])  # fmt: skip
def test_a_lease_out_of_range_is_pw001_and_the_worker_delivers_nothing(store: str, value: str) -> None:
    assert _cli("worker", "--drain", "--store", store, "--lease-seconds", "1")[0] == 0  # its ledger exists now
    with open_store(store) as opened, opened.transaction() as db:  # something due again
        db.execute("UPDATE outbox SET status = 'pending', attempts = 0")
    _refused(store, ["worker", "--drain", "--store", store, "--lease-seconds", value], "PW001", 2)


@pytest.mark.parametrize("value", ["0", HUGE])
def test_a_lease_out_of_range_creates_no_ledger(store: str, value: str) -> None:
    _refused(store, ["worker", "--drain", "--store", store, "--lease-seconds", value], "PW001", 2)


@pytest.mark.parametrize("value", ["0", "-0", "-1", f"-{HUGE}", "nan", "-inf", "", "x"])
def test_a_scheduler_interval_that_is_not_positive_is_pw001(store: str, value: str) -> None:
    _refused(store, ["scheduler", "--once", "--store", store, "--interval", value], "PW001", 2)


@pytest.mark.parametrize("value", [HUGE, "inf", "1e300", "9223372036854775808", "86401"])
def test_an_interval_past_a_day_is_pw001_even_with_once(store: str, value: str) -> None:
    """Once, a huge interval was taken and the long-running scheduler then crashed waiting it out; the bound
    (86,400 s) is checked whatever `--once` says, before anything is opened."""
    _refused(store, ["scheduler", "--once", "--store", store, "--interval", value], "PW001", 2)


def test_an_interval_of_a_day_scans_once_with_once(store: str) -> None:
    code, out, err = _cli("scheduler", "--once", "--store", store, "--interval", "86400", "--format", "json",
                          "--clock-file", _clock_file(T0))  # fmt: skip
    assert (code, "Traceback" in err) == (0, False), err
    assert json.loads(out)["scanned"] == 1


@pytest.mark.parametrize("value", ["9999999999", "1e300"])
def test_a_huge_scheduler_interval_is_refused_or_waited(store: str, value: str) -> None:
    argv = [sys.executable, "-m", "pactwright.cli.main", "scheduler", "--store", store, "--interval", value,
            "--clock-file", _clock_file(T0), "--format", "json"]  # fmt: skip
    with subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()  # one JSON object per scan; EOF if it refused to start
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:  # waiting between scans, as asked: SIGTERM must end it cleanly
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        err = proc.stderr.read()
    assert b"Traceback" not in err
    if first:
        assert json.loads(first)["scanned"] == 1
        assert proc.returncode == 0, err
    else:
        assert proc.returncode == 2 and b"error[PW001]" in err, err


def test_poll_values_are_harmless_with_drain(store: str) -> None:
    for value in ("nan", "-1", "inf", HUGE, "0"):
        code, out, err = _cli("worker", "--drain", "--store", store, "--poll", value, "--format", "json")
        assert (code, "Traceback" in err) == (0, False), err
    assert json.loads(out)["counts"]["delivered"] == 0  # the first run delivered a1/1/0; the rest find nothing
    for value in ("", "x", "0x1"):
        _refused(store, ["worker", "--drain", "--store", store, "--poll", value], "PW001", 2)


@pytest.mark.parametrize("content", ["", "-1", "1e9", "1780315200.5", "0x10", "999999999999", "1" * 13,
                                     "253402300800", "١٧٨٠٣١٥٢٠٠", "\xff"])  # fmt: skip
def test_a_hostile_clock_file_is_pw520_and_commits_nothing(store: str, content: str, tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    clock.write_bytes(content.encode("latin-1") if content == "\xff" else content.encode())
    args = [*SUBMIT, "--key", "k2", "--store", store, "--clock-file", str(clock)]
    _refused(store, args, "PW520", 2)
    _refused(store, ["scheduler", "--once", "--store", store, "--clock-file", str(clock)], "PW520", 2)


# Params, parties, ids and keys ----------------------------------------------------

OPEN = ["open", PACT_ID, "--id", "z1"]


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    shown([([*OPEN, "--param", "price", *PARTIES], "PW001", 2),
     ([*OPEN, "--param", "=1.00", *PARTIES], "PW001", 2),
     ([*OPEN, "--param", "", *PARTIES], "PW001", 2),
     ([*OPEN, "--param", "price=1.00", "--param", "price=2.00", *PARTIES], "PW001", 2),
     ([*OPEN, "--param", "price=1.00", *PARTIES, "--party", "buyer=alice"], "PW001", 2),
     ([*OPEN, "--param", "price=1.00", *PARTIES, "--party", "noequals"], "PW001", 2),
     ([*OPEN, "--param", "price=", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price==1", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=1e3", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=-1.00", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=0.00", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=10000.01", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=" + "9" * 4000, *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=1.001", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=1,00", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price= 1.00", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=\u0661.\u0660\u0660", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=NaN", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=1.00\x00", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=1.00", "--param", "fee=50%", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=1.00", "--param", "bogus=1", *PARTIES], "PW503", 1),
     ([*OPEN, "--param", "price=1.00", "--party", "buyer=alice"], "PW504", 1),
     ([*OPEN, "--param", "price=1.00", *PARTIES, "--party", "ghost=x"], "PW504", 1),
     ([*OPEN, "--param", "price=1.00", "--party", "buyer=", "--party", "seller=bob", "--party", "arbiter=carol"],
      "PW504", 1),
     ([*OPEN, "--param", "price=1.00", "--party", "buyer=al\x07ice", "--party", "seller=bob", "--party",
       "arbiter=carol"], "PW504", 1),
     ([*OPEN, "--param", "price=1.00", "--party", "buyer=\u202ealice", "--party", "seller=bob", "--party",
       "arbiter=carol"], "PW504", 1),
     ([*OPEN, "--param", "price=1.00", "--party", "buyer=\udcff", "--party", "seller=bob", "--party",
       "arbiter=carol"], "PW504", 1),
     (["open", PACT_ID, "--id", "a1", "--param", "price=1.00", *PARTIES], "PW502", 1),
     (["open", "", "--id", "z1", "--param", "price=1.00", *PARTIES], "PW702", 1),
     (["open", "no.such.pact", "--id", "z1", "--param", "price=1.00", *PARTIES], "PW702", 1),
     (["open", PACT_ID + "\x00", "--id", "z1", "--param", "price=1.00", *PARTIES], "PW702", 1),
     (["open", "\udcff", "--id", "z1", "--param", "price=1.00", *PARTIES], "PW702", 1)]),
    ids=["param-no-equals", "param-no-name", "param-empty", "param-twice", "party-twice", "party-no-equals",
         "price-empty", "price-double-equals", "price-exponent", "price-negative", "price-zero", "price-above",
         "price-4000-digits", "price-three-decimals", "price-comma", "price-space", "price-arabic-digits",
         "price-nan", "price-nul", "fixed-param-restated", "unknown-param", "missing-parties", "unknown-role",
         "empty-party", "bell-in-party", "bidi-in-party", "surrogate-party", "id-taken", "empty-pact",
         "unknown-pact", "nul-pact", "surrogate-pact"],
)  # fmt: skip
def test_open_refuses_bad_params_and_parties_and_changes_nothing(
    store: str, args: list[str], code: str, exit_code: int
) -> None:
    _refused(store, [*args, "--store", store], code, exit_code)


@pytest.mark.parametrize(
    "agreement_id",
    shown(["", " ", "z" * 65, "z\u0301", "\u00e9", "z\n", "z\x07", "\u202ez", "a\x00b", "\udcff", "\ud800", "../a1",
           "a1;DROP TABLE agreements"]),
    ids=["empty", "space", "65-chars", "combining", "e-acute", "newline", "bell", "bidi", "nul", "surrogate",
         "high-surrogate", "path", "sql"],
)  # fmt: skip
def test_open_refuses_a_hostile_agreement_id_and_changes_nothing(store: str, agreement_id: str) -> None:
    args = ["open", PACT_ID, "--id", agreement_id, "--param", "price=1.00", *PARTIES, "--store", store]
    _refused(store, args, "PW502", 1)


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    shown([([*SUBMIT, "--key", "k2", "--param", "x"], "PW001", 2),
     ([*SUBMIT, "--key", "k2", "--param", "=1"], "PW001", 2),
     ([*SUBMIT, "--key", "k2", "--param", "x=1", "--param", "x=2"], "PW001", 2),
     ([*SUBMIT, "--key", "k2", "--param", "x=1"], "PW516", 1),
     ([*SUBMIT, "--key", "k2", "--param", "price=1.00"], "PW516", 1),
     ([*SUBMIT, "--key", "k2", "--param", "\udcff=1"], "PW017", 1),
     (["submit", "a1", "fund", "--as", "buyer:alice", "--key", "k1", "--param", "x=1"], "PW515", 1),
     (["submit", "a1", "deliver", "--as", "sellerbob", "--key", "k2"], "PW001", 2),
     (["submit", "a1", "deliver", "--as", ":", "--key", "k2"], "PW001", 2),
     (["submit", "a1", "deliver", "--as", "seller:", "--key", "k2"], "PW001", 2),
     (["submit", "a1", "deliver", "--as", ":bob", "--key", "k2"], "PW001", 2),
     (["submit", "a1", "deliver", "--as", "seller:bob:x", "--key", "k2"], "PW508", 1),
     (["submit", "a1", "deliver", "--as", "seller:\udcff", "--key", "k2"], "PW017", 1),
     (["submit", "a1", "deliver", "--as", "buyer:alice", "--key", "k2"], "PW507", 1),
     (["submit", "a1", "deliver", "--as", "\u202eseller:bob", "--key", "k2"], "PW507", 1),
     (["submit", "a1", "nope", "--as", "buyer:alice", "--key", "k2"], "PW506", 1),
     (["submit", "a1", "", "--as", "buyer:alice", "--key", "k2"], "PW506", 1),
     (["submit", "a1", "\udcff", "--as", "buyer:alice", "--key", "k2"], "PW017", 1),
     (["submit", "a1", "auto_release", "--as", "scheduler:scheduler", "--key", "k2"], "PW511", 1),
     (["submit", "", "deliver", "--as", "seller:bob", "--key", "k2"], "PW501", 1),
     (["submit", "a1\x00", "deliver", "--as", "seller:bob", "--key", "k2"], "PW501", 1),
     (["submit", "\udcff", "deliver", "--as", "seller:bob", "--key", "k2"], "PW501", 1),
     (["submit", "A1", "deliver", "--as", "seller:bob", "--key", "k2"], "PW501", 1)]),
    ids=["param-no-equals", "param-no-name", "param-twice", "unknown-param", "param-of-open", "surrogate-param",
         "replay-with-other-params", "as-no-colon", "as-colon-only", "as-no-party", "as-no-role", "as-two-colons",
         "as-surrogate", "wrong-role", "bidi-role", "unknown-transition", "empty-transition",
         "surrogate-transition", "not-from-this-state", "empty-agreement", "nul-agreement",
         "surrogate-agreement", "agreement-case"],
)  # fmt: skip
@pytest.mark.parametrize("dry_run", [False, True], ids=["submit", "dry-run"])
def test_submit_refuses_bad_params_actors_and_ids_and_changes_nothing(
    store: str, args: list[str], code: str, exit_code: int, dry_run: bool
) -> None:
    _refused(store, [*args, "--store", store, *(["--dry-run"] if dry_run else [])], code, exit_code)


@pytest.mark.parametrize(
    "key",
    shown(["", " ", " k", "k ", "\n", "k\x07", "k\x00", "\x7f", "\u0085", "\u2028", "\udcff", "\ud800", "k" * 201,
           "k" * 100_000]),
    ids=["empty", "space", "leading-space", "trailing-space", "newline", "bell", "nul", "del", "nel",
         "line-separator", "surrogate", "high-surrogate", "201-chars", "100000-chars"],
)  # fmt: skip
@pytest.mark.parametrize("dry_run", [False, True], ids=["submit", "dry-run"])
def test_a_hostile_idempotency_key_is_pw519_and_changes_nothing(store: str, key: str, dry_run: bool) -> None:
    args = [*SUBMIT, "--key", key, "--store", store, *(["--dry-run"] if dry_run else [])]
    _refused(store, args, "PW519", 1)


def test_a_unicode_key_commits_once_and_its_replay_is_answered(store: str) -> None:
    args = [*SUBMIT, "--key", "k\u00e9-\u6f22", "--store", store, "--format", "json", "--clock-file", _clock_file(T0)]
    first = _cli(*args)
    assert first[0] == 0, first[2]
    middle = _file_state(store)
    again = _cli(*args)
    assert again[0] == 0 and json.loads(again[1])["replayed"] is True
    assert _file_state(store)["tables"] == middle["tables"]
    _refused(store, [*SUBMIT, "--key", "ke\u0301-\u6f22", "--store", store, "--expect-version", "1"],
             "PW509", 1)  # fmt: skip


@pytest.mark.parametrize(
    "agreement_id",
    shown(["", " ", "\x00", "a1\x00", "\udcff", "\n", "A1", "a1 ", "\u202ea1", "z" * 10_000]),
    ids=["empty", "space", "nul", "trailing-nul", "surrogate", "newline", "upper-case", "trailing-space", "bidi",
         "10000-chars"],
)  # fmt: skip
def test_reading_an_agreement_that_is_not_there_is_pw501(store: str, agreement_id: str) -> None:
    for args in (["show", agreement_id], ["show", agreement_id, "--format", "json"], ["evidence", agreement_id],
                 ["evidence", "verify", agreement_id], ["evidence", agreement_id, "--format", "json"]):  # fmt: skip
        _refused(store, [*args, "--store", store], "PW501", 1)


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    shown([(["evidence", "a1", "b1"], "PW001", 2),
     (["evidence", "verify", "a1", "b1"], "PW001", 2),
     (["evidence", "a1", "--head", "sha256:" + "0" * 64], "PW001", 2),
     (["evidence", "verify", "a1", "--head", "sha256:" + "0" * 64], "PW587", 1),
     (["evidence", "verify", "a1", "--head", ""], "PW587", 1),
     (["evidence", "verify", "a1", "--head", "x" * 100_000], "PW587", 1)]),
    ids=["two-agreements", "verify-two", "head-without-verify", "wrong-head", "empty-head",
         "huge-head"],
)  # fmt: skip
def test_evidence_usage_and_head_mismatches_are_codes(store: str, args: list[str], code: str, exit_code: int) -> None:
    before = _file_state(store)
    got, out, err = _cli(*args, "--store", store)
    assert "Traceback" not in err
    assert got == exit_code
    assert f"error[{code}]" in out + err
    assert _file_state(store) == before


def test_a_head_with_bytes_that_are_not_utf8_is_reported_without_a_traceback(store: str) -> None:
    done = _process(
        b"evidence", b"verify", b"a1", b"--head", b"\xff", b"--store", store.encode(), env={"PYTHONIOENCODING": "utf-8"}
    )  # what a UTF-8 locale gives stdout: strict
    assert b"Traceback" not in done.stderr
    assert done.returncode == 1 and b"error[PW587]" in done.stdout, done.stderr


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    shown([(["parties", "add", "", "--role", "operator"], "PW611", 2),
     (["parties", "add", " olga", "--role", "operator"], "PW611", 2),
     (["parties", "add", "ol\x07ga", "--role", "operator"], "PW611", 2),
     (["parties", "add", "ol\x00ga", "--role", "operator"], "PW611", 2),
     (["parties", "add", "\udcff", "--role", "operator"], "PW611", 2),
     (["parties", "add", "p" * 201, "--role", "operator"], "PW611", 2),
     (["parties", "add", "pete", "--role", ""], "PW611", 2),
     (["parties", "add", "pete", "--role", "Operator"], "PW611", 2),
     (["parties", "add", "pete", "--role", "\udcff"], "PW611", 2),
     (["parties", "add", "pete", "--role", "operator", "--public-key", "/no/such.pub"], "PW001", 2),
     (["parties", "token", ""], "PW674", 2),
     (["parties", "token", "nobody"], "PW674", 2),
     (["parties", "revoke", ""], "PW675", 2),
     (["parties", "revoke", "a\x00b"], "PW675", 2),
     (["effects", "abandon", "a1", "refund", "--reason", "", "--as", "olga"], "PW643", 2),
     (["effects", "abandon", "a1", "refund", "--reason", "r\x07", "--as", "olga"], "PW643", 2),
     (["effects", "abandon", "a1", "refund", "--reason", "r" * 501, "--as", "olga"], "PW643", 2),
     (["effects", "abandon", "a1", "refund", "--reason", "r", "--as", "bob"], "PW641", 1),
     (["effects", "abandon", "a1", "refund", "--reason", "r", "--as", "olga"], "PW640", 1),
     (["effects", "abandon", "nope", "refund", "--reason", "r", "--as", "olga"], "PW501", 1),
     (["effects", "abandon", "\udcff", "refund", "--reason", "r", "--as", "olga"], "PW501", 1),
     (["effects", "reconcile", "a1", "refund", "--resolution", "recovered_acknowledgement", "--as", "olga"],
      "PW643", 2),
     (["effects", "reconcile", "a1", "refund", "--resolution", "maybe", "--as", "olga"], "PW001", 2),
     (["approvals", "show", ""], "PW601", 1),
     (["approvals", "show", "apr-\x00"], "PW601", 1),
     (["approvals", "list", "--status", "bogus"], "PW001", 2)]),
    ids=["party-empty", "party-leading-space", "party-bell", "party-nul", "party-surrogate", "party-201",
         "role-empty", "role-upper", "role-surrogate", "missing-public-key", "token-empty-party",
         "token-unregistered", "revoke-empty", "revoke-nul", "reason-empty", "reason-bell", "reason-501",
         "abandon-not-operator", "abandon-no-call", "abandon-unknown-agreement",
         "abandon-surrogate-agreement", "recovered-without-ref", "bad-resolution", "approval-empty",
         "approval-nul", "bad-status"],
)  # fmt: skip
def test_registry_effect_and_approval_refusals_are_codes_and_change_nothing(
    store: str, args: list[str], code: str, exit_code: int
) -> None:
    _refused(store, [*args, "--store", store], code, exit_code)


def test_options_repeated_where_one_is_allowed(store: str) -> None:
    # argparse keeps the last of a repeated single-valued option: the last key and id are the ones used.
    code, _out, err = _cli(*SUBMIT, "--key", "first", "--key", "last", "--store", store, "--format", "json",
                          "--clock-file", _clock_file(T0))  # fmt: skip
    assert code == 0, err
    with sqlite3.connect(store) as conn:
        keys = [row[0] for row in conn.execute("SELECT idempotency_key FROM events ORDER BY seq")]
    assert keys == ["k1", "last"]
    _refused(store, [*SUBMIT, "--key", "k9", "--format", "json", "--format", "yaml", "--store", store],
             "PW001", 2)  # fmt: skip


# Surrogates (argv bytes that are not UTF-8) in ids: list and lookup commands -----------

SURROGATE_LOOKUPS = {
    "outbox-list-agreement": (["outbox", "list", "--agreement", "\udcff"], "runtime/outbox.py:77"),
    "effects-list-agreement": (["effects", "list", "--agreement", "\udcff"], "runtime/effect_ops.py:117"),
    "effects-reconcile-call": (["effects", "reconcile", "a1", "\udcff", "--resolution", "not_occurred", "--as",
                                "olga"], "runtime/effect_ops.py:125"),
    "effects-abandon-call": (["effects", "abandon", "a1", "\udcff", "--reason", "r", "--as", "olga"],
                             "runtime/effect_ops.py:125"),
    "effects-reconcile-operator": (["effects", "reconcile", "a1", "\udcff", "--resolution", "not_occurred", "--as",
                                    "\udcff"], "runtime/effect_ops.py:155"),
    "effects-abandon-operator": (["effects", "abandon", "a1", "refund", "--reason", "r", "--as", "\udcff"],
                                  "runtime/effect_ops.py:155"),
    "approvals-list-agreement": (["approvals", "list", "--agreement", "\udcff"], "runtime/approvals.py:190"),
    "approvals-show-id": (["approvals", "show", "\udcff"], "runtime/approvals.py:201 (get_request checks NUL only)"),
    "parties-token-party": (["parties", "token", "\udcff"], "runtime/tokens.py:141"),
    "parties-revoke-id": (["parties", "revoke", "\udcff"], "runtime/tokens.py:186"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SURROGATE_LOOKUPS))
def test_a_lookup_with_a_lone_surrogate_is_answered_as_an_unknown_name(store: str, case: str) -> None:
    """Once an internal error (the driver's UnicodeEncodeError): a name no store can hold finds nothing, so
    the answer is the one for a name that is not there (an empty listing, or that name's refusal code)."""
    args, _where = SURROGATE_LOOKUPS[case]
    before = _file_state(store)
    code, out, err = _cli(*args, "--store", store)
    assert _file_state(store) == before
    assert "Traceback" not in err
    plain_code, plain_out, plain_err = _cli(*[a.replace("\udcff", "nope") for a in args], "--store", store)
    assert (code, CODE_RE.findall(err)) == (plain_code, CODE_RE.findall(plain_err)), (err, plain_err)
    if code == 0:
        assert out == plain_out
    else:
        assert code in (1, 2) and CODE_RE.search(err), err


def test_granting_an_approval_id_with_a_lone_surrogate_is_pw601(store: str, tmp_path: Path) -> None:
    assert _cli("keygen", "--out", str(tmp_path / "rita"))[0] == 0
    before = _file_state(store)
    code, _out, err = _cli("approvals", "grant", "\udcff", "--key", str(tmp_path / "rita.key"), "--as", "rita",
                          "--store", store)  # fmt: skip
    assert _file_state(store) == before
    assert "Traceback" not in err
    assert code == 1 and "error[PW601]" in err, err


def test_argv_bytes_that_are_not_utf8_in_an_agreement_filter_list_nothing(store: str) -> None:
    done = _process(b"outbox", b"list", b"--agreement", b"\xff", b"--store", store.encode())
    plain = _process(b"outbox", b"list", b"--agreement", b"nope", b"--store", store.encode())
    assert b"Traceback" not in done.stderr
    assert (done.returncode, done.stdout, done.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert (plain.returncode, plain.stderr) == (0, b"")


@pytest.mark.parametrize(
    ("args", "code", "exit_code"),
    shown([([b"open", PACT_ID.encode(), b"--id", b"\xff", b"--param", b"price=1.00", *map(str.encode, PARTIES)],
      b"PW502", 1),
     ([b"open", PACT_ID.encode(), b"--id", b"z1", b"--param", b"price=1.00\xff", *map(str.encode, PARTIES)],
      b"PW503", 1),
     ([b"submit", b"a1", b"deliver", b"--as", b"seller:bob", b"--key", b"\xff"], b"PW519", 1),
     ([b"submit", b"a1", b"deliver", b"--as", b"seller:b\xffob", b"--key", b"k2"], b"PW017", 1),
     ([b"submit", b"\xff", b"deliver", b"--as", b"seller:bob", b"--key", b"k2"], b"PW501", 1),
     ([b"show", b"\xff"], b"PW501", 1),
     ([b"evidence", b"verify", b"\xff"], b"PW501", 1),
     ([b"parties", b"add", b"\xff", b"--role", b"operator"], b"PW611", 2),
     ([b"show", b"a1", b"--ledger", b"/tmp/\xff/ledger.sqlite"], b"PW550", 2)]),
    ids=["open-id", "open-param", "submit-key", "submit-party", "submit-agreement", "show", "evidence-verify",
         "parties-add", "ledger-path"],
)  # fmt: skip
def test_argv_bytes_that_are_not_utf8_are_refused_by_a_real_process(
    store: str, args: list[bytes], code: bytes, exit_code: int
) -> None:
    before = _file_state(store)
    done = _process(*args, b"--store", store.encode())
    assert b"Traceback" not in done.stderr
    assert done.returncode == exit_code, done.stderr
    assert b"error[" + code + b"]" in done.stderr
    assert _file_state(store) == before


def test_a_store_at_a_path_that_is_not_utf8_works_and_a_missing_one_is_pw700(store: str) -> None:
    directory = os.fsencode(Path(store).parent)
    shutil.copy(store, os.fsdecode(directory + b"/\xfe.db"))
    answered = _process(b"show", b"a1", b"--store", directory + b"/\xfe.db", b"--format", b"json")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout)["version"] == 1
    missing = _process(b"open", PACT_ID.encode(), b"--store", directory + b"/\xff.db", b"--param", b"price=1.00",
                       *map(str.encode, PARTIES))  # fmt: skip
    assert (missing.returncode, b"error[PW700]" in missing.stderr, b"Traceback" in missing.stderr) == (2, True, False)
    assert not os.path.exists(directory + b"/\xff.db")


# Schemas and read-only stores ---------------------------------------------------------


def test_a_store_written_by_a_newer_release_is_pw701_for_every_command(store: str) -> None:
    with sqlite3.connect(store) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (999, 'written by a newer pactwright')")
    conn.close()
    for name, args in COMMANDS.items():
        err = _refused(
            store,
            [*args, "--store", store, "--clock-file", _clock_file(T0)]
            if name in ("submit", "open", "scheduler")
            else [*args, "--store", store],
            "PW701",
            1,
        )
        assert "migration 999" in err, name


def test_a_store_with_an_edited_migration_history_is_pw701(store: str) -> None:
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE schema_migrations SET name = 'something else' WHERE version = 3")
    conn.close()
    for args in COMMANDS.values():
        _refused(store, [*args, "--store", store], "PW701", 1)


def test_a_newer_postgresql_store_is_pw701(tmp_path: Path) -> None:
    with temporary_store("postgresql", tmp_path) as url:
        with open_store(url) as opened, opened.transaction() as db:
            db.execute("INSERT INTO schema_migrations (version, name) VALUES (999, 'newer')")
        for args in COMMANDS.values():
            _refused(url, [*args, "--store", url], "PW701", 1)


def test_parties_add_on_a_store_without_its_migration_table_is_a_code(store: str) -> None:
    with sqlite3.connect(store) as conn:
        conn.execute("DROP TABLE schema_migrations")
    conn.close()
    before = _file_state(store)
    code, _out, err = _cli("parties", "add", "pete", "--role", "operator", "--store", store)
    assert _file_state(store) == before
    assert "Traceback" not in err
    assert code in (1, 2) and CODE_RE.search(err), err


def _read_only_prefix() -> tuple[str, ...]:
    """Run a child without the capabilities that let root write a file whose mode forbids it."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root without setpriv cannot be denied a write by file modes")
    drop = "-dac_override,-dac_read_search"
    return (setpriv, f"--inh-caps={drop}", f"--bounding-set={drop}")


@pytest.mark.parametrize(
    ("args", "clock"),
    [(["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2"], T0),
     (["open", PACT_ID, "--id", "b1", "--param", "price=1.00", *PARTIES], T0),
     (["parties", "add", "pete", "--role", "operator"], T0),
     (["parties", "token", "olga"], T0),
     (["scheduler", "--once"], T0 + WINDOW)],
    ids=["submit", "open", "parties-add", "parties-token", "scheduler-due-deadline"],
)  # fmt: skip
def test_a_write_to_a_read_only_store_file_is_pw709_and_changes_nothing(
    store: str, args: list[str], clock: int
) -> None:
    os.chmod(store, 0o444)
    before = _file_state(store)
    done = _process(*args, "--store", store, "--clock-file", _clock_file(clock), prefix=_read_only_prefix())
    assert b"Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr
    assert b"PW709" in done.stderr + done.stdout
    assert _file_state(store) == before


def test_reads_of_a_read_only_store_file_still_answer(store: str) -> None:
    os.chmod(store, 0o444)
    before = _file_state(store)
    prefix = _read_only_prefix()
    for args in (["show", "a1", "--format", "json"], ["evidence", "verify", "a1"], ["outbox", "list"],
                 ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2", "--dry-run"]):  # fmt: skip
        done = _process(*args, "--store", store, prefix=prefix)
        assert (done.returncode, b"Traceback" in done.stderr) == (0, False), done.stderr
    assert _file_state(store) == before


def test_the_worker_on_a_read_only_store_file_is_pw709_and_creates_no_ledger(store: str) -> None:
    os.chmod(store, 0o444)
    before = _file_state(store)
    done = _process("worker", "--drain", "--store", store, prefix=_read_only_prefix())
    assert b"Traceback" not in done.stderr
    assert done.returncode == 1 and b"error[PW709]" in done.stderr, done.stderr
    assert _file_state(store) == before


def test_a_store_in_a_read_only_directory_is_pw700(store: str) -> None:
    directory = Path(store).parent
    os.chmod(directory, 0o555)  # noqa: S103 - read-only on purpose
    try:
        prefix = _read_only_prefix()
        for args in (["show", "a1"], ["submit", "a1", "deliver", "--as", "seller:bob", "--key", "k2"],
                     ["worker", "--drain"], ["parties", "list"]):  # fmt: skip
            done = _process(*args, "--store", store, prefix=prefix)
            assert b"Traceback" not in done.stderr
            assert (done.returncode, b"error[PW700]" in done.stderr) == (2, True), done.stderr
        assert sorted(p.name for p in directory.iterdir()) == ["store.db"]
    finally:
        os.chmod(directory, 0o755)  # noqa: S103 - back as tmp_path made it


# Time at the end of the clock's range --------------------------------------------------


@pytest.fixture
def refund_at_the_end_of_time(tmp_path: Path) -> Iterator[str]:
    """support.refund r1 opened and assessed at 9999-12-31T23:59:59Z; `issue` needs an approval."""
    from tests.effect_env import PARAMS, refund_store
    from tests.effect_env import PARTIES as REFUND_PARTIES

    with refund_store("sqlite", tmp_path, "reconcilable") as url:
        with open_store(url) as opened:
            open_agreement(opened, "support.refund", PARAMS, REFUND_PARTIES, agreement_id="r1",
                           clock=TestClock(MAX_CLOCK))  # fmt: skip
            submit(opened, "r1", "assess", "assistant", "bot", "assess", clock=TestClock(MAX_CLOCK))
        yield url


def test_a_command_parked_at_the_end_of_time_is_reported_without_a_traceback(refund_at_the_end_of_time: str) -> None:
    url = refund_at_the_end_of_time
    code, _out, err = _cli("submit", "r1", "issue", "--as", "support_agent:sam", "--key", "i", "--store", url,
                          "--clock-file", _clock_file(MAX_CLOCK))  # fmt: skip
    assert "Traceback" not in err
    assert code in (0, 1, 2), err


@pytest.mark.parametrize("action", ["list", "show"])
def test_listing_an_approval_that_expires_after_9999_has_no_traceback(
    refund_at_the_end_of_time: str, action: str
) -> None:
    url = refund_at_the_end_of_time
    with open_store(url) as opened:
        parked = submit(opened, "r1", "issue", "support_agent", "sam", "i", clock=TestClock(MAX_CLOCK))
    assert parked.status == "waiting_for_approval"
    args = ["approvals", "list"] if action == "list" else ["approvals", "show", parked.approval["id"]]
    code, _out, err = _cli(*args, "--store", url, "--clock-file", _clock_file(MAX_CLOCK))
    assert "Traceback" not in err
    assert code == 0, err


def test_the_marketplace_runs_at_the_end_of_time_and_at_the_epoch(store: str) -> None:
    end, epoch = _clock_file(MAX_CLOCK), _clock_file(0)
    assert _cli(*SUBMIT, "--key", "k2", "--store", store, "--clock-file", end)[0] == 0
    for args in (["show", "a1"], ["evidence", "a1"], ["evidence", "verify", "a1"], ["outbox", "list"],
                 ["scheduler", "--once", "--clock-file", end], ["worker", "--drain", "--clock-file", end]):  # fmt: skip
        code, out, err = _cli(*args, "--store", store)
        assert (code, "Traceback" in err) == (0, False), (args, err)
    # The clock going back to 1970 must not commit before the last event.
    got, out, err = _cli("submit", "a1", "dispute", "--as", "buyer:alice", "--key", "k3", "--store", store,
                         "--clock-file", epoch, "--format", "json")  # fmt: skip
    assert (got, "Traceback" in err) == (0, False), err
    assert (json.loads(out)["committed_at"], json.loads(out)["state"]) == (MAX_CLOCK, "disputed")


def test_a_postgresql_ledger_url_with_bytes_that_are_not_utf8_is_pw550(store: str) -> None:
    done = _process(b"show", b"a1", b"--store", store.encode(), b"--ledger", PG_BASE.encode() + b"\xff")
    assert b"Traceback" not in done.stderr
    assert done.returncode == 2 and b"error[PW550]" in done.stderr, done.stderr


@pytest.mark.parametrize(
    "args",
    [["parties", "add", "pete", "--role", "operator"], ["worker", "--drain"], ["outbox", "list"], ["show", "a1"],
     ["open", PACT_ID, "--id", "b1", "--param", "price=1.00", *PARTIES]],
    ids=["parties-add", "worker", "outbox-list", "show", "open"],
)  # fmt: skip
def test_a_database_of_another_program_is_not_a_store(tmp_path: Path, args: list[str]) -> None:
    """Once `parties add` built the store's tables inside an application's SQLite file, and the worker made a
    ledger beside it; such a file is now PW700 for every command, and stays byte for byte as it was."""
    other = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(other)) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('ann')")
        conn.commit()
    before = sorted(p.name for p in tmp_path.iterdir()), other.read_bytes()
    code, _out, err = _cli(*args, "--store", str(other))
    assert "Traceback" not in err
    assert (code, CODE_RE.findall(err)[:1]) == (2, ["PW700"]), err
    assert (sorted(p.name for p in tmp_path.iterdir()), other.read_bytes()) == before
