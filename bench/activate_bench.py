"""Activation benchmark: verifying and activating a bundle against just hashing its bytes.

Activation reads a bundle directory safely (lstat first, descriptor-based
reads), parses and checks its canonical documents, verifies ed25519
signatures and the approval, checks the report's bindings, and writes the
bundle verbatim into the store in one transaction. Its floor is hashing the
same bytes, which it must do anyway. This prints, for the reference bundle
and for one with 2,000 more listed artifact files, the median time of:

- `activate`: read the directory + verify + activate into a new SQLite store
  (or a fresh PostgreSQL schema, with a `postgresql://` URL argument);
- `verify`: the verification core alone, on bytes already in memory;
- `sha256`: hashing every file's bytes in memory, in the same process;

and the ratios of the first two to the third.

The bundles are built, approved and signed here with the kernel's own
approve/sign functions. The extra files are compiled in *before*
verification (as `ledger/extra_NNNN.num`), so the report binds them as it
binds every real artifact.

Run: `python bench/activate_bench.py [RUNS] [STORE_URL]` (default 15 runs, SQLite).
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.approval import make_approval
from pactwright.bundle_signing import sign_manifest, signatures_bytes
from pactwright.canonical import hash_bytes
from pactwright.compiler.bundle import compile_candidate, with_manifest
from pactwright.compiler.pipeline import check_bytes
from pactwright.manifest import MANIFEST_PATH
from pactwright.runtime.activation import activate, read_bundle, verify_bundle
from pactwright.runtime.store import open_store
from pactwright.signing import APPROVAL_PATH, SIGNATURES_PATH
from pactwright.trust import Trust, add_key
from pactwright.verifier.explorer import Bounds
from pactwright.verifier.render import report_files
from pactwright.verifier.verify import VerifyOptions, verify_files

POLICY = Path(__file__).resolve().parents[1] / "policies" / "marketplace_milestone.pact"
EXTRA_FILES = 2_000
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def build(extra: int, policy: Path = POLICY, *, allow_incomplete: bool = False) -> dict[str, bytes]:
    """The bundle of `policy` (the reference one by default), plus `extra` listed ledger files, verified
    (a bounded run accepted only with `allow_incomplete`) and with its manifest."""
    result = check_bytes(policy.read_bytes())
    assert result.candidate is not None
    files = compile_candidate(result.candidate, result.source_map, policy.name)
    for i in range(extra):
        files[f"ledger/extra_{i:04d}.num"] = f"// generated file {i}\n".encode() + files["ledger/fund.num"] * 4
    options = VerifyOptions(Bounds(), mutants=False, proofs=False, allow_incomplete=allow_incomplete)
    report = verify_files(files, options)
    rendered = report_files(report)
    files = {p: d for p, d in files.items() if p != MANIFEST_PATH} | rendered
    ref = {"path": "report.json", "hash": hash_bytes(rendered["report.json"]), "verdict": report["verdict"]}
    return with_manifest(files, result.candidate, result.candidate.hash(), report=ref)


def sign(files: Mapping[str, bytes], approver: Ed25519PrivateKey, signer: Ed25519PrivateKey) -> dict[str, bytes]:
    from pactwright.canonical import load_json

    manifest = load_json(files[MANIFEST_PATH])
    approval = make_approval(
        approver,
        pact_id=manifest["pact"]["id"],
        pact_version=manifest["pact"]["version"],
        candidate_hash=manifest["candidate_hash"],
        approver="bench",
    )
    signature = sign_manifest(
        signer,
        manifest_hash=hash_bytes(files[MANIFEST_PATH]),
        approval_hash=approval.hash,
        expires=datetime(2030, 1, 1, tzinfo=UTC),
    )
    return {**files, APPROVAL_PATH: approval.data, SIGNATURES_PATH: signatures_bytes((signature,))}


@contextmanager
def fresh_store(url: str | None, directory: Path) -> Iterator[str]:
    if url is None:
        path = directory / f"store-{secrets.token_hex(4)}.db"
        yield str(path)
        return
    import psycopg

    schema = f"pw_bench_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def median_seconds(runs: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench(name: str, files: dict[str, bytes], trust: bytes, runs: int, url: str | None, tmp: Path) -> None:
    directory = tmp / name
    for rel, data in files.items():
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_bytes(data)
    total = sum(len(d) for d in files.values())

    def activation() -> None:
        bundle = verify_bundle(read_bundle(directory), trust, now=NOW)
        with fresh_store(url, tmp) as store_url, open_store(store_url) as store:
            result = activate(store, bundle)
        assert result.activation_id == 1

    def verification() -> None:
        verify_bundle(files, trust, now=NOW)

    def hashing() -> None:
        for data in files.values():
            hashlib.sha256(data).digest()

    t_activate = median_seconds(runs, activation)
    t_verify = median_seconds(runs, verification)
    t_hash = median_seconds(runs, hashing)
    print(
        f"{name:<10} {len(files):>5} files {total / 1e6:6.2f} MB | activate {t_activate * 1e3:8.1f} ms "
        f"| verify {t_verify * 1e3:7.1f} ms | sha256 {t_hash * 1e3:6.2f} ms "
        f"| activate/sha256 {t_activate / t_hash:6.1f}x  verify/sha256 {t_verify / t_hash:5.1f}x"
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    url = sys.argv[2] if len(sys.argv) > 2 else None
    approver, signer = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    trust = add_key(add_key(Trust(), approver.public_key(), ["approver"]), signer.public_key(), ["signer"])
    print(f"store: {'PostgreSQL' if url else 'SQLite (new file per run)'}; median of {runs} runs")
    tmp = Path(tempfile.mkdtemp(prefix="pw-activate-bench-"))
    try:
        bench("reference", sign(build(0), approver, signer), trust.to_bytes(), runs, url, tmp)
        bench("2000-extra", sign(build(EXTRA_FILES), approver, signer), trust.to_bytes(), max(3, runs // 3), url, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
