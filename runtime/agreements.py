"""Agreements: open one on the active version of a pact, and show what it holds.

`open_agreement` binds a pact's ACTIVE activation (its manifest hash is
recorded, and a later activation never changes a running agreement),
validates every ranged or text param against transitions.json (money
exactly at the currency's scale, text against its pattern or options),
binds every role to a party and fills every account address. It writes the
agreement row and its first evidence record in one transaction, or nothing.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pactwright.errors import CommandError, MoneyError, StoreError, UsageError
from pactwright.money import Percent, format_money, parse_money
from pactwright.runtime import _agreement as rows
from pactwright.runtime._agreement import Agreement, Bundle, bundle_of
from pactwright.runtime.clock import Clock, SystemClock, epoch_seconds
from pactwright.runtime.ledger_api import Ledger
from pactwright.runtime.store import Store, StoredBundle
from pactwright.runtime.store._backend import Backend, storable
from pactwright.runtime.store._migrations import LATEST

__all__ = ["AgreementView", "check_open", "invariant_values", "open_agreement", "show"]

ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The most events `show` lists: an agreement's whole history is `evidence`'s job.
MAX_LAST = 10_000
_SEGMENT_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _bad(message: str, name: str, *, expected: str | None = None, found: str | None = None) -> CommandError:
    return CommandError(message, code="PW503", field=f"params.{name}", expected=expected, found=found)


def _param_value(param: Mapping[str, Any], raw: str | None, scale: int) -> str:
    """The param's value in transitions.json's encoding, validated; fixed params keep their value."""
    name, kind = str(param["name"]), str(param["type"])
    if "value" in param:
        fixed = str(param["value"])
        if raw is not None and _encode(kind, raw, scale, name) != fixed:
            raise _bad(f"param `{name}` is fixed by the policy", name, expected=fixed, found=raw)
        return fixed
    if raw is None:
        raise _bad(f"param `{name}` needs a value (`--param {name}=...`)", name)
    value = _encode(kind, raw, scale, name)
    if kind in ("money", "percent"):
        number = Percent.parse(value).value if kind == "percent" else int(value)
        # A side bounded by another param (new in 1.1) is checked against that param's value (`_related`).
        low = None if param.get("min") is None or param.get("min_param") else _number(kind, str(param["min"]))
        high = None if param.get("max") is None or param.get("max_param") else _number(kind, str(param["max"]))
        if (low is not None and number < low) or (high is not None and number > high):
            shown = (
                f"{param.get('min_param') or _show(kind, param.get('min'), scale)} .. "
                f"{param.get('max_param') or _show(kind, param.get('max'), scale)}"
            )
            raise _bad(f"param `{name}` is out of its bounds", name, expected=shown, found=raw)
    if kind == "text":
        options = [str(o) for o in param.get("options", [])]
        pattern = param.get("pattern")
        if options and value not in options:
            raise _bad(f"param `{name}` is not one of its options", name, expected=", ".join(options), found=raw)
        if pattern is not None and re.fullmatch(str(pattern), value) is None:
            raise _bad(f"param `{name}` does not match its pattern", name, expected=str(pattern), found=raw)
    return value


def _related(declared: list[Mapping[str, Any]], values: Mapping[str, str], scale: int) -> None:
    """New in 1.1: each money bound written as another param's name holds (`partial` <= `price`)."""
    for param in declared:
        name = str(param["name"])
        for small, big, side in ((param.get("min_param"), name, "below"), (name, param.get("max_param"), "above")):
            if small is None or big is None or int(values[str(small)]) <= int(values[str(big)]):
                continue
            this, other = (name, str(small)) if side == "below" else (name, str(big))
            shown = {n: format_money(int(values[n]), scale) for n in (this, other)}
            raise _bad(
                f"param `{this}` ({shown[this]}) is {side} param `{other}` ({shown[other]}), which bounds it",
                this,
                expected=f"{this} {'>=' if side == 'below' else '<='} {other}",
                found=f"{this} = {shown[this]}, {other} = {shown[other]}",
            )


def _number(kind: str, text: str) -> Any:
    return Percent.parse(text).value if kind == "percent" else int(text)


def _show(kind: str, text: object, scale: int) -> str:
    if text is None:
        return "-"
    return format_money(int(str(text)), scale) if kind == "money" else f"{text}%"


def _encode(kind: str, raw: str, scale: int, name: str) -> str:
    try:
        if kind == "money":
            return str(parse_money(raw, scale))
        if kind == "percent":
            return Percent.parse(raw).canonical()
    except MoneyError as exc:
        raise _bad(f"param `{name}`: {exc.message}", name, found=raw) from None
    if kind == "duration":
        raise _bad(f"param `{name}` is a duration, which only a policy can fix", name, found=raw)
    if len(raw) > 1024:
        raise _bad(f"param `{name}` is longer than 1024 characters", name)
    if not storable(raw):
        raise _bad(f"param `{name}` holds a NUL or an unpaired surrogate, which no text value may", name)
    return raw


def _fill(bundle: Bundle, agreement_id: str, parties: Mapping[str, str], params: Mapping[str, str]) -> dict[str, str]:
    """Every account's address with its placeholders filled; two accounts may not share one."""
    texts = {p["name"] for p in bundle.doc["params"] if p["type"] == "text"}
    out: dict[str, str] = {}
    for account in bundle.doc["accounts"]:

        def value(match: re.Match[str], account: Mapping[str, Any] = account) -> str:
            name = match.group(1)
            if name == "agreement":
                return agreement_id
            if name in parties:
                return parties[name]
            if name in texts:
                if _SEGMENT_RE.fullmatch(params[name]) is None:
                    raise _bad(f"param `{name}` cannot fill an account address", name, found=params[name])
                return params[name]
            raise CommandError(f"account `{account['name']}` names unknown placeholder `{name}`", code="PW518")

        out[str(account["name"])] = _PLACEHOLDER_RE.sub(value, str(account["address"]))
    seen: dict[str, str] = {}
    for name, address in sorted(out.items()):
        if address in seen:
            raise CommandError(
                f"accounts `{seen[address]}` and `{name}` would both be `{address}` in this agreement",
                code="PW505",
                hint="bind different parties to the roles these addresses name",
            )
        seen[address] = name
    return out


def _parties(bundle: Bundle, parties: Mapping[str, str]) -> dict[str, str]:
    roles = {str(r["name"]): bool(r["clock"]) for r in bundle.doc["roles"]}
    for role in sorted(parties):
        if role not in roles:
            raise CommandError(f"the pact has no role `{role}`", code="PW504", field=f"parties.{role}")
    out = dict(parties)
    for role, clock in sorted(roles.items()):
        if clock and role not in out:
            out[role] = role  # the trusted clock acts as itself
        if role not in out:
            raise CommandError(f"role `{role}` needs a party (`--party {role}=NAME`)", code="PW504")
        if _SEGMENT_RE.fullmatch(out[role]) is None:
            raise CommandError(
                f"party `{out[role][:40]}` of role `{role}` is not a name of letters, digits, `_` and `-`",
                code="PW504",
                field=f"parties.{role}",
            )
    return dict(sorted(out.items()))


def _checked_id(agreement_id: str | None) -> str:
    if agreement_id is None:
        agreement_id = f"ag-{secrets.token_hex(8)}"
    if ID_RE.fullmatch(agreement_id) is None:
        raise CommandError(f"agreement id `{agreement_id[:70]}` must be 1-64 letters, digits, `_` or `-`", code="PW502")
    return agreement_id


def _exists(db: Backend, agreement_id: str) -> None:
    if db.has_table("agreements") and db.query("SELECT 1 FROM agreements WHERE id = ?", (agreement_id,)):
        raise CommandError(f"agreement `{agreement_id}` already exists", code="PW502")


def _build(store: Store, db: Backend, pact_id: str, params: Mapping[str, str], parties: Mapping[str, str],
           agreement_id: str, now: int) -> tuple[Agreement, StoredBundle]:  # fmt: skip
    """The new agreement on the pact's active bundle, every param and party checked; reads only."""
    active = store.active_in(db, pact_id)
    bundle = bundle_of(active)
    declared = {str(p["name"]) for p in bundle.doc["params"]}
    for name in sorted(set(params) - declared):
        raise _bad(f"the pact has no param `{name}`", name)
    values = {str(p["name"]): _param_value(p, params.get(p["name"]), bundle.scale) for p in bundle.doc["params"]}
    _related(bundle.doc["params"], values, bundle.scale)
    bound = _parties(bundle, parties)
    initial = next(s["name"] for s in bundle.doc["states"] if s["initial"])
    agreement = Agreement(
        id=agreement_id,
        pact_id=pact_id,
        manifest_hash=active.manifest_hash,
        activation_id=active.activation.id,
        state=str(initial),
        version=0,
        params=values,
        parties=bound,
        accounts=_fill(bundle, agreement_id, bound, values),
        balances={str(a["name"]): 0 for a in bundle.doc["accounts"]},
        reached=(str(initial),),
        opened_at=now,
        updated_at=now,
    )
    return agreement, active


def check_open(
    store: Store,
    pact_id: str,
    params: Mapping[str, str],
    parties: Mapping[str, str],
    agreement_id: str | None = None,
) -> None:
    """Every check `open_agreement` makes, in one read-only transaction; raises its refusal, writes nothing.

    It reads only the activation tables (and `agreements` where it exists),
    so it runs on a store of any schema version, before a migration: a
    refused `open` leaves a store made by an older release exactly as it
    was, byte for byte, instead of migrated and empty.
    """
    agreement_id = _checked_id(agreement_id)
    if store.schema_version() == 0:
        raise StoreError(f"no version of `{pact_id}` is active (the store is empty)", code="PW702")
    with store.transaction(write=False) as db:
        _exists(db, agreement_id)
        _build(store, db, pact_id, params, parties, agreement_id, 0)


def open_agreement(
    store: Store,
    pact_id: str,
    params: Mapping[str, str],
    parties: Mapping[str, str],
    agreement_id: str | None = None,
    clock: Clock | None = None,
) -> Agreement:
    """Create an agreement on the active version of `pact_id`; refusals (PW50x) write nothing.

    A store whose schema is older than this release's (opened with
    `migrate_schema=False`) is checked first (`check_open`) and migrated only
    once the agreement is known to be valid, so a refusal leaves it untouched.
    """
    now = epoch_seconds(clock or SystemClock())
    agreement_id = _checked_id(agreement_id)
    if store.schema_version() < LATEST:
        check_open(store, pact_id, params, parties, agreement_id)
        store.migrate()
    with store.transaction() as db:
        _exists(db, agreement_id)
        agreement, active = _build(store, db, pact_id, params, parties, agreement_id, now)
        rows.write(db, agreement, insert=True)
        rows.append_evidence(
            db,
            agreement_id,
            "opened",
            {
                "pact": {"id": pact_id, "version": active.pact_version},
                "manifest_hash": active.manifest_hash,
                "activation_id": agreement.activation_id,
                "params": agreement.params,
                "parties": agreement.parties,
                "accounts": agreement.accounts,
                "state": agreement.state,
                "at": now,
            },
        )
    return agreement


@dataclass(frozen=True)
class AgreementView:
    """`show`: the agreement as committed, its pending outbox entries and its last events."""

    agreement: Agreement
    scale: int
    pending_outbox: list[dict[str, Any]]
    last_events: list[dict[str, Any]]
    ledger_balances: dict[str, str] | None = None  # the agreement's accounts as the ledger holds them

    def to_json(self) -> dict[str, Any]:
        a = self.agreement
        return {
            "id": a.id,
            "pact_id": a.pact_id,
            "manifest_hash": a.manifest_hash,
            "state": a.state,
            "version": a.version,
            "params": a.params,
            "parties": a.parties,
            "accounts": a.accounts,
            "stamps": a.stamps,
            "fired": a.fired,
            "balances": {name: str(v) for name, v in sorted(a.balances.items())},
            "pending_outbox": self.pending_outbox,
            "last_events": self.last_events,
            "ledger_balances": self.ledger_balances,
        }


def show(store: Store, agreement_id: str, last: int = 10, ledger: Ledger | None = None) -> AgreementView:
    """The agreement as committed (PW501 if unknown), with its bundle re-verified.

    With `ledger`, also its accounts' balances as the ledger holds them (an
    account shared by agreements, such as a platform's fees, holds all of them).
    `last` is how many of the latest events to list, 0 to MAX_LAST.
    """
    if type(last) is not int or not 0 <= last <= MAX_LAST:
        raise UsageError(f"`last` is a whole number of events from 0 to {MAX_LAST}", field="last", found=str(last))
    with store.transaction(write=False) as db:
        agreement = rows.read(db, agreement_id, lock=False)
        bundle = rows.load_bundle(store, db, agreement)
        outbox = db.query(
            "SELECT reference, program_path, expected_postings, attempts FROM outbox "
            "WHERE agreement_id = ? AND status = 'pending' ORDER BY event_seq, group_index",
            (agreement_id,),
        )
        events = db.query(
            "SELECT seq, event_id, transition, actor_role, actor_party, committed_at FROM events "
            "WHERE agreement_id = ? ORDER BY seq DESC LIMIT ?",
            (agreement_id, last),
        )
    return AgreementView(
        agreement,
        bundle.scale,
        [
            {"reference": r, "program": p, "expected_postings": rows.loads(e, "postings"), "attempts": int(n)}
            for r, p, e, n in outbox
        ],
        [
            {"seq": int(s), "event_id": e, "transition": t, "actor": f"{role}:{party}", "committed_at": int(at)}
            for s, e, t, role, party, at in reversed(events)
        ],
        None if ledger is None else _ledger_balances(agreement, ledger),
    )


def _ledger_balances(agreement: Agreement, ledger: Ledger) -> dict[str, str]:
    held = ledger.balances(sorted(set(agreement.accounts.values())))
    return {name: str(held.get(address, 0)) for name, address in sorted(agreement.accounts.items())}


def invariant_values(store: Store, agreement_id: str) -> dict[str, bool | None]:
    """Each invariant of the agreement's own bundle on the agreement as committed (None: undefined).

    Evaluated by the runtime's own evaluator, at the agreement's last commit
    time, with its effect calls as the command path counts them: the same
    code that judges guards judges the invariants.
    """
    from pactwright.runtime._command_effects import tally
    from pactwright.runtime._evaluate import evaluate
    from pactwright.runtime.store._migrations import EFFECT_TABLES

    with store.transaction(write=False) as db:
        agreement = rows.read(db, agreement_id, lock=False)
        bundle = rows.load_bundle(store, db, agreement)
        seen = tally(db, agreement.id) if store.schema_version() >= EFFECT_TABLES else None
    view = agreement.view(bundle, agreement.updated_at, seen.applied if seen else None, seen.totals if seen else None,
                          seen.outcomes if seen else None)  # fmt: skip
    out: dict[str, bool | None] = {}
    for invariant in bundle.doc.get("invariants", []):
        value = evaluate(invariant["expr"], view)
        out[str(invariant["name"])] = None if value is None else bool(value)
    return out
