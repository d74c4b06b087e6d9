"""Activation: verify a signed bundle's bytes, then make it the active version atomically.

The verification core, `verify_bundle`, takes bytes only (a mapping of
relative path to file bytes, and the trust file's bytes) and a time, like
python-tuf's trusted-metadata set: reading a directory safely is
`read_bundle`'s job, and the store is touched only by `activate`, inside one
transaction, after everything else has passed. A refusal raises
`Refusal` (an `ActivationError`) with a stable code; nothing is written.

Checks run in the fixed order of `VERIFICATION_ORDER`, so a bundle with
several problems always reports the same one first, and the order says
what each later step may rely on (signatures are checked over a manifest
already known to be well-formed and to describe exactly these bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pactwright.bundle_signing import format_time
from pactwright.errors import StoreError
from pactwright.manifest import MANIFEST_PATH
from pactwright.runtime import _checks_files as files_checks
from pactwright.runtime import _checks_signed as signed_checks
from pactwright.runtime._bundle_reader import Limits, read_bundle
from pactwright.runtime._clock import Clock, FixedClock, SystemClock
from pactwright.runtime._refusal import Refusal
from pactwright.runtime._semver import compare, parse_version
from pactwright.signing import APPROVAL_PATH, SIGNATURES_PATH
from pactwright.trust import Trust, parse_trust

if TYPE_CHECKING:
    from pactwright.runtime.store import ActiveVersion, Store

__all__ = [
    "VERIFICATION_ORDER",
    "ActivationResult",
    "Clock",
    "Decision",
    "FixedClock",
    "Limits",
    "Refusal",
    "SystemClock",
    "VerifiedBundle",
    "activate",
    "activate_files",
    "decide",
    "read_bundle",
    "verify_bundle",
]

# (step, codes it can raise), in the order activation runs them; docs/threat-model.md lists the same.
VERIFICATION_ORDER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("read the bundle directory (lstat first; nothing is read whole before every size is known)",
     ("PW420", "PW421", "PW422", "PW423", "PW433")),
    ("read the trust file (the kernel's `pactwright.trust.parse_trust`; exit 2)",
     ("PW403", "PW404", "PW405", "PW406")),
    ("manifest: present, canonical JSON, supported format, safe listed paths, well-formed, supported compiler",
     ("PW424", "PW425", "PW426", "PW427", "PW428", "PW429")),
    ("closed world: look-alike, renamed, missing, unlisted files", ("PW430", "PW431", "PW432", "PW433")),
    ("every listed file's size and sha256", ("PW434",)),
    ("every listed JSON file is canonical; candidate.json is the manifest's pact", ("PW425", "PW435")),
    ("signatures.json: present, canonical, well-formed, not empty", ("PW436", "PW425", "PW437", "PW438")),
    ("approval.json: present, canonical, well-formed", ("PW439", "PW425", "PW440")),
    ("each signature: known key, not revoked, signer role, scope, valid, bound to this manifest and "
     "approval, unexpired", ("PW441", "PW442", "PW443", "PW444", "PW445", "PW446", "PW447", "PW448")),
    ("threshold of distinct signer keys; one entry per key", ("PW449", "PW450")),
    ("approval: trusted approver for this pact, valid, for this candidate", ("PW451", "PW452", "PW453")),
    ("report: present, well-formed, the manifest's, bound to this candidate and these bytes, passing",
     ("PW454", "PW455", "PW456", "PW457", "PW458", "PW459", "PW462")),
    ("version against the store's active one (in the activation transaction)", ("PW460", "PW461")),
)  # fmt: skip


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle that passed every check but the version check, with what it binds."""

    pact_id: str
    pact_version: str
    manifest_hash: str
    candidate_hash: str
    files: Mapping[str, bytes]
    approval_hash: str
    approver: str
    approver_keyid: str
    signer_keyids: tuple[str, ...]
    expires: str  # the earliest signature expiry
    report_verdict: str
    verified_at: datetime  # the trusted time expiry was checked against; recorded on activation

    def manifest_files(self) -> dict[str, bytes]:
        """The manifest and every file it lists: the bytes the manifest hash covers."""
        return {p: d for p, d in self.files.items() if p not in (APPROVAL_PATH, SIGNATURES_PATH)}


def verify_bundle(files: Mapping[str, bytes], trust: bytes | Trust, *, now: datetime) -> VerifiedBundle:
    """Every check of `VERIFICATION_ORDER` except the version, over bytes only.

    Raises `Refusal` (PW424-PW459, PW462) or, for a bad trust file, `UsageError`
    (PW403-PW406). Pure: no file system, no store, no clock but `now`.
    """
    if now.tzinfo is None:
        raise ValueError("`now` must be timezone-aware (UTC)")
    trusted = trust if isinstance(trust, Trust) else parse_trust(trust)
    manifest = files_checks.check_manifest(files)
    try:
        files_checks.check_closed_world(files, manifest)
        files_checks.check_artifacts(files, manifest)
        documents = files_checks.check_json_artifacts(files, manifest)
        files_checks.check_candidate(manifest, documents)
        entries = signed_checks.load_signatures(files)
        approval = signed_checks.load_approval(files)
        signers = signed_checks.check_signatures(
            entries, trusted, manifest, manifest_hash=manifest.hash, approval_hash=approval.hash, now=now
        )
        signed_checks.check_approval(approval, trusted, manifest)
        verdict = files_checks.check_report(files, manifest, documents)
    except Refusal as exc:
        exc.pact = (manifest.pact_id, manifest.pact_version)
        raise
    return VerifiedBundle(
        pact_id=manifest.pact_id,
        pact_version=manifest.pact_version,
        manifest_hash=manifest.hash,
        candidate_hash=manifest.candidate_hash,
        files=dict(files),
        approval_hash=approval.hash,
        approver=approval.approver,
        approver_keyid=approval.keyid,
        signer_keyids=signers,
        expires=min(e.statement["expires"] for e in entries),
        report_verdict=verdict,
        verified_at=now,
    )


@dataclass(frozen=True)
class Decision:
    """What activating `bundle` over the current active version means."""

    action: Literal["activate", "unchanged"]
    previous: ActiveVersion | None
    forced: bool  # True only when `--force-rollback` was needed and used


def decide(bundle: VerifiedBundle, active: ActiveVersion | None, force_reason: str | None = None) -> Decision:
    """The version check (PW460, PW461): forward only, unless a forced rollback with a reason.

    Re-activating the active bundle itself is an idempotent success that
    changes nothing. Versions compare by SemVer precedence.
    """
    if active is None:
        return Decision("activate", None, forced=False)
    if parse_version(active.pact_version) is None:
        raise StoreError(
            f"the store's active version `{active.pact_version}` of `{active.pact_id}` is not a semantic version",
            code="PW707",
            hint="the store was changed outside pactwright; run `pactwright store verify`",
        )
    order = compare(bundle.pact_version, active.pact_version)
    if order > 0:
        return Decision("activate", active, forced=False)
    if order == 0 and bundle.manifest_hash == active.manifest_hash:
        return Decision("unchanged", active, forced=False)
    if force_reason:
        return Decision("activate", active, forced=True)
    if order == 0:
        refusal = Refusal(
            "PW461",
            f"version {bundle.pact_version} is already active with other bytes",
            file=MANIFEST_PATH,
            field="pact/version",
            expected=f"{active.manifest_hash} (active)",
            found=f"{bundle.manifest_hash} (this bundle)",
            labels=("active manifest", "bundle manifest"),
            hint="give a changed policy a new version; `--force-rollback --reason TEXT` replaces it deliberately",
        )
    else:
        refusal = Refusal(
            "PW460",
            f"version {bundle.pact_version} is lower than the active {active.pact_version}: a rollback",
            file=MANIFEST_PATH,
            field="pact/version",
            expected=active.pact_version,
            found=bundle.pact_version,
            labels=("active", "bundle"),
            hint="to roll back on purpose, add `--force-rollback --reason TEXT` (the reason is recorded)",
        )
    refusal.pact = (bundle.pact_id, bundle.pact_version)
    raise refusal


@dataclass(frozen=True)
class ActivationResult:
    bundle: VerifiedBundle
    decision: Decision
    activation_id: int | None  # None when nothing changed
    activated_at: str


def activate(store: Store, bundle: VerifiedBundle, *, force_reason: str | None = None) -> ActivationResult:
    """Make a verified bundle the active version of its pact, in one transaction.

    The version check runs inside the transaction, under the store's writer
    lock, so two activations racing cannot both pass it. The activation is
    recorded at `bundle.verified_at`: the instant that decided expiry is the
    instant on record. Any refusal (PW460, PW461) or store error (PW7xx)
    leaves the store exactly as it was; re-activating the active bundle
    changes nothing and succeeds.
    """
    stamp = format_time(bundle.verified_at)
    with store.writing() as tx:
        decision = decide(bundle, tx.active(bundle.pact_id), force_reason)
        if decision.action == "unchanged":
            return ActivationResult(bundle, decision, None, stamp)
        tx.put_bundle(bundle.pact_id, bundle.pact_version, bundle.manifest_hash, bundle.manifest_files())
        activation_id = tx.record_activation(
            pact_id=bundle.pact_id,
            pact_version=bundle.pact_version,
            manifest_hash=bundle.manifest_hash,
            approval=bundle.files[APPROVAL_PATH],
            signatures=bundle.files[SIGNATURES_PATH],
            activated_at=stamp,
            forced=decision.forced,
            reason=force_reason if decision.forced else None,
            previous=decision.previous,
        )
    return ActivationResult(bundle, decision, activation_id, stamp)


def activate_files(
    store: Store,
    files: Mapping[str, bytes],
    trust: bytes | Trust,
    *,
    clock: Clock | None = None,
    force_reason: str | None = None,
) -> ActivationResult:
    """`verify_bundle` at the clock's now (default: UTC now), then `activate`."""
    now = (clock or SystemClock()).now()
    return activate(store, verify_bundle(files, trust, now=now), force_reason=force_reason)
