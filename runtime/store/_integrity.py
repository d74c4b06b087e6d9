"""Re-verification of stored rows on every load: the store is not trusted either.

Activation verified the bytes once; the runtime executes them much later,
after backups, restores, migrations and anyone with write access to the
database. So every load re-hashes what it is about to use against the
stored manifest, and the manifest against the hash that was activated, and
checks that the rows agree with each other. A row edited behind the
runtime's back is refused with its own code (PW702-PW707) before any of it
is used. (Someone who can rewrite rows *consistently* — a new manifest and
new hashes everywhere — is caught only by re-checking signatures against
the trust file: `pactwright store verify --trust`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pactwright.bundle_check import Manifest, parse_manifest
from pactwright.canonical import hash_bytes, load_json
from pactwright.errors import PactwrightError, StoreError
from pactwright.manifest import MANIFEST_PATH


def tampered(code: str, message: str, **fields: str) -> StoreError:
    return StoreError(
        message,
        code=code,
        hint="the store was changed outside pactwright; restore a backup or re-activate from the signed bundle",
        **fields,
    )


def check_bundle_rows(
    manifest_hash: str, pact_id: str, pact_version: str, rows: Sequence[tuple[str, str, int, bytes]]
) -> tuple[Manifest, dict[str, bytes]]:
    """Stored `(path, sha256, size, content)` rows of one bundle, re-hashed against its manifest."""
    files = {path: content for path, _, _, content in rows}
    where = f"bundle {manifest_hash}"
    manifest = files.get(MANIFEST_PATH)
    if manifest is None:
        raise tampered("PW704", f"{where} has no stored `manifest.json`", file=MANIFEST_PATH)
    if hash_bytes(manifest) != manifest_hash:
        raise tampered(
            "PW703",
            f"the stored `manifest.json` of {pact_id} {pact_version} is not the activated one",
            file=MANIFEST_PATH,
            expected=manifest_hash,
            found=hash_bytes(manifest),
        )
    try:
        view = parse_manifest(manifest)
    except PactwrightError as exc:
        raise tampered("PW703", f"the stored manifest of {where} does not parse: {exc.message}") from None
    if (view.pact_id, view.pact_version) != (pact_id, pact_version):
        raise tampered(
            "PW707",
            f"{where} is recorded as another pact or version than its manifest says",
            field="pact",
            expected=f"{view.pact_id} {view.pact_version} (manifest)",
            found=f"{pact_id} {pact_version} (row)",
        )
    listed = {a.path: a for a in view.artifacts}
    stored = set(files) - {MANIFEST_PATH}
    if stored != set(listed):
        gone, added = sorted(set(listed) - stored), sorted(stored - set(listed))
        raise tampered(
            "PW704",
            f"the stored files of {pact_id} {pact_version} differ from its manifest: "
            f"missing {gone or 'none'}, not listed {added or 'none'}",
            file=(gone or added)[0],
        )
    for path, sha256, size, content in rows:
        want = manifest_hash if path == MANIFEST_PATH else listed[path].sha256
        want_size = len(manifest) if path == MANIFEST_PATH else listed[path].size
        found = hash_bytes(content)
        if found != want or sha256 != want or len(content) != want_size or size != want_size:
            raise tampered(
                "PW705",
                f"the stored `{path}` of {pact_id} {pact_version} does not match its manifest",
                file=path,
                expected=f"{want}  size {want_size}",
                found=f"{found}  size {len(content)} (row says {sha256}, size {size})",
            )
    return view, files


def check_activation_row(
    activation: dict[str, Any], approval: bytes, signatures: bytes, manifest_hash: str, pact: tuple[str, str]
) -> None:
    """The stored approval and signatures are the activated ones and bind this manifest."""
    what = f"activation {activation['id']}"
    if (activation["pact_id"], activation["pact_version"]) != pact or activation["manifest_hash"] != manifest_hash:
        raise tampered(
            "PW707",
            f"{what} does not match the bundle it points at",
            expected=f"{pact[0]} {pact[1]} {manifest_hash}",
            found=f"{activation['pact_id']} {activation['pact_version']} {activation['manifest_hash']}",
        )
    for name, data, recorded in (
        ("approval.json", approval, activation["approval_hash"]),
        ("signatures.json", signatures, activation["signatures_hash"]),
    ):
        if hash_bytes(data) != recorded:
            raise tampered(
                "PW706",
                f"the stored `{name}` of {what} is not the one that was activated",
                file=name,
                expected=recorded,
                found=hash_bytes(data),
            )
    try:
        doc = load_json(signatures, require_canonical=True)
        statements = [entry["statement"] for entry in doc["signatures"]]
        bound = all(
            s["manifest_hash"] == manifest_hash and s["approval_hash"] == activation["approval_hash"]
            for s in statements
        )
    except (PactwrightError, KeyError, TypeError):
        bound = False
    if not bound:
        raise tampered(
            "PW706", f"the stored signatures of {what} do not bind its manifest and approval", file="signatures.json"
        )


def check_active_row(pact_id: str, active: tuple[str, str, int], activation: dict[str, Any] | None) -> None:
    """The active pointer agrees with the activation record it names."""
    version, manifest_hash, activation_id = active
    if activation is None or (activation["pact_id"], activation["pact_version"], activation["manifest_hash"]) != (
        pact_id,
        version,
        manifest_hash,
    ):
        found = (
            "no such activation"
            if activation is None
            else f"{activation['pact_id']} {activation['pact_version']} {activation['manifest_hash']}"
        )
        raise tampered(
            "PW707",
            f"the active version of `{pact_id}` does not match activation {activation_id}",
            field="active",
            expected=f"{pact_id} {version} {manifest_hash} (active row)",
            found=f"{found} (activation row)",
        )
