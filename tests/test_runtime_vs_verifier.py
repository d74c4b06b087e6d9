"""Differential: the runtime executes the verifier's paths and ends every step where the verifier says.

For each policy in policies/ and each planted bug and fixed twin in
tests/planted/, the verifier's paths (tests/_runtime_paths.py: its
counterexamples, and for every transition one shortest path of its explorer
that fires it) are driven through the real runtime: the bundle is compiled,
verified, approved, signed and activated into a SQLite store (one per
policy), an agreement is opened with the path's params, every command is
submitted as its actor with a test clock moved by each clock delta, and
a command the path approves parks as an approval request and is granted by
the approving role's party, registered with its key, signing the preview
digest (the real approval flow).
After each step: the runtime's state is the verifier's, its balances are
the verifier's `balances_after` (same account names, minor units), the
time-free policy invariants have the verifier's values under the runtime's
own evaluator, and a `refused` step is refused with PW514 (insufficient
funds) or PW517 (negative or undefined amount) and changes no row.

Effect call sites (tests/_effect_paths.py maps each verifier move to the
runtime's action): the calls are sent over real HTTP to provider simulators
by the effect worker, faults are the simulator's, and operators reconcile
and abandon. After each step, every call site's phase is the verifier's (as
the runtime names it), `applied(E)`/`total(E)` as the runtime's evaluator
reads them are those of the calls it knows took effect, and equal the
verifier's, and the providers' own write counts equal the verifier's
`applied` counts, except where a documented difference shows (a lost write
the runtime cannot observe, a compensation under uncertainty, `max_calls`
refused at commit, a command refused while its effect's outcome is unknown):
`KNOWN` pins exactly which paths show which.

What cannot be compared is listed, never skipped silently: transitions no
path fires, paths moving an effect that declares no egress, lost requests
or responses of reads. `EXCLUSIONS` pins that list exactly, so a new gap
fails the test until it is documented here.
"""

from __future__ import annotations

import functools
import tempfile
from contextlib import ExitStack
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import hash_bytes, load_json
from pactwright.errors import CommandError
from pactwright.manifest import MANIFEST_PATH
from pactwright.protocol import FAULTS, PHASE_NAMES
from pactwright.runtime import TestClock, approvals, open_agreement, show, submit
from pactwright.runtime._agreement import bundle_of
from pactwright.runtime._command_effects import tally
from pactwright.runtime._evaluate import evaluate
from pactwright.runtime.activation import FixedClock, Refusal, VerifiedBundle, activate, activate_files
from pactwright.runtime.parties import add_party, key_for
from pactwright.runtime.store import Store, open_store
from pactwright.signing import APPROVAL_PATH, raw_public_key, sign_statement
from pactwright.verifier.model import load_model
from tests import _effect_paths as fx
from tests import _runtime_paths as paths
from tests._effect_paths import LOST_WRITE, UNCERTAIN_COMPENSATION, Sites
from tests.signed_bundles import EXPIRES, NOW, default_trust, key, manifest_of, sign

ROOT = Path(__file__).resolve().parent.parent
POLICIES = sorted((ROOT / "policies").glob("*.pact")) + sorted((ROOT / "tests" / "planted").glob("*.pact"))
PROBE = ROOT / "tests" / "planted" / "compensation_probe.pact"
# compensation_probe's effects declare no egress, so the runtime sends them nowhere; the same probe with
# egress declared is how the compensation paths reach a provider.
PROBE_EGRESS = "compensation_probe+egress.pact"
NAMES = [p.name for p in POLICIES] + [PROBE_EGRESS]
T0 = 1780315200  # 2026-06-01T12:00:00Z
REFUSED = {"PW514", "PW517"}  # insufficient funds; a negative or undefined amount
NEVER = "the verifier never commits it: the runtime refuses it wherever it is enabled"
NO_EGRESS = ("moves an effect that declares no egress: the runtime sends it nowhere (the adapter refuses it "
             "before connecting, PW620, a definite failure) where the verifier's model dispatches it")  # fmt: skip
READ_FAULT = ("needs a lost request or response of a read (`egress GET`): the provider simulator answers reads "
              "without spending queued faults, so it cannot be injected")  # fmt: skip

# Differences the runtime shows by design, documented in docs/effects.md. A path that shows one is compared
# step by step up to where it shows; `KNOWN` pins which paths show which, exactly.
DEPENDS = ("the runtime refuses a command that depends on an effect whose outcome is unknown (PW526 abandoned, "
           "PW527 parked); the verifier's model lets it commit")  # fmt: skip
# Budgets (PW523-PW525) and one call in flight per call site (PW530) are refusals at commit in both: a
# verifier path never meets one in the runtime.
COMMIT_DIFFERENCES = {"PW526": DEPENDS, "PW527": DEPENDS}

FAULTED = (("dispatch", "prepared, not happened"), *((f"fault {f}", "prepared, not happened") for f in FAULTS),
           ("runtime", "uncertain, happened"), ("runtime", "uncertain, not happened"))  # fmt: skip
LOST_READ = (("dispatch", "prepared, happened"), ("fault lost_request", "prepared, not happened"),
             ("fault lost_response", "prepared, not happened"), ("runtime", "uncertain, happened"),
             ("runtime", "uncertain, not happened"))  # fmt: skip


def _covers(effect: str, transition: str, moves: tuple[tuple[str, str], ...]) -> list[str]:
    """The origins of the covering paths ending with each (move, phase and `happened` before it) on a call site."""
    return [f"covers `{move}` on `{effect}` of `{transition}` ({where})" for move, where in moves]


# Every path or transition the differential cannot run, with its reason: (policy file, what) -> why.
EXCLUSIONS: dict[tuple[str, str], str] = {
    # Never committed: the runtime refuses them wherever they are enabled; their refusal is compared instead.
    ("unsafe_chargeback.pact", "transition chargeback"): NEVER,
    ("courier_paid_refund.bug.pact", "transition refund_lost_parcel"): NEVER,
    ("promo_exact_amount.bug.pact", "transition release_promo"): NEVER,
    ("refund_from_wrong_account.bug.pact", "transition refund"): NEVER,
    **{(name, what): why for name, what, why in (
        *(("compensation_probe.pact", origin, NO_EGRESS) for origin in ("counterexample 1 (booked_parcels_are_paid)",
          *_covers("capture_payment", "ship", (*FAULTED, ("compensate", "compensation_required, happened"),
                                                ("compensate", "compensation_required, not happened"))),
          *_covers("book_courier", "ship", (*FAULTED, ("cancel", "prepared, not happened"))))),
        # A lost request or response of a `GET` cannot be injected (a provider error can: a refused connection).
        *(("refund_with_fee.pact", o, READ_FAULT) for o in _covers("lookup_order", "review", LOST_READ)),
        *(("support_refund.pact", o, READ_FAULT) for o in _covers("read_order", "assess", LOST_READ)),
    )},
}  # fmt: skip

# Paths that show a documented difference: (policy, path) -> the differences. A lost response shows on
# the paths through it: (move, the phase and `happened` before it) per strategy.
RETRIED = (("dispatch", "prepared, happened"), ("fault lost_response", "prepared, not happened"),
           ("runtime", "uncertain, happened"))  # fmt: skip
GIVEN_UP = RETRIED[1:]
RECONCILED = (*GIVEN_UP, ("abandon", "needs_reconciliation, happened"), ("reconcile", "needs_reconciliation, happened"))
Known = dict[tuple[str, str], frozenset[str]]


def _lost(policy: str, effect: str, transition: str, moves: tuple[tuple[str, str], ...]) -> Known:
    """The paths through a lost response on one call site; a path with a reconcile runs again by an operator."""
    origins = _covers(effect, transition, moves)
    origins += [f"{o} by an operator" for o in origins if o.startswith("covers `reconcile`")]
    return {(policy, origin): frozenset({LOST_WRITE}) for origin in origins}


def _pair(name: str, effect: str, transition: str, moves: tuple[tuple[str, str], ...]) -> Known:
    return _lost(f"{name}.bug.pact", effect, transition, moves) | _lost(f"{name}.fixed.pact", effect, transition, moves)


KNOWN: Known = {
    **_lost("refund_with_fee.pact", "send_payout", "pay", RETRIED),
    **_lost("support_refund.pact", "refund_payment", "issue", RECONCILED),
    **_lost("four_eyes_refund.pact", "refund_payment", "issue", RECONCILED),  # four eyes (new in 1.1)
    **_pair("single_approver_four_eyes", "refund_payment", "issue", RECONCILED),
    **_lost("escrow_liveness.pact", "refund_payment", "refund", RETRIED),
    **_lost("refund_parked_forever.bug.pact", "refund_payment", "refund", RECONCILED),
    **_lost("refund_parked_forever.fixed.pact", "refund_payment", "refund", RETRIED),
    **_lost("refund_outcomes.pact", "refund_payment", "refund", RECONCILED),
    **_lost("desk_limit.pact", "refund_payment", "refund", RETRIED),  # limits (new in 1.1)
    **_pair("desk_limit_crossed", "refund_payment", "refund", RETRIED),
    **_pair("confirm_before_acknowledged", "refund_payment", "refund", RECONCILED),
    **_pair("approval_less_payout", "send_payout", "pay", RETRIED),
    **_pair("approval_on_wrong_transition", "send_claim_payment", "pay", RECONCILED),
    **_pair("goodwill_over_ceiling", "credit_card", "make_good", RETRIED),
    **_lost("once_loses_instalment.bug.pact", "pay_supplier", "pay_instalment", GIVEN_UP),
    **_lost("once_loses_instalment.fixed.pact", "pay_supplier", "pay_instalment", RETRIED),
    **_pair("payout_above_ceiling", "psp_payout", "release", RETRIED),
    **_pair("payout_retry_without_key", "psp_payout", "release", RETRIED),
    **_pair("retry_non_idempotent", "send_payout", "pay", RETRIED),
    **_pair("second_call_site", "issue_voucher", "make_good", RETRIED),
    **_pair("second_call_site", "issue_voucher", "goodwill", RETRIED),
    **_lost(PROBE_EGRESS, "book_courier", "ship", GIVEN_UP),
    # A `retry` after a lost response: the provider wrote twice, as the verifier counts; the runtime counts one call.
    ("payout_retry_without_key.bug.pact", "counterexample 1 (effect_applied_once, paid_out_once)"):
        frozenset({LOST_WRITE}),
    ("retry_non_idempotent.bug.pact", "counterexample 1 (effect_applied_once, effect_max_calls, payout_at_most_once)"):
        frozenset({LOST_WRITE}),
    # The booking's answer is lost: `once` abandons it, so the runtime never counts it.
    (PROBE_EGRESS, "counterexample 1 (booked_parcels_are_paid)"): frozenset({LOST_WRITE}),
    (PROBE_EGRESS, "covers `fault lost_request` on `capture_payment` of `ship` (prepared, not happened)"):
        frozenset({UNCERTAIN_COMPENSATION}),
    (PROBE_EGRESS, "covers `runtime` on `capture_payment` of `ship` (uncertain, not happened)"):
        frozenset({UNCERTAIN_COMPENSATION}),
    (PROBE_EGRESS, "covers `compensate` on `capture_payment` of `ship` (compensation_required, not happened)"):
        frozenset({UNCERTAIN_COMPENSATION}),
}  # fmt: skip


def _source(name: str) -> bytes:
    if name != PROBE_EGRESS:
        return next(p for p in POLICIES if p.name == name).read_bytes()
    text = PROBE.read_bytes()
    for scope, url in ((b"payments:capture", b"https://payments.example.com/captures"),
                       (b"payments:void", b"https://payments.example.com/voids"),
                       (b"courier:book", b"https://courier.example.com/bookings")):  # fmt: skip
        text = text.replace(b'scopes "' + scope + b'"\n', b'scopes "' + scope + b'"\n  egress POST "' + url + b'"\n')
    return text


@functools.cache
def _compiled(name: str) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The policy's bundle as `pactwright build` makes it (report included), and its report."""
    from pactwright.compiler.bundle import compile_candidate, with_manifest
    from pactwright.compiler.pipeline import check_bytes
    from pactwright.verifier.explorer import Bounds
    from pactwright.verifier.render import report_files
    from pactwright.verifier.verify import VerifyOptions, verify_files

    result = check_bytes(_source(name))
    assert result.candidate is not None, result.diagnostics
    files = compile_candidate(result.candidate, result.source_map, name)
    report = verify_files(files, VerifyOptions(bounds=Bounds(), mutants=False, proofs=False))
    rendered = report_files(report)
    files = {p: d for p, d in files.items() if p != MANIFEST_PATH} | rendered
    ref = {"path": "report.json", "hash": hash_bytes(rendered["report.json"]), "verdict": report["verdict"]}
    bundle = with_manifest(files, result.candidate, result.candidate.hash(), report=ref)
    return dict(bundle), report


def _activate(store: Store, files: dict[str, bytes], verdict: str) -> None:
    """Activate the signed bundle; a bundle the verifier did not pass is refused, then recorded directly.

    The runtime refuses to activate a failing (PW459) or incomplete (PW462)
    report, as it must; the differential still needs the runtime to run the
    exact policy the verifier convicted, so after asserting that refusal the
    bundle is recorded with `activate`, which skips only the report check.
    """
    clock = FixedClock(datetime.fromisoformat(NOW))
    if verdict == "pass":
        activate_files(store, files, default_trust(), clock=clock)
        return
    with pytest.raises(Refusal) as refused:
        activate_files(store, files, default_trust(), clock=clock)
    assert refused.value.code in ("PW459", "PW462"), refused.value
    manifest = manifest_of(files)
    approval = load_json(files[APPROVAL_PATH])
    activate(store, VerifiedBundle(
        pact_id=manifest["pact"]["id"], pact_version=manifest["pact"]["version"],
        manifest_hash=hash_bytes(files[MANIFEST_PATH]), candidate_hash=manifest["candidate_hash"], files=files,
        approval_hash=hash_bytes(files[APPROVAL_PATH]), approver=approval["statement"]["approver"],
        approver_keyid=key("alice").keyid, signer_keyids=(key("signer").keyid,), expires=EXPIRES,
        report_verdict=verdict, verified_at=clock.now(),
    ))  # fmt: skip


class Driver:
    """Runs one verifier path on one new agreement and collects every disagreement, step by step."""

    def __init__(self, store: Store, table: dict[str, Any], pact_id: str, policy: str,
                 bench: fx.EffectBench | None = None, model: Any = None) -> None:  # fmt: skip
        self.store, self.table, self.pact_id, self.policy = store, table, pact_id, policy
        self.parties = {r["name"]: f"{r['name']}-party" for r in table["roles"] if not r["clock"]}
        self.invariants = {i["name"]: i["expr"] for i in table["invariants"]}
        self.transitions = {t["id"]: t for t in table["transitions"]}
        self.disagreements: list[str] = []
        self.explained: dict[str, set[str]] = {}  # path origin -> the documented differences it shows
        self.compared = 0
        self.effect_steps = 0
        self.bench, self.model = bench, model
        self.sites: Any = None

    def _say(self, path: paths.VerifierPath, number: int, what: str, verifier: object, runtime: object) -> None:
        self.disagreements.append(f"{self.policy} {path.origin} step {number} {what}: "
                                  f"verifier says {verifier!r}, runtime says {runtime!r}")  # fmt: skip

    def _explain(self, path: paths.VerifierPath, why: str) -> None:
        self.explained.setdefault(path.origin, set()).add(why)

    def run(self, path: paths.VerifierPath, agreement_id: str, *, operator: bool = False) -> None:
        params = {p["name"]: path.params[p["name"]] for p in self.table["params"] if "value" not in p}
        clock = TestClock(T0)
        open_agreement(self.store, self.pact_id, params, self.parties, agreement_id=agreement_id, clock=clock)
        if self.bench is not None:
            self.bench.reset()
            self.sites = Sites(self.model)
        for number, step in enumerate(path.steps, start=1):
            if not self._step(path, number, step, agreement_id, clock, operator):
                return  # the rest of the path starts from a state the verifier did not describe
            self._compare(path, number, step, agreement_id, clock)
        if path.violated:
            self._violated_at_end(path, agreement_id, clock)

    def _role_party(self, step: paths.Step) -> tuple[str, str]:
        role = str(step.actor)
        return role, self.parties.get(role, role)  # a clock role acts as itself

    def _step(self, path: paths.VerifierPath, number: int, step: paths.Step, aid: str, clock: TestClock,
              operator: bool = False) -> bool:  # fmt: skip
        if step.kind == "clock":
            clock.advance(step.delta)
            return True
        if step.kind in fx.EFFECT_MOVES:
            return self._effect(path, number, step, aid, operator)
        transition = str(step.transition)
        if step.kind == "approve":
            return self._approve(path, number, transition, aid, clock)
        role, party = self._role_party(step)
        if step.kind == "refused":
            before = self.store.dump()
            try:
                submit(self.store, aid, transition, role, party, f"step-{number}", clock=clock)
            except CommandError as exc:
                if exc.code not in REFUSED:
                    self._say(path, number, f"refusal of `{transition}`", "PW514 or PW517", f"{exc.code}: {exc}")
            else:
                self._say(path, number, f"`{transition}`", "refused at commit", "committed")
                return False
            if self.store.dump() != before:
                self._say(path, number, f"refused `{transition}`", "nothing changes", "rows changed")
            return True
        try:
            self._submit(aid, transition, role, party, number, clock)
        except CommandError as exc:
            if exc.code in COMMIT_DIFFERENCES:
                self._explain(path, COMMIT_DIFFERENCES[exc.code])
            else:
                self._say(path, number, f"`{transition}` as {role}", "commits", f"{exc.code}: {exc}")
            return False
        if self.sites is not None:
            self.sites.committed(transition, step)
        return True

    def _effect(self, path: paths.VerifierPath, number: int, step: paths.Step, aid: str, operator: bool) -> bool:
        """The runtime's action for the verifier's move on a call site (tests/_effect_paths.py's table)."""
        assert self.bench is not None and step.effects is not None and step.effects.move.site is not None
        move, index = step.effects.move, step.effects.move.site
        site = self.model.sites[index]
        transition = self.model.transitions[site.transition]["id"]
        position = [s.index for s in self.model.sites if s.transition == site.transition].index(index)
        taken = self.bench.act(aid, move, site, transition, position, step.effects.before[index], operator)
        self.effect_steps += 1
        expected = {"dispatch": "acknowledged", "fault": "failed" if move.fault == "provider_error" else "uncertain",
                    "compensate": "acknowledged", "cancel": None}.get(move.kind)  # fmt: skip
        if move.kind == "reconcile" and not operator:
            expected = "applied" if step.effects.before[index].happened else "not_applied"
        if move.kind in ("dispatch", "fault", "compensate", "cancel", "reconcile") and not operator:
            got = taken.steps[-1].outcome
            if got != expected:
                self._say(path, number, f"outcome of `{move.kind}` on `{site.effect}`", expected,
                          f"{got} ({taken.steps[-1].detail})")  # fmt: skip
                return False
        self.sites.moved(step.effects)
        return True

    def _approvers(self, transition: str) -> list[tuple[str, str]]:
        """(role, party) of each approval `transition` requires: the agreement's party per listed role, or for
        `approvals N by ROLE` (four eyes, new in 1.1) N parties holding ROLE in the registry."""
        spec = self.transitions[transition]["approval"]
        role = spec["role"]
        if spec.get("count") is not None:
            first = self.parties[role]
            return [(role, first), *((role, f"{first}{k}") for k in range(2, int(spec["count"]) + 1))]
        return [(r, self.parties[r]) for r in (role, *(spec.get("also") or ()))]

    def _approve(self, path: paths.VerifierPath, number: int, transition: str, aid: str, clock: TestClock) -> bool:
        """The verifier's approval token: the approving roles' parties, registered with their keys, will grant the
        path's next command of `transition` when it parks (the runtime has nothing to record before that)."""
        spec = self.transitions[transition]["approval"]
        command = next(s for s in path.steps[number:] if s.kind == "command" and s.transition == transition)
        _, party = self._role_party(command)
        for role, approver in self._approvers(transition):
            if spec.get("not_requester") and approver == party:
                self._say(path, number, f"approval of `{transition}`", "granted", "the requester cannot approve")
                return False
            with self.store.transaction(write=False) as db:
                known = key_for(db, approver, role)
            if known is None:
                add_party(self.store, approver, role, raw_public_key(key(approver).private.public_key()), T0)
        return True

    def _submit(self, aid: str, transition: str, role: str, party: str, number: int, clock: TestClock) -> None:
        """Submit a command; one that needs approvals parks, and each approver grants it with a signature."""
        result = submit(self.store, aid, transition, role, party, f"step-{number}", clock=clock)
        if result.status != "waiting_for_approval":
            return
        request = result.approval
        statement = approvals.decision_statement(request["id"], request["preview_digest"], "grant")
        for _, approver in self._approvers(transition):
            granted = approvals.grant(self.store, request["id"], approver, sign_statement(key(approver).private,
                                      statement), clock)  # fmt: skip
            if granted.status == "committed":
                break

    def _compare(self, path: paths.VerifierPath, number: int, step: paths.Step, aid: str, clock: TestClock) -> None:
        agreement = show(self.store, aid).agreement
        self.compared += 1
        if agreement.state != step.state_after:
            self._say(path, number, "state", step.state_after, agreement.state)
        balances = {name: value for name, value in agreement.balances.items() if value != 0}
        if balances != step.balances_after:
            self._say(path, number, "balances", step.balances_after, balances)
        unknown = set(step.balances_after) - set(agreement.balances)
        if unknown:
            self._say(path, number, "account names", sorted(step.balances_after), sorted(agreement.balances))
        differing: dict[str, set[str]] = {}
        if step.effects is not None and self.bench is not None:
            differing = self._compare_effects(path, number, step.effects, aid)
        if step.invariants_after:
            values = self._invariants(aid, clock)
            for name, holds in sorted(step.invariants_after.items()):
                if values[name] != holds:
                    self._invariant_differs(path, number, name, holds, values[name], differing)

    def _invariant_differs(self, path: paths.VerifierPath, number: int, name: str, verifier: bool, runtime: bool,
                           differing: dict[str, set[str]]) -> None:  # fmt: skip
        """An invariant over an effect whose counts differ for a documented reason differs for that reason."""
        reasons = {why for effect in fx.effect_names(self.invariants[name]) for why in differing.get(effect, ())}
        if not reasons:
            self._say(path, number, f"invariant `{name}`", verifier, runtime)
        for why in reasons:
            self._explain(path, why)

    def _compare_effects(self, path: paths.VerifierPath, number: int, facts: fx.EffectFacts,
                         aid: str) -> dict[str, set[str]]:  # fmt: skip
        """Phases, applied()/total() and the providers' writes; returns effect -> why its counts differ."""
        assert self.bench is not None and self.sites is not None
        for site in self.model.sites:
            transition = self.model.transitions[site.transition]["id"]
            position = [s.index for s in self.model.sites if s.transition == site.transition].index(site.index)
            want = self.sites.phase(site.index, facts.after[site.index])
            row = self.bench.row(aid, transition, position)
            got = "idle" if row is None else row[1]
            if got != want:
                self._say(path, number, f"phase of `{site.effect}` in `{transition}`",
                          f"{PHASE_NAMES[facts.after[site.index].phase]} (the runtime's `{want}`)", got)  # fmt: skip
        applied, totals = self.bench.tally(aid)
        known, known_totals = self.sites.known(facts)
        for name in sorted(set(known) | set(applied)):
            if (applied.get(name, 0), totals.get(name, 0)) != (known.get(name, 0), known_totals.get(name, 0)):
                self._say(path, number, f"runtime applied/total(`{name}`) of the calls it knows took effect",
                          (known.get(name, 0), known_totals.get(name, 0)),
                          (applied.get(name, 0), totals.get(name, 0)))  # fmt: skip
        differing: dict[str, set[str]] = {}
        written = self.bench.provider(aid)
        for name in sorted(facts.applied):
            verifier = (facts.applied[name], facts.totals.get(name, 0))
            runtime = (applied.get(name, 0), totals.get(name, 0))
            if verifier != runtime:
                differing[name] = self.sites.why(name)
                if not differing[name]:
                    self._say(path, number, f"applied/total(`{name}`)", verifier, runtime)
            if not self.bench.effects[name]["egress"]:
                continue
            if written.get(name, 0) != facts.applied[name]:
                reasons = self.sites.why(name) & {UNCERTAIN_COMPENSATION}
                if not reasons:
                    self._say(path, number, f"provider's writes of `{name}` (the verifier's applied)",
                              facts.applied[name], written.get(name, 0))  # fmt: skip
                for why in reasons:
                    self._explain(path, why)
        for reasons in differing.values():
            for why in reasons:
                self._explain(path, why)
        return differing

    def _invariants(self, aid: str, clock: TestClock) -> dict[str, bool]:
        """Each policy invariant under the runtime's own evaluator, at the clock's now, with its effect tally."""
        agreement = show(self.store, aid).agreement
        with self.store.transaction(write=False) as db:
            seen = tally(db, aid)
        bundle = bundle_of(self.store.load_activation(agreement.activation_id))
        view = agreement.view(bundle, clock.seconds, seen.applied, seen.totals, seen.outcomes)
        return {name: bool(evaluate(expr, view)) for name, expr in self.invariants.items()}

    def _violated_at_end(self, path: paths.VerifierPath, aid: str, clock: TestClock) -> None:
        """A counterexample's policy invariants are false after its last step, under the runtime's evaluator."""
        values = self._invariants(aid, clock)
        last = path.steps[-1].effects
        differing = {} if last is None or self.sites is None else {n: self.sites.why(n) for n in last.applied}
        for name in path.violated:
            if values.get(name):
                self._invariant_differs(path, len(path.steps), name, False, True, differing)


def _blocked(path: paths.VerifierPath, model: Any, effects: dict[str, Any]) -> str | None:
    """Why the runtime cannot take this path's effect moves (None: it can)."""
    for step in path.steps:
        if step.effects is None or step.effects.move.site is None or step.kind not in fx.EFFECT_MOVES:
            continue
        site = model.sites[step.effects.move.site]
        names = [site.effect] + ([site.compensation] if step.kind == "compensate" and site.compensation else [])
        if any(not effects[n]["egress"] for n in names):
            return NO_EGRESS
        reads = all(e["method"] == "GET" for e in effects[site.effect]["egress"])
        if reads and step.kind == "fault" and step.effects.move.fault != "provider_error":
            return READ_FAULT
    return None


@pytest.mark.parametrize("policy", NAMES)
def test_the_runtime_follows_the_verifiers_paths(policy: str, tmp_path: Path) -> None:
    files, report = _compiled(policy)
    model = load_model(load_json(files["model.json"]))
    table = load_json(files["transitions.json"])
    effects = {str(e["name"]): e for e in table.get("effects", [])}
    runnable, skipped = paths.counterexample_paths(report, files)
    coverage = paths.covering_paths(files, report)
    candidates = runnable + coverage.paths
    excluded = dict(skipped) | {f"transition {t}": why for t, why in coverage.uncovered.items()}
    all_paths = []
    for path in candidates:
        why = _blocked(path, model, effects)
        if why is None:
            all_paths.append(path)
        else:
            excluded[path.origin] = why
    documented = {what: why for (name, what), why in EXCLUSIONS.items() if name == policy}
    for what, why in sorted(excluded.items()):
        print(f"{policy}: not compared: {what}: {why}")
    assert set(excluded) == set(documented), f"undocumented or stale exclusions: {excluded} vs {documented}"
    for what, why in excluded.items():
        assert documented[what] in (why, NEVER), f"{what}: {why}"
    for what, why in documented.items():
        if why == NEVER:  # its refusal must then be one of the compared steps
            name = what.removeprefix("transition ")
            assert any(s.kind == "refused" and s.transition == name for p in runnable for s in p.steps), what
    signed = sign(files)
    with open_store(str(tmp_path / "store.db")) as store, ExitStack() as stack:
        _activate(store, signed, report["verdict"])
        bench = fx.EffectBench(store, table, tmp_path, stack) if model.sites else None
        driver = Driver(store, table, manifest_of(files)["pact"]["id"], policy, bench, model)
        for number, path in enumerate(all_paths):
            driver.run(path, f"p{number}")
            if any(s.kind == "reconcile" for s in path.steps):  # once more, an operator reconciling
                driver.run(replace(path, origin=f"{path.origin} by an operator"), f"p{number}o", operator=True)
    moving = [p for p in all_paths if any(s.kind in fx.EFFECT_MOVES for s in p.steps)]
    print(f"{policy}: {len(runnable)} counterexamples and {len(coverage.paths)} covering paths "
          f"({len(moving)} with effect moves), {driver.compared} steps compared ({driver.effect_steps} effect "
          f"moves), {len(driver.disagreements)} disagreements")  # fmt: skip
    known = {what: why for (name, what), why in KNOWN.items() if name == policy}
    for origin, why in sorted(driver.explained.items()):
        print(f"{policy}: {origin}: documented differences: {sorted(why)}")
    assert all_paths, "nothing to compare"
    assert not driver.disagreements, "\n".join(driver.disagreements)
    assert {o: frozenset(w) for o, w in driver.explained.items()} == known, "undocumented or stale differences"


def test_every_documented_exclusion_names_a_policy_that_exists() -> None:
    assert {name for name, _ in EXCLUSIONS} | {name for name, _ in KNOWN} <= set(NAMES)


def test_a_command_whose_effect_amount_is_above_its_ceiling_does_not_commit() -> None:
    """The verifier's model: a command whose effect carries more than the effect's `ceiling` never commits
    ("the runtime refuses the command before policy", verifier/explorer.py). The runtime must agree.

    Fails today: the command path does not check ceilings, so `release` at price 150.00 commits and moves
    150.00 to `sent` through a provider whose ceiling is 100.00.
    """
    from pactwright.verifier.explorer import Bounds, Explorer
    from pactwright.verifier.model import load_model

    policy = ROOT / "tests" / "planted" / "payout_above_ceiling.fixed.pact"
    files, report = _compiled(policy.name)
    explorer = Explorer(load_model(load_json(files["model.json"])), Bounds(), pinned={"price": 15000})
    explorer.symmetry = False
    funded = next(s for m, s, _ in explorer.successors(explorer.initial_states()[0]) if m.name == "fund")
    assert "release" not in {m.name for m, _, _ in explorer.successors(funded) if m.kind == "command"}
    table = load_json(files["transitions.json"])
    with tempfile.TemporaryDirectory() as directory, open_store(str(Path(directory) / "store.db")) as store:
        _activate(store, sign(files), report["verdict"])
        driver = Driver(store, table, manifest_of(files)["pact"]["id"], policy.name)
        clock = TestClock(T0)
        open_agreement(store, driver.pact_id, {"price": "150.00", "order_id": "ORD-0"}, driver.parties,
                       agreement_id="c", clock=clock)  # fmt: skip
        submit(store, "c", "fund", "buyer", driver.parties["buyer"], "fund", clock=clock)
        before = store.dump()
        with pytest.raises(CommandError):
            submit(store, "c", "release", "ops", driver.parties["ops"], "release", clock=clock)
        assert store.dump() == before
