"""Bundles for scenarios: compiled and verified once per distinct source per run, signed with throwaway keys.

A scenario names a policy (compiled and verified here, as `pactwright
build` does, with the verifier's slow extras off: one fault, no mutants, no
proofs) or a bundle directory. Either is approved and signed by keys that
exist only for this gate run, under a trust.json naming only them, so
activation checks exactly what it checks in production.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.canonical import canonical_bytes, hash_bytes, load_json
from pactwright.errors import PactwrightError
from pactwright.gate.scenario import ScenarioError
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

__all__ = ["Builder", "edited"]

EXPIRES = "2099-01-01T00:00:00Z"


def edited(data: bytes, find: str, replace: str, what: str) -> bytes:
    """`data` with the first `find` replaced; a `find` that is not there is the scenario's mistake (PW663)."""
    needle = find.encode("utf-8")
    if needle not in data:
        raise ScenarioError(f"`{find[:60]}` does not occur in {what}", code="PW663", field="find")
    return data.replace(needle, replace.encode("utf-8"), 1)


@dataclass
class Builder:
    """One gate run's keys and build cache (by exact source bytes)."""

    approver: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    signer: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    _built: dict[str, dict[str, bytes]] = field(default_factory=dict)

    def trust(self) -> bytes:
        keys = [
            {"keyid": key_id(k.public_key()), "public_key": encode_b64(raw_public_key(k.public_key())),
             "roles": [role], "scope": None, "revoked": False}
            for k, role in ((self.approver, "approver"), (self.signer, "signer"))
        ]  # fmt: skip
        keys.sort(key=lambda k: str(k["keyid"]))
        return canonical_bytes({"format": TRUST_FORMAT, "threshold": 1, "keys": keys})

    def policy(
        self, path: Path, *, version: str | None = None, edit: Mapping[str, str] | None = None
    ) -> dict[str, bytes]:
        """The compiled, verified bundle of the policy at `path` (re-versioned or edited first, if asked)."""
        source = path.read_bytes()
        if edit is not None:
            source = edited(source, edit["find"], edit["replace"], str(path))
        if version is not None:
            source = re.sub(rb'version "[^"]+"', f'version "{version}"'.encode(), source, count=1)
        digest = hash_bytes(source)
        if digest not in self._built:
            self._built[digest] = _compile(source, path)
        return dict(self._built[digest])

    def directory(self, path: Path) -> dict[str, bytes]:
        """The files of a bundle directory (its own approval and signatures are replaced when signed)."""
        return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}

    def sign(self, files: Mapping[str, bytes]) -> dict[str, bytes]:
        """`files` with a fresh approval.json and signatures.json from this run's keys."""
        out = {p: d for p, d in files.items() if p not in (APPROVAL_PATH, SIGNATURES_PATH)}
        if MANIFEST_PATH not in out:
            raise ScenarioError("the bundle has no manifest.json", code="PW663", field="bundle")
        manifest: dict[str, Any] = load_json(out[MANIFEST_PATH])
        statement = approval_statement(pact_id=manifest["pact"]["id"], pact_version=manifest["pact"]["version"],
                                       candidate_hash=manifest["candidate_hash"], approver="gate",
                                       keyid=key_id(self.approver.public_key()))  # fmt: skip
        approval = canonical_bytes({"format": APPROVAL_FORMAT, "statement": statement,
                                    "signature": sign_statement(self.approver, statement)})  # fmt: skip
        signed = signature_statement(manifest_hash=hash_bytes(out[MANIFEST_PATH]), approval_hash=hash_bytes(approval),
                                     expires=EXPIRES, keyid=key_id(self.signer.public_key()))  # fmt: skip
        entry = {"statement": signed, "signature": sign_statement(self.signer, signed)}
        out[APPROVAL_PATH] = approval
        out[SIGNATURES_PATH] = canonical_bytes({"format": SIGNATURES_FORMAT, "signatures": [entry]})
        return out


def _compile(source: bytes, path: Path) -> dict[str, bytes]:
    from pactwright.compiler.bundle import compile_candidate, with_manifest
    from pactwright.compiler.pipeline import check_bytes
    from pactwright.verifier.explorer import Bounds
    from pactwright.verifier.render import report_files
    from pactwright.verifier.verify import VerifyOptions, verify_files

    try:
        result = check_bytes(source)
        if result.candidate is None:
            codes = ", ".join(sorted({d.code for d in result.diagnostics})) or "blockers"
            raise ScenarioError(f"policy `{path}` does not check ({codes})", code="PW663", file=str(path))
        files = compile_candidate(result.candidate, result.source_map, path.name)
        report = verify_files(files, VerifyOptions(Bounds(faults=1), mutants=False, proofs=False))
    except PactwrightError as exc:
        if isinstance(exc, ScenarioError):
            raise
        raise ScenarioError(f"policy `{path}` cannot be built: [{exc.code}] {exc.message}", code="PW663",
                            file=str(path)) from None  # fmt: skip
    rendered = report_files(report)
    files = {p: d for p, d in files.items() if p != MANIFEST_PATH} | rendered
    return with_manifest(
        files,
        result.candidate,
        result.candidate.hash(),
        report={"path": "report.json", "hash": hash_bytes(rendered["report.json"]), "verdict": report["verdict"]},
    )
