"""Re-verification of stored rows on every load: the store is not trusted either.

Activation verified the bytes once; the runtime executes them much later,
after backups, restores, migrations and anyone with write access to the
database. So every load re-hashes what it is about to use against the
stored manifest, and the manifest against the hash that was activated, and
checks that the rows agree with each other. A row edited behind the
runtime's back is refused with its own code (PW702-PW707) before any of it
is used: that includes a value of the wrong type (text where bytes were
stored), the active pointer moved back to an older activation or deleted
while the pact's activations remain (the cheapest rollback of all: no
bundle, no signature, one `UPDATE`), and an activation history whose
records no longer chain. (Someone who can rewrite rows *consistently* — a new manifest and
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
from pactwright.runtime._semver import compare, parse_version


def tampered(code: str, message: str, **fields: str) -> StoreError:
    return StoreError(
        message,
        code=code,
        hint="the store was changed outside pactwright; restore a backup or re-activate from the signed bundle",
        **fields,
    )


def as_bytes(value: Any, code: str, what: str, **fields: str) -> bytes:
    """A binary column's value; anything else (SQLite stores whatever it is given) is tampering."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise tampered(code, f"{what} is stored as {type(value).__name__}, not bytes", **fields)


def as_int(value: Any, code: str, what: str, **fields: str) -> int:
    """An integer column's value, refused unless it is really an integer."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise tampered(code, f"{what} is stored as {type(value).__name__} `{str(value)[:40]}`, not an integer", **fields)


# Parsing a document is a pure function of its bytes: once the bytes are re-hashed and match,
# the parse of the same digest is reused (every load still hashes every stored byte). The
# cached documents are never mutated by their readers.
_PARSED: dict[tuple[str, str], Any] = {}
_PARSED_LIMIT = 256


def _remember(kind: str, digest: str, parse: Any) -> Any:
    key = (kind, digest)
    found = _PARSED.get(key)
    if found is None:
        found = parse()
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        _PARSED[key] = found
    return found


def _parsed_manifest(digest: str, data: bytes) -> Manifest:
    """`parse_manifest` of bytes whose hash the caller has just checked equals `digest`."""
    view: Manifest = _remember("manifest", digest, lambda: parse_manifest(data))
    return view


def _parsed_signatures(digest: str, data: bytes) -> Any:
    """The canonical signatures document of bytes whose hash the caller has just checked equals `digest`."""
    if hash_bytes(data) != digest:  # checked before too; the cache must never serve other bytes
        return load_json(data, require_canonical=True)
    return _remember("signatures", digest, lambda: load_json(data, require_canonical=True))


def check_bundle_rows(
    manifest_hash: str, pact_id: str, pact_version: str, rows: Sequence[tuple[str, str, int, bytes | None]]
) -> tuple[Manifest, dict[str, bytes]]:
    """Stored `(path, sha256, size, content)` rows of one bundle, re-hashed against its manifest.

    A row whose content is None was not read (a load of some files only):
    its path, hash and size columns must still agree with the manifest, and
    it is left out of the files returned. The manifest is always read.
    """
    files = {path: content for path, _, _, content in rows if content is not None}
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
        view = _parsed_manifest(manifest_hash, manifest)
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
    stored = {path for path, _, _, _ in rows} - {MANIFEST_PATH}
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
        if content is None:  # not read: the row's own columns must still be the manifest's
            if sha256 != want or size != want_size:
                raise tampered(
                    "PW705",
                    f"the stored `{path}` of {pact_id} {pact_version} does not match its manifest",
                    file=path,
                    expected=f"{want}  size {want_size}",
                    found=f"row says {sha256}, size {size}",
                )
            continue
        found = manifest_hash if path == MANIFEST_PATH else hash_bytes(content)  # the manifest: hashed above
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
        doc = _parsed_signatures(str(activation["signatures_hash"]), signatures)
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


def check_latest(pact_id: str, pointers: Sequence[tuple[Any, ...]], latest: Any) -> int | None:
    """The activation the `active` row names, which must be the pact's latest; None if never activated.

    `pointers` are the pact's `active` rows (activation ids), `latest` the
    highest activation id recorded for it, both read in one statement.
    Every activation moves the pointer to the record it appends, so anything
    else is a pointer set back (to an older version, without any signature)
    or deleted so that the next activation of an older bundle is not seen
    as the rollback it is.
    """
    if len(pointers) > 1:
        raise tampered("PW707", f"`{pact_id}` has {len(pointers)} active versions", field="active")
    pointer = None if not pointers else as_int(pointers[0][0], "PW707", f"the active pointer of `{pact_id}`")
    if pointer == latest:
        return pointer
    if pointer is None:
        message = f"no version of `{pact_id}` is active, but activation {latest} of it is recorded"
    elif latest is None:
        message = f"the active version of `{pact_id}` names activation {pointer}, but no activation of it is recorded"
    else:
        message = f"the active version of `{pact_id}` is activation {pointer}, not its latest activation {latest}"
    raise tampered(
        "PW707",
        message,
        field="active",
        expected=f"activation {latest} (latest recorded)",
        found=f"activation {pointer} (active row)" if pointer is not None else "no active row",
    )


def check_history(pact_id: str, records: Sequence[tuple[int, str, str, int, str | None, str | None]]) -> None:
    """One pact's activation records, oldest first: each names the one before it and was forced only if it had to be.

    A record is `(id, version, manifest_hash, forced, previous_version,
    previous_manifest_hash)`. Activation writes `previous_*` from the active
    version it replaced (the record before it) and sets `forced` exactly
    when the version did not go up, so a record deleted from the middle of
    the history, or a forced rollback re-labelled as an upgrade, breaks the chain.
    """
    before: tuple[str, str] | None = None
    for activation_id, version, manifest_hash, forced, previous_version, previous_hash in records:
        where = f"activation {activation_id} of `{pact_id}`"
        if (previous_version, previous_hash) != (before or (None, None)):
            raise tampered(
                "PW707",
                f"{where} does not name the activation before it as the version it replaced",
                field="previous_version",
                expected=f"{before[0]} {before[1]}" if before else "none (first activation)",
                found=f"{previous_version} {previous_hash}",
            )
        if before is not None:
            if parse_version(str(version)) is None or parse_version(before[0]) is None:
                raise tampered("PW707", f"{where} or the one before it has no semantic version", field="pact_version")
            if bool(forced) != (compare(str(version), before[0]) <= 0):
                raise tampered(
                    "PW707",
                    f"{where} is recorded as {'a forced rollback' if forced else 'an upgrade'} "
                    f"from {before[0]} to {version}, which it was not",
                    field="forced",
                )
        elif forced:
            raise tampered("PW707", f"{where} is its first activation but is recorded as a forced rollback")
        before = (str(version), str(manifest_hash))
