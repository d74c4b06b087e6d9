"""The command path: one command, one store transaction, every check, or nothing.

`submit` locks the agreement row (`SELECT ... FOR UPDATE` on PostgreSQL;
SQLite's `BEGIN IMMEDIATE`), answers a known idempotency key from the
stored result, then checks, in this order: the transition exists, the
actor's role may invoke it and the party holds that role, the expected
version, the agreement is not final and is in a source state, the command's
params agree with the agreement's, no effect it depends on is parked or
abandoned, none of its own call sites has a call still in flight (the
worker settles one call per call site at a time), the guard holds at the trusted time, no call is above its
ceiling and the budgets hold. It then runs the bundle's ledger program
with the runtime's Numscript interpreter against the agreement's OWN
balances (so a command that would take a non-external account below zero is
refused here, before any ledger sees it), and checks that the kernel's
movement arithmetic (`pactwright.movement`, which the verifier explores
with) gives the same postings. A transition that needs an approval nobody
granted is parked as an approval request with its preview
(runtime/approvals.py); otherwise the event, the outbox rows with the
expected postings, the effect rows, the new state, the idempotency key and
the event's evidence record (its place and hash on the event row, whose
bytes it is derived from) are committed together. Every refusal is a
`CommandError` (PW501-PW528, PW530, PW603) raised before anything is written.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.errors import CommandError, LedgerError, PactwrightError
from pactwright.money import format_money
from pactwright.movement import ledger_postings, params_of
from pactwright.runtime import _agreement as rows
from pactwright.runtime import _command_effects as effects
from pactwright.runtime._agreement import Agreement, Bundle
from pactwright.runtime._evaluate import evaluate, false_parts, percent_value
from pactwright.runtime._limits import check_limits, record_limits
from pactwright.runtime.agreements import _encode
from pactwright.runtime.clock import Clock, SystemClock, epoch_seconds
from pactwright.runtime.effect_payload import PlannedCall, planned_calls
from pactwright.runtime.numscript import parse_program, run_program
from pactwright.runtime.store import Store
from pactwright.runtime.store._backend import Backend

__all__ = ["Command", "Grant", "SubmitResult", "payload_digest", "run_in", "submit"]

STALE = "STALE_AGREEMENT_VERSION"
# TEST-ONLY hook (docs/runtime.md, "Crash safety"): `before_commit` kills the process with SIGKILL after
# every row of a command is written and before its transaction commits.
CRASH_ENV = "PACTWRIGHT_TEST_SUBMIT_CRASH_AT"
MAX_KEY = 200
# The scheduler's keys (runtime/scheduler.py): a command under one of them is the clock role's alone, so
# no party can commit first under the key of a deadline and have the scheduler refused (PW515) forever.
SCHEDULER_KEYS = "sched/"
_NO_EFFECTS = effects.Tally()
# Read right after the agreement's row is locked: the event committed under the idempotency key
# (NULLs when the key is new) and the last evidence record (NULLs when there is none), one round
# trip for both. On SQLite, whose BEGIN IMMEDIATE already holds the only write lock, the same
# columns are joined to the agreement's own read (`_KEY_AND_HEAD`): one statement fewer.
_KEY_AND_HEAD_COLUMNS = "k.payload_digest, k.payload, k.event_id, k.seq, k.transition, k.committed_at, e.seq, e.hash"
_AFTER_LOCK = (
    f"SELECT {_KEY_AND_HEAD_COLUMNS} FROM (SELECT 1 AS one) o "  # noqa: S608
    "LEFT JOIN events k ON k.agreement_id = ? AND k.idempotency_key = ? "
    f"LEFT JOIN ({rows.HEAD_SQL}) e ON 1 = 1"
)
_KEY_AND_HEAD = (
    f"LEFT JOIN events k ON k.agreement_id = a.id AND k.idempotency_key = ? LEFT JOIN ({rows.HEAD_SQL}) e ON 1 = 1"
)


@dataclass(frozen=True)
class SubmitResult:
    """What a command did (or, with `dry_run`, would do)."""

    agreement_id: str
    event_id: str
    seq: int
    version: int
    state: str
    transition: str
    committed_at: int
    postings: tuple[dict[str, str], ...]
    outbox: tuple[str, ...]
    replayed: bool = False
    dry_run: bool = False
    # The effect calls the transition makes (`_call_json`): committed `prepared`, sent by the worker.
    effects: tuple[dict[str, Any], ...] = ()
    # "committed", or "waiting_for_approval" with the approval request (its id, preview and digest).
    status: str = "committed"
    approval: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "agreement": self.agreement_id,
            "event_id": self.event_id,
            "seq": self.seq,
            "version": self.version,
            "state": self.state,
            "transition": self.transition,
            "committed_at": self.committed_at,
            "postings": list(self.postings),
            "outbox": list(self.outbox),
            "replayed": self.replayed,
            "dry_run": self.dry_run,
            "effects": list(self.effects),
            "status": self.status,
            "approval": self.approval,
        }

    @classmethod
    def stored(cls, db: Backend, agreement_id: str, event: tuple[Any, ...]) -> SubmitResult:
        """The original result of a committed command, rebuilt from its event row and outbox rows.

        `event` is (event id, seq, transition, committed_at, payload) of the
        event committed under the key: the event row is the key's record (it
        holds the key, the payload digest and the command), so nothing keeps
        a second encoding of it. The version and sequence are the event's,
        the state its `to`, the postings and effects its own, the outbox
        references those written with it.
        """
        event_id, seq, transition, committed_at, payload = event
        body = rows.loads(payload, "event")
        outbox = db.query(
            "SELECT reference FROM outbox WHERE agreement_id = ? AND event_seq = ? ORDER BY group_index",
            (agreement_id, int(seq)),
        )
        try:
            return cls(
                agreement_id=agreement_id,
                event_id=str(event_id),
                seq=int(seq),
                version=int(seq),
                state=str(body["to"]),
                transition=str(transition),
                committed_at=int(committed_at),
                postings=tuple(dict(p) for p in body["postings"]),
                outbox=tuple(str(r[0]) for r in outbox),
                replayed=True,
                effects=tuple(dict(e) for e in body.get("effects", [])),
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            raise CommandError(f"the stored event `{event_id}` is malformed", code="PW518") from None


def _payload(transition: str, role: str, party: str, params: Mapping[str, str]) -> dict[str, Any]:
    return {"transition": transition, "actor": {"role": role, "party": party}, "params": dict(params)}


def payload_digest(transition: str, role: str, party: str, params: Mapping[str, str] | None = None) -> str:
    """The digest idempotency keys and approvals bind to: the intent, not the expected version.

    `params` are in the agreement's stored form (money in minor units, as
    `show` prints them in JSON), which is what `submit` digests, so `64.9`
    and `64.90` are one intent.
    """
    return hash_bytes(canonical_bytes(_payload(transition, role, party, params or {})))


def _differs(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> str:
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            inner = _differs(a, b, f"{prefix}{name}.")
            if inner:
                return inner
        elif a != b:
            return f"{prefix}{name}"
    return ""


def _refuse(code: str, message: str, **where: str | None) -> CommandError:
    return CommandError(message, code=code, **where)


def _check(bundle: Bundle, agreement: Agreement, name: str, role: str, party: str,
           expect: int | None, params: Mapping[str, str]) -> dict[str, Any]:  # fmt: skip
    transition = bundle.transition(name)
    if transition is None:
        known = ", ".join(sorted(t["id"] for t in bundle.doc["transitions"]))
        raise _refuse("PW506", f"the pact has no transition `{name}`", field="transition", expected=known)
    if role not in transition["roles"]:
        allowed = ", ".join(transition["roles"])
        raise _refuse("PW507", f"role `{role}` may not invoke `{name}`", field="actor", expected=allowed, found=role)
    if agreement.parties.get(role) != party:
        raise _refuse("PW508", f"party `{party}` does not hold role `{role}` in agreement `{agreement.id}`",
                      field="actor", found=party)  # fmt: skip
    if expect is not None and expect != agreement.version:
        message = f"{STALE}: agreement `{agreement.id}` is at version {agreement.version}, not {expect}"
        raise _refuse("PW509", message, field="expect_version", expected=str(expect), found=str(agreement.version))
    if bundle.state(agreement.state)["final"]:
        raise _refuse("PW510", f"agreement `{agreement.id}` is already final (`{agreement.state}`)", field="state")
    if agreement.state not in transition["from"]:
        raise _refuse("PW511", f"`{name}` cannot fire from state `{agreement.state}`", field="state",
                      expected=", ".join(transition["from"]), found=agreement.state)  # fmt: skip
    kinds = bundle.kinds
    for key, raw in sorted(params.items()):
        if key not in kinds:
            raise _refuse("PW516", f"the pact has no param `{key}`", field=f"params.{key}")
        try:
            value = _encode(kinds[key], raw, bundle.scale, key)
        except CommandError as exc:
            raise _refuse("PW516", exc.message, field=f"params.{key}", found=raw) from None
        if value != agreement.params[key]:
            raise _refuse("PW516", f"param `{key}` is not the agreement's value", field=f"params.{key}",
                          expected=agreement.params[key], found=value)  # fmt: skip
    return transition


def _approval(transition: Mapping[str, Any], grant: Grant | None = None) -> str | None:
    """The id of the one-use approval this command consumes: the grant's, verified in this transaction.

    None when the transition needs none, or needs one nobody granted (the
    caller parks the command). Only `approvals.grant` passes a grant, after
    checking the approver's ed25519 signature over the preview digest; a
    row found in the `approvals` table is never taken as an approval by
    itself (anyone able to write the store could have inserted it), so the
    table is the record of grants consumed, each written and consumed in the
    transaction of the command it allowed.
    """
    if not transition.get("approval"):
        return None
    return None if grant is None else grant.request_id


def _variables(bundle: Bundle, agreement: Agreement, ledger: Mapping[str, Any], now: int) -> dict[str, str]:
    kinds = bundle.kinds
    out: dict[str, str] = {}
    for var in ledger["vars"]:
        source = var["from"]
        if source["kind"] == "account":
            out[var["name"]] = agreement.accounts[source["account"]]
            continue
        if source["kind"] == "param" and kinds[source["param"]] == "percent":
            out[var["name"]] = f"{agreement.params[source['param']]}%"
            continue
        if source["kind"] == "param":
            amount: Any = int(agreement.params[source["param"]])
        else:
            amount = evaluate(source["expr"], agreement.view(bundle, now))
        if amount is None or amount < 0:
            shown = "undefined" if amount is None else str(amount)
            raise _refuse("PW517", f"transfer amount `{var['name']}` is {shown}", found=shown)
        out[var["name"]] = f"{bundle.asset} {int(amount)}"
    return out


def _postings(bundle: Bundle, agreement: Agreement, transition: Mapping[str, Any], now: int
              ) -> tuple[list[dict[str, str]], dict[str, int], dict[str, str] | None]:  # fmt: skip
    """The postings, the balances after them, and the program's variables (None without a program)."""
    ledger = transition.get("ledger")
    if not ledger:
        return [], dict(agreement.balances), None
    variables = _variables(bundle, agreement, ledger, now)
    external = bundle.index.external
    names = {address: name for name, address in agreement.accounts.items()}
    start = {(agreement.accounts[n], bundle.asset): v for n, v in agreement.balances.items() if n not in external}
    try:
        program = parse_program(bundle.stored.files[ledger["program"]].decode("utf-8"))  # parsed once per text
        postings = run_program(program, variables, start)
    except LedgerError as exc:
        if exc.code == "PW754":
            raise _refuse("PW514", f"insufficient funds in agreement `{agreement.id}`: {exc.message}",
                          expected=exc.expected, found=exc.found) from None  # fmt: skip
        raise _refuse("PW517", f"the ledger program of `{transition['id']}` cannot run: {exc.message}") from None
    balances = dict(agreement.balances)
    out = []
    for posting in postings:  # one after the other, as the ledger takes them
        source, target = names.get(posting.source), names.get(posting.destination)
        if source is None or target is None or posting.asset != bundle.asset:
            raise _refuse("PW517", f"the ledger program of `{transition['id']}` names an account outside the pact")
        balances[source] -= posting.amount
        balances[target] += posting.amount
        if source not in external and balances[source] < 0:
            raise _refuse(
                "PW514", f"`{transition['id']}` would take `{source}` below zero", found=str(balances[source])
            )
        out.append({"source": source, "destination": target, "source_address": posting.source,
                    "destination_address": posting.destination, "amount": str(posting.amount),
                    "asset": posting.asset})  # fmt: skip
    _same_movement(bundle, agreement, transition, variables, out)
    return out, balances, variables


def _same_movement(bundle: Bundle, agreement: Agreement, transition: Mapping[str, Any],
                   variables: Mapping[str, str], out: list[dict[str, str]]) -> None:  # fmt: skip
    """Refuse (PW521) unless the kernel's movement arithmetic gives exactly the program's postings.

    `pactwright.movement` is what the verifier's explorer moves money with;
    computing it here from the transition's own rules, with the amounts the
    program's variables carry, means a commit never sends the ledger a split
    the verifier did not check.
    """
    kinds = bundle.kinds
    expected: list[tuple[str, str, int]] = []
    try:
        for posting in transition["postings"]:
            rule, source = posting["rule"], posting["amount_source"]
            amount = int(source["minor"]) if source["kind"] == "literal" else int(variables[source["var"]].split()[-1])
            values = {name: percent_value(agreement.params[name]) if kinds[name] == "percent"
                      else int(agreement.params[name]) for name in params_of(rule)}  # fmt: skip
            expected.extend(ledger_postings(amount, str(posting["source"]), rule, values))
    except (ValueError, KeyError, PactwrightError) as exc:
        why = f"`{exc.args[0]}` is missing" if isinstance(exc, KeyError) else str(exc)
        raise _refuse("PW521", f"the transfer rules of `{transition['id']}` cannot be computed: {why}") from None
    found = [(p["source"], p["destination"], int(p["amount"])) for p in out]
    if found != expected:
        at = next((i for i, pair in enumerate(zip(found, expected, strict=False)) if pair[0] != pair[1]),
                  min(len(found), len(expected)))  # fmt: skip
        ours, theirs = (_shown(found, at), _shown(expected, at))
        raise _refuse("PW521", f"posting {at} of `{transition['id']}` is {ours} by the ledger program but {theirs} "
                      "by the transfer rules the verifier checked", expected=theirs, found=ours)  # fmt: skip


def _shown(postings: list[tuple[str, str, int]], at: int) -> str:
    if at >= len(postings):
        return "absent"
    source, destination, amount = postings[at]
    return f"`{source} -> {destination} {amount}`"


def submit(
    store: Store,
    agreement_id: str,
    transition: str,
    actor_role: str,
    actor_party: str,
    key: str,
    expect_version: int | None = None,
    params: Mapping[str, str] | None = None,
    dry_run: bool = False,
    clock: Clock | None = None,
) -> SubmitResult:
    """Run one command through every check; commit it (or, with `dry_run`, only compute it).

    A transition that needs an approval nobody has granted yet is parked as
    an approval request (`status == "waiting_for_approval"`, with the preview
    in `approval`); `pactwright.runtime.approvals.grant` commits it.
    """
    now = epoch_seconds(clock or SystemClock())
    command = Command(transition, actor_role, actor_party, key, dict(params or {}), expect_version)
    with store.transaction(exclusive=False) as db:
        return run_in(store, db, agreement_id, command, now, dry_run=dry_run)


@dataclass(frozen=True)
class Command:
    """One command as a caller states it."""

    transition: str
    role: str
    party: str
    key: str
    params: Mapping[str, str]
    expect_version: int | None = None


@dataclass(frozen=True)
class Grant:
    """An approval being granted now, for the parked command it allows (runtime/approvals.py)."""

    request_id: str
    approver_role: str
    approver_party: str
    preview_digest: str
    expires_at: int
    requested_at: int
    # Four eyes (new in 1.1): the (role, party) of every grant this command consumes, the earlier
    # ones first and this one last; empty for a transition that needs one approval.
    approvers: tuple[tuple[str, str], ...] = ()

    def rows(self) -> tuple[tuple[str, str, str], ...]:
        """(approvals row id, role, party) per grant: the first keeps the request's id, the others `ID/K`."""
        grants = self.approvers or ((self.approver_role, self.approver_party),)
        return tuple((self.request_id if k == 0 else f"{self.request_id}/{k + 1}", role, party)
                     for k, (role, party) in enumerate(grants))  # fmt: skip


def run_in(store: Store, db: Backend, agreement_id: str, command: Command, now: int, *, dry_run: bool = False,
           grant: Grant | None = None) -> SubmitResult:  # fmt: skip
    """`submit` inside a transaction already open on `db`: lock, check, commit (or compute, or park)."""
    transition, actor_role, actor_party, key = command.transition, command.role, command.party, command.key
    if not key or len(key) > MAX_KEY or not key.isprintable() or key.strip() != key:
        raise _refuse("PW519", f"an idempotency key is 1-{MAX_KEY} printable characters", field="key")
    given = dict(command.params)
    payload = _payload(transition, actor_role, actor_party, given)
    # Encoded once: the digest and the event's `command` are the same canonical bytes.
    digest = hash_bytes(rows.dumps(payload).encode("utf-8"))
    # After the lock, in one statement: the key's row (if any) and the evidence chain's head. Both
    # are written only under this row lock, so neither changes before this transaction ends.
    # The bundle is loaded (on PostgreSQL in the same round trip) and re-verified whether or not it is used.
    if db.name == "sqlite":  # the transaction's BEGIN IMMEDIATE is the lock: one read for all three
        agreement, found = rows.read_joined(db, agreement_id, _KEY_AND_HEAD, (key, *rows.head_params(agreement_id)),
                                            _KEY_AND_HEAD_COLUMNS)  # fmt: skip
        bundle = rows.load_bundle(store, db, agreement, rows.EXECUTED)
    else:
        agreement = rows.read(db, agreement_id, lock=True)
        bundle, answers = rows.load_bundle_with(
            store, db, agreement, rows.EXECUTED, ((_AFTER_LOCK, (agreement_id, key, *rows.head_params(agreement_id))),)
        )
        found = answers[0][0]
    # Commit time never goes back within an agreement: a clock that regressed commits at the last
    # commit's instant, so stamps, deadlines and the event log stay in order.
    now = max(now, agreement.updated_at)
    if key.startswith(SCHEDULER_KEYS) and actor_role not in rows.clock_roles(bundle):
        raise _refuse("PW519", f"idempotency keys starting with `{SCHEDULER_KEYS}` are reserved for the scheduler "
                      "(the pact's clock role)", field="key", found=key)  # fmt: skip
    head = rows.evidence_head(found[6], found[7])
    if found[0] is not None:
        event = (found[2], found[3], found[4], found[5], found[1])
        if str(found[0]) == digest:
            return SubmitResult.stored(db, agreement_id, event)
        # The same intent may be restated (`64.9` for `64.90`): compare as the agreement holds it.
        payload = _payload(transition, actor_role, actor_party, _stored_form(bundle, given))
        if str(found[0]) == hash_bytes(rows.dumps(payload).encode("utf-8")):
            return SubmitResult.stored(db, agreement_id, event)
        original = rows.loads(found[1], "event").get("command")
        field = (_differs(original, payload) if isinstance(original, Mapping) else "") or "payload"
        raise _refuse("PW515", f"idempotency key `{key}` was used for another payload: `{field}` differs",
                      field=field)  # fmt: skip
    spec = _check(bundle, agreement, transition, actor_role, actor_party, command.expect_version, given)
    stored_form = _stored_form(bundle, given)
    if stored_form != given:  # the key and approvals bind to the params as the agreement holds them
        payload = _payload(transition, actor_role, actor_party, stored_form)
        digest = hash_bytes(rows.dumps(payload).encode("utf-8"))
    if effects.referenced(spec):
        seen = effects.tally(db, agreement_id)
        effects.check_dependencies(spec, seen)
        effects.check_in_flight(spec, seen)
    else:  # depends on no effect: nothing to tally, and no dependency to be abandoned
        seen = _NO_EFFECTS
    view = agreement.view(bundle, now, seen.applied, seen.totals, seen.outcomes)
    if spec.get("guard") is not None and not evaluate(spec["guard"], view):
        parts = false_parts(spec["guard"], view, bundle.scale)
        raise _refuse("PW512", f"the guard of `{transition}` is false at {now}: {'; '.join(parts)}",
                      field="guard")  # fmt: skip
    _within_ceilings(bundle, agreement, spec, now)
    seq = agreement.version + 1
    planned = planned_calls(bundle, agreement, spec, now, seq)
    effects.check_budgets(bundle, spec, planned, seen)
    usages = check_limits(db, bundle.doc, agreement.pact_id, agreement.parties, transition, planned, now,
                          bundle.scale, lock=not dry_run) if planned else []  # fmt: skip
    postings, balances, variables = _postings(bundle, agreement, spec, now)
    approval_id = _approval(spec, grant)
    event_id = f"{agreement_id}/{seq}"
    outbox = [f"{event_id}/0"] if variables is not None else []
    target = str(spec["to"])
    calls = tuple(_call_json(bundle, agreement_id, seq, call) for call in planned)
    result = SubmitResult(agreement_id, event_id, seq, seq, target, transition, now, tuple(postings),
                          tuple(outbox), dry_run=dry_run, effects=calls)  # fmt: skip
    if approval_id is None and spec.get("approval"):
        from pactwright.runtime import approvals  # the approval flow, only for transitions that need it

        parked = approvals.park(db, bundle, agreement, spec, payload, digest, key, planned, postings, now,
                                write=not dry_run)  # fmt: skip
        return replace(result, event_id="", seq=agreement.version, version=agreement.version,
                       state=agreement.state, outbox=(), status="waiting_for_approval",
                       approval=parked.to_json())  # fmt: skip
    if grant is not None:
        approvals_check = _preview_digest(bundle, agreement, spec, payload, planned, postings, grant)
        if approvals_check != grant.preview_digest:
            raise _refuse("PW603", f"approval `{grant.request_id}` was granted for another preview: what "
                          f"`{transition}` would do now differs from what the approver saw",
                          field="approval", expected=grant.preview_digest, found=approvals_check)  # fmt: skip
    if dry_run:
        return result
    after = agreement.evolve(
        state=target,
        version=seq,
        stamps={**agreement.stamps, **dict.fromkeys(spec["stamps"], now)},
        fired={**agreement.fired, transition: agreement.fired.get(transition, 0) + 1},
        balances=balances,
        reached=tuple(sorted({*agreement.reached, target})),
        approved=tuple(sorted({*agreement.approved, transition})) if approval_id else agreement.approved,
        updated_at=now,
    )
    if grant is not None:
        _record_grant(db, agreement, spec, digest, grant, now)
    _commit(db, bundle, agreement, after, result, spec, payload, digest, key, variables, approval_id, head)
    effects.write_calls(db, agreement, seq, planned, now)
    record_limits(db, usages, now)
    if os.environ.get(CRASH_ENV) == "before_commit":  # TEST-ONLY: every row written, the transaction open
        os.kill(os.getpid(), signal.SIGKILL)
    return result


def _preview_digest(bundle: Bundle, agreement: Agreement, spec: Mapping[str, Any], payload: dict[str, Any],
                    planned: tuple[PlannedCall, ...], postings: list[dict[str, str]], grant: Grant) -> str:  # fmt: skip
    from pactwright.runtime import approvals

    preview = approvals.make_preview(bundle, agreement, spec, payload, planned, postings, grant.requested_at,
                                     grant.expires_at)  # fmt: skip
    return hash_bytes(canonical_bytes(preview))


def _record_grant(db: Backend, agreement: Agreement, spec: Mapping[str, Any], digest: str, grant: Grant,
                  now: int) -> None:  # fmt: skip
    """The granted approvals as one-use rows (one per grant), consumed by this command's event in the same
    transaction."""
    for row_id, role, party in grant.rows():
        db.execute(
            "INSERT INTO approvals (id, agreement_id, transition, payload_digest, approver_role, approver_party, "
            "granted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (row_id, agreement.id, spec["id"], digest, role, party, now),
        )


def _call_json(bundle: Bundle, agreement_id: str, seq: int, call: PlannedCall) -> dict[str, Any]:
    """A call as the event and the result record it: what will be sent, not yet whether it happened."""
    return {
        "effect": call.effect,
        "instance": effects.instance_id(agreement_id, seq, call.index),
        "amount": None if call.amount is None else str(call.amount),
        "destination": f"{call.method} {call.url}",
        "idempotency_key": call.idempotency_key,
        "payload_digest": call.payload_digest,
        "phase": "prepared",
    }


def _stored_form(bundle: Bundle, params: Mapping[str, str]) -> dict[str, str]:
    """The command's params as the agreement stores them (money in minor units, percent canonical).

    A value that does not encode is kept as given; `_check` refuses it.
    """
    kinds = bundle.kinds
    out = {}
    for name, raw in params.items():
        try:
            out[name] = _encode(kinds[name], raw, bundle.scale, name) if name in kinds else raw
        except CommandError:
            out[name] = raw
    return out


def _within_ceilings(bundle: Bundle, agreement: Agreement, transition: Mapping[str, Any], now: int) -> None:
    """Refuse (PW522) a command a call of which carries more than its effect's `ceiling`.

    The amount a call carries is the one the policy declares (`amount EXPR`),
    fixed at commit; a ceiling is enforced before anything is written, as the
    verifier's model assumes (such a command is never a successor there).
    """
    calls = transition.get("effects")
    if not calls:  # nothing is called: no ceiling to hold (and no view to build)
        return
    effects = {e["name"]: e for e in bundle.doc.get("effects", [])}
    view = agreement.view(bundle, now)
    for call in calls:
        ceiling = effects.get(call.get("effect"), {}).get("ceiling")
        amount = call.get("amount")
        if ceiling is None or amount is None:
            continue
        carried = evaluate(amount, view)
        if not isinstance(carried, int) or carried > int(ceiling):
            shown = "undefined" if not isinstance(carried, int) else format_money(carried, bundle.scale)
            raise _refuse(
                "PW522",
                f"`{transition['id']}` would call `{call['effect']}` with {shown}, above its ceiling "
                f"{format_money(int(ceiling), bundle.scale)}",
                field="amount",
                found=shown,
            )


def _commit(db: Backend, bundle: Bundle, before: Agreement, after: Agreement, result: SubmitResult,
            spec: Mapping[str, Any], payload: dict[str, Any], digest: str, key: str,
            variables: dict[str, str] | None, approval_id: str | None,
            head: tuple[int, str | None]) -> None:  # fmt: skip
    expected = [
        {k: p[k] for k in ("source_address", "destination_address", "amount", "asset")} for p in result.postings
    ]
    body = {"command": payload, "from": before.state, "to": after.state, "postings": list(result.postings),
            "stamps": list(spec["stamps"]), "manifest_hash": before.manifest_hash, "approval": approval_id}  # fmt: skip
    if result.effects:  # what each call will send; its phase lives in the effects table from here on
        body["effects"] = list(result.effects)
    # The writes read nothing back: on PostgreSQL one statement for all of them.
    db.execute_all(_writes(before, after, result, spec, payload, body, digest, key, variables, expected,
                           approval_id, head))  # fmt: skip


def _writes(before: Agreement, after: Agreement, result: SubmitResult, spec: Mapping[str, Any],
            payload: dict[str, Any], body: dict[str, Any], digest: str, key: str, variables: dict[str, str] | None,
            expected: list[dict[str, str]], approval_id: str | None, head: tuple[int, str | None]
            ) -> list[tuple[str, tuple[Any, ...]]]:  # fmt: skip
    """The command's rows, one statement per table: event (with its key and evidence link), outbox, approvals,
    agreement.

    The event's evidence record is not written out: its bytes are the event row's (`rows.event_record`),
    and the row holds its place in the chain and its hash.
    """
    record = rows.event_record(before.id, result.event_id, body, result.committed_at, list(result.outbox), head)
    out: list[tuple[str, tuple[Any, ...]]] = [(
        "INSERT INTO events (agreement_id, seq, event_id, transition, actor_role, actor_party, committed_at, "
        "payload_digest, payload, idempotency_key, evidence_seq, evidence_prev, evidence_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (before.id, result.seq, result.event_id, result.transition, payload["actor"]["role"],
         payload["actor"]["party"], result.committed_at, digest, _text(body), key, head[0], head[1],
         hash_bytes(canonical_bytes(record))),
    )]  # fmt: skip
    if variables is not None:
        out.append((
            "INSERT INTO outbox (agreement_id, event_seq, group_index, reference, program_path, variables, "
            "expected_postings, status, attempts, created_at, updated_at) "
            "VALUES (?, ?, 0, ?, ?, ?, ?, 'pending', 0, ?, ?)",
            (before.id, result.seq, result.outbox[0], spec["ledger"]["program"], _text(variables),
             _text(expected), result.committed_at, result.committed_at),
        ))  # fmt: skip
    if approval_id is not None:
        out.append((
            "UPDATE approvals SET consumed_event_id = ?, consumed_at = ? WHERE (id = ? OR id LIKE ?) "
            "AND consumed_event_id IS NULL",
            (result.event_id, result.committed_at, approval_id, approval_id + "/%"),
        ))  # fmt: skip
    out.append(rows.update(after))
    return out


def _text(value: Any) -> str:
    """Canonical JSON text of a value no other command has (an event body, variables naming the agreement).

    `rows.dumps` remembers texts by the value's repr, which pays only for
    values that repeat; these never do.
    """
    return canonical_bytes(value).decode("utf-8")
