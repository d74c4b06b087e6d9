"""Real signed bundles for activation tests, made the way approve/sign make them.

Keys, `trust.json`, `approval.json` and `signatures.json` are written here
directly with `pactwright.signing` and `cryptography`, following
docs/signing.md byte for byte, so the activation tests do not depend on the
approve/sign commands (and would catch it if those drifted from the
documented formats). Bundles are compiled and verified in-process from the
reference policy (`compile_candidate` + `verify_files` + `report_files` +
`with_manifest`, as `pactwright build` does), with the verifier's slow
extras (mutants, z3) off: the report is still a real, bound, passing one.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.manifest import MANIFEST_PATH
from pactwright.signing import (
    APPROVAL_FORMAT,
    APPROVAL_PATH,
    SIGNATURES_FORMAT,
    SIGNATURES_PATH,
    TRUST_FORMAT,
    approval_statement,
    encode_b64,
    key_id,
    raw_public_key,
    sign_statement,
    signature_statement,
)

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "policies" / "marketplace_milestone.pact"
PACT_ID = "marketplace.milestone"
EXPIRES = "2030-01-01T00:00:00Z"
NOW = "2026-06-01T12:00:00Z"  # the fixed trusted time tests activate at
DOCUMENTS = (MANIFEST_PATH, APPROVAL_PATH, SIGNATURES_PATH)


@dataclass(frozen=True)
class Key:
    name: str
    private: Ed25519PrivateKey

    @property
    def keyid(self) -> str:
        return key_id(self.private.public_key())

    @property
    def public_b64(self) -> str:
        return encode_b64(raw_public_key(self.private.public_key()))


@cache
def key(name: str) -> Key:
    """One key per name per test session (ed25519 keys are random; names keep tests readable)."""
    return Key(name, Ed25519PrivateKey.generate())


@dataclass(frozen=True)
class Trusted:
    """One trust.json entry."""

    key: Key
    roles: tuple[str, ...] = ("signer",)
    scope: tuple[str, ...] | None = None
    revoked: bool = False
    name: str | None = None  # whose key it is; omitted from the file when None


def trust_bytes(entries: Iterable[Trusted], threshold: int = 1) -> bytes:
    """A canonical trust.json (docs/signing.md): keys sorted by keyid, roles and scope sorted."""
    keys = [
        {
            "keyid": e.key.keyid,
            "public_key": e.key.public_b64,
            "roles": sorted(e.roles),
            "scope": None if e.scope is None else sorted(e.scope),
            "revoked": e.revoked,
            **({} if e.name is None else {"name": e.name}),
        }
        for e in entries
    ]
    return canonical_bytes(
        {"format": TRUST_FORMAT, "threshold": threshold, "keys": sorted(keys, key=lambda k: k["keyid"])}
    )


def default_trust(threshold: int = 1, signers: Iterable[str] = ("signer",)) -> bytes:
    """alice approves; the named signers sign; nobody else is trusted."""
    return trust_bytes(
        [Trusted(key("alice"), ("approver",)), *(Trusted(key(name)) for name in signers)], threshold=threshold
    )


def approval_bytes(manifest: Mapping[str, Any], approver: Key, name: str = "alice") -> bytes:
    """approval.json over the manifest's candidate, signed by `approver`."""
    statement = approval_statement(
        pact_id=manifest["pact"]["id"],
        pact_version=manifest["pact"]["version"],
        candidate_hash=manifest["candidate_hash"],
        approver=name,
        keyid=approver.keyid,
    )
    return canonical_bytes(
        {"format": APPROVAL_FORMAT, "statement": statement, "signature": sign_statement(approver.private, statement)}
    )


def signatures_bytes(manifest: bytes, approval: bytes, signers: Iterable[Key], expires: str = EXPIRES) -> bytes:
    """signatures.json binding these exact manifest and approval bytes; entries sorted by keyid.

    A key named twice signs twice (tests of distinct-key counting); the
    format allows one entry per key, so that is itself a refusal.
    """
    entries: list[dict[str, Any]] = []
    for signer in signers:
        statement = signature_statement(
            manifest_hash=hash_bytes(manifest), approval_hash=hash_bytes(approval), expires=expires, keyid=signer.keyid
        )
        entries.append({"statement": statement, "signature": sign_statement(signer.private, statement)})
    entries.sort(key=lambda e: e["statement"]["keyid"])
    return canonical_bytes({"format": SIGNATURES_FORMAT, "signatures": entries})


@cache
def compile_verified(source: bytes, name: str, faults: int = 1, allow_incomplete: bool = False
                     ) -> tuple[dict[str, bytes], str]:  # fmt: skip
    """Compile and verify a policy in-process, as `pactwright build` does (mutants and proofs off).

    Returns the bundle (report included, unsigned) and the report's verdict; `allow_incomplete` is
    `build --allow-incomplete` (an incomplete run is accepted as `pass`, and the report says so).
    """
    from pactwright.compiler.bundle import compile_candidate, with_manifest
    from pactwright.compiler.pipeline import check_bytes
    from pactwright.verifier.explorer import Bounds
    from pactwright.verifier.render import report_files
    from pactwright.verifier.verify import VerifyOptions, verify_files

    result = check_bytes(source)
    assert result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, name)
    options = VerifyOptions(Bounds(faults=faults), mutants=False, proofs=False, allow_incomplete=allow_incomplete)
    report = verify_files(files, options)
    rendered = report_files(report)
    files = {p: d for p, d in files.items() if p != MANIFEST_PATH} | rendered
    bundle = with_manifest(
        files,
        result.candidate,
        result.candidate.hash(),
        report={"path": "report.json", "hash": hash_bytes(rendered["report.json"]), "verdict": report["verdict"]},
    )
    return bundle, str(report["verdict"])


def _built(version: str, faults: int) -> tuple[tuple[str, bytes], ...]:
    source = re.sub(rb'version "[^"]+"', f'version "{version}"'.encode(), POLICY.read_bytes(), count=1)
    return tuple(sorted(compile_verified(source, POLICY.name, faults)[0].items()))


def built(version: str = "1.0.0", faults: int = 1) -> dict[str, bytes]:
    """The compiled, verified (unsigned) reference bundle at `version`; `faults` changes only the report."""
    return dict(_built(version, faults))


def manifest_of(files: Mapping[str, bytes]) -> dict[str, Any]:
    doc: dict[str, Any] = load_json(files[MANIFEST_PATH])
    return doc


def sign(
    files: Mapping[str, bytes],
    *,
    approver: Key | None = None,
    signers: Iterable[Key] | None = None,
    expires: str = EXPIRES,
    approver_name: str = "alice",
) -> dict[str, bytes]:
    """`files` (a built bundle) with a fresh approval.json and signatures.json."""
    out = {p: d for p, d in files.items() if p not in (APPROVAL_PATH, SIGNATURES_PATH)}
    out[APPROVAL_PATH] = approval_bytes(manifest_of(out), approver or key("alice"), approver_name)
    out[SIGNATURES_PATH] = signatures_bytes(
        out[MANIFEST_PATH], out[APPROVAL_PATH], signers if signers is not None else [key("signer")], expires
    )
    return out


def signed(version: str = "1.0.0", **options: Any) -> dict[str, bytes]:
    """A good signed bundle: built at `version`, approved by alice, signed by `signer`."""
    return sign(built(version), **options)


def remanifest(files: Mapping[str, bytes], edit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, bytes]:
    """A new manifest over the current artifact files, optionally edited; approval and signatures dropped.

    Re-sign the result: tests that a check holds even when the bad manifest
    carries valid signatures (a compromised or careless signer).
    """
    manifest = manifest_of(files)
    artifacts = {p: d for p, d in files.items() if p not in DOCUMENTS}
    manifest["artifacts"] = [{"path": p, "sha256": hash_bytes(d), "size": len(d)} for p, d in sorted(artifacts.items())]
    if edit is not None:
        edit(manifest)
    return {**artifacts, MANIFEST_PATH: canonical_bytes(manifest)}


def write(files: Mapping[str, bytes], directory: Path) -> Path:
    """Write a bundle to `directory` (created); returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        target = directory / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return directory


# Stores --------------------------------------------------------------------------

# The PostgreSQL server the tests use; they fail (never skip) when it is unreachable.
POSTGRES_URL = os.environ.get("PACTWRIGHT_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test")
BACKENDS = ("sqlite", "postgresql")


@contextlib.contextmanager
def temporary_store(backend: str, directory: Path) -> Iterator[str]:
    """A store URL for one test: a new SQLite file, or a fresh PostgreSQL schema dropped afterwards."""
    if backend == "sqlite":
        yield str(directory / "store.db")
        return
    import psycopg

    schema = f"pw_test_{secrets.token_hex(8)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=10) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            separator = "&" if "?" in POSTGRES_URL else "?"
            yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
            # `open_ledger(None, url)` puts the store's default ledger in a sibling schema: dropped too.
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}_ledger" CASCADE')


def dump(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every store table (an empty dict for a store that does not exist yet)."""
    from pactwright.errors import PactwrightError
    from pactwright.runtime.store import open_store

    try:
        store = open_store(url, migrate_schema=False)
    except PactwrightError:
        return {}
    with store:
        return store.dump()


@cache
def verified_policy(path: Path, allow_incomplete: bool = False) -> tuple[tuple[str, bytes], ...]:
    """The policy file's bundle, compiled and verified once per test run; its verdict must be pass."""
    bundle, verdict = compile_verified(path.read_bytes(), path.name, allow_incomplete=allow_incomplete)
    assert verdict == "pass", f"{path.name} does not verify: {verdict}"
    return tuple(sorted(bundle.items()))


@contextlib.contextmanager
def store_with_policy(backend: str, directory: Path, path: Path, allow_incomplete: bool = False) -> Iterator[str]:
    """A temporary store with the policy file's bundle signed and activated in it (at NOW)."""
    from datetime import datetime

    from pactwright.runtime.activation import FixedClock, activate_files
    from pactwright.runtime.store import open_store

    with temporary_store(backend, directory) as url:
        with open_store(url) as store:
            activate_files(store, sign(dict(verified_policy(path, allow_incomplete))), default_trust(),
                           clock=FixedClock(datetime.fromisoformat(NOW)))  # fmt: skip
        yield url
