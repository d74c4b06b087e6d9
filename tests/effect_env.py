"""Support refund variants, activated into real stores, for the effect lifecycle tests.

Each variant is policies/support_refund.pact with `refund_payment`'s
strategy replaced (and, for `compensate`, a void effect and a second call
that can fail). Bundles are compiled and verified in-process, as `pactwright
build` does (mutants and proofs off), once per variant per test run.

`retry` is the deliberate mistake: the verifier refuses it (a lost response
refunds twice, `effect_applied_once`), so activation would refuse it too
(PW459). `install(..., past_activation=True)` writes such a bundle into the
store with its failing report, exactly as signed, to show the runtime does
what the verifier predicted; nothing else does this.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from pactwright.canonical import hash_bytes
from pactwright.manifest import MANIFEST_PATH
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.activation import FixedClock, activate, activate_files
from pactwright.runtime.store import Store, open_store
from tests.signed_bundles import NOW, compile_verified, default_trust, sign, temporary_store

ROOT = Path(__file__).resolve().parent.parent
SUPPORT = ROOT / "policies" / "support_refund.pact"
PACT_ID = "support.refund"
T0 = 1780315200  # 2026-06-01T12:00:00Z
PARAMS = {"amount": "64.90", "order_id": "ORD-1001", "reason": "damaged_on_arrival"}
PARTIES = {"support_agent": "sam", "refund_approver": "rita", "assistant": "bot"}
REFUND_URL = "https://api.payments.example.com"
ORDERS_URL = "https://orders.internal.example.com"
NOTIFY_URL = "https://notify.example.com"
VOID_URL = "https://api.payments.example.com/voids"

_COMPENSATE = (
    b'effect void_payment {\n  risk R4\n  reversibility irreversible\n  scopes "payments:refund"\n'
    b'  egress POST "https://api.payments.example.com/voids"\n  max_calls 1\n  timeout 15s\n'
    b"  strategy idempotent\n  key order_id, amount\n}\n\n"
    b'effect notify_customer {\n  risk R2\n  reversibility not_applicable\n  scopes "notify:send"\n'
    b'  egress POST "https://notify.example.com"\n  max_calls 1\n  timeout 5s\n  strategy once\n}\n\n'
)


def repeatable(text: bytes, max_calls: int) -> bytes:
    """`issue` may fire twice (assessed -> assessed while `fired(issue) < 2`), then `close` ends it."""
    text = text.replace(b"transition issue: assessed -> refunded", b"transition issue: assessed -> assessed")
    text = text.replace(
        b"  approval by refund_approver not requester\n",
        b"  when fired(issue) < 2\n  approval by refund_approver not requester\n",
    )
    text = text.replace(
        b'clause "3" transition decline',
        b'clause "2.1" transition close: assessed -> refunded {\n  by support_agent\n}\n\n'
        b'clause "3" transition decline',
    )
    text = text.replace(b"  max_calls 1\n", f"  max_calls {max_calls}\n".encode())
    return re.sub(rb'clause "4\.[12]" invariant[^\n]*\n', b"", text)


def source(strategy: str) -> bytes:
    """support_refund with `refund_payment`'s strategy set to `strategy`.

    `repeatable`: reconcilable, and `issue` may refund twice (max_calls 3);
    `twice`: the same with max_calls 1, whose second refund the verifier's
    model and the runtime both refuse at commit (PW523); `tight`: repeatable with `max_tool_calls 2`.
    """
    text = SUPPORT.read_bytes()
    if strategy in ("repeatable", "twice", "tight"):
        text = repeatable(text, 1 if strategy == "twice" else 3)
        if strategy == "tight":  # `tight`: the repeatable policy with a budget of two effect calls
            text = text.replace(b"  max_tool_calls 6\n", b"  max_tool_calls 2\n")
    elif strategy == "compensate":
        text = text.replace(b"  strategy reconcilable", b"  strategy compensate with void_payment")
        text = text.replace(b"rule R4 require_approval", b"rule R4 require_approval")
        text = text.replace(b"state requested initial", _COMPENSATE + b"state requested initial")
        text = text.replace(b"  call refund_payment\n", b"  call refund_payment\n  call notify_customer\n")
    elif strategy == "retry":  # the mistake, made compilable: a reversible refund may say `retry`
        text = text.replace(b"  strategy reconcilable", b"  strategy retry")
        text = text.replace(b"  reversibility irreversible\n  scopes \"payments:refund\"",
                            b"  reversibility reversible\n  scopes \"payments:refund\"")  # fmt: skip
    else:
        text = text.replace(b"  strategy reconcilable", f"  strategy {strategy}".encode())
    # A short provider timeout, so the simulator's `slow` answer (1.5 s) outlasts it.
    text = text.replace(b"  timeout 15s\n", b"  timeout 1s\n")
    return re.sub(rb'version "[^"]+"', f'version "2.1.0-{strategy}"'.encode(), text, count=1)


@cache
def built(strategy: str) -> tuple[tuple[tuple[str, bytes], ...], str]:
    """The compiled, verified bundle of the variant and its verdict."""
    bundle, verdict = compile_verified(source(strategy), SUPPORT.name)
    return tuple(sorted(bundle.items())), verdict


def report(strategy: str) -> dict[str, Any]:
    from pactwright.canonical import load_json

    files = dict(built(strategy)[0])
    doc: dict[str, Any] = load_json(files["report.json"])
    return doc


def install(url: str, strategy: str, *, past_activation: bool = False) -> None:
    """Activate the variant into the store at `url` (a failing one only with `past_activation`)."""
    files, verdict = built(strategy)
    signed = sign(dict(files))
    clock = FixedClock(datetime.fromisoformat(NOW))
    with open_store(url) as store:
        if verdict == "pass":
            activate_files(store, signed, default_trust(), clock=clock)
            return
        assert past_activation, f"the `{strategy}` variant does not verify ({verdict}); activation refuses it"
        from pactwright.runtime.activation import verify_bundle

        passing = dict(built("idempotent")[0])  # any verifying bundle: only to build the record's shape
        record = verify_bundle(sign(passing), default_trust(), now=clock.now())
        manifest = dict(files)[MANIFEST_PATH]
        from pactwright.canonical import load_json

        doc = load_json(manifest)
        activate(store, replace(record, pact_id=doc["pact"]["id"], pact_version=doc["pact"]["version"],
                                manifest_hash=hash_bytes(manifest), files=signed,
                                candidate_hash=doc["candidate_hash"], report_verdict=verdict))  # fmt: skip


@contextmanager
def refund_store(backend: str, directory: Path, strategy: str, **options: Any) -> Iterator[str]:
    with temporary_store(backend, directory) as url:
        install(url, strategy, **options)
        yield url


def providers_file(directory: Path, endpoint: str, *, credential: str | None = None,
                   down: frozenset[str] = frozenset()) -> Path:  # fmt: skip
    """A routes file sending every declared destination of the variants to the simulator at `endpoint`.

    A destination in `down` is routed to a loopback port nobody listens on (the connection is refused:
    nothing is sent, a definite failure).
    """
    lines = []
    for declared, path in ((REFUND_URL, "/refunds"), (ORDERS_URL, "/orders"), (NOTIFY_URL, "/notify"),
                           (VOID_URL, "/voids")):  # fmt: skip
        lines.append(f'[destination."{declared}"]')
        lines.append(f'endpoint = "{_closed_port() if declared in down else endpoint}{path}"')
        if credential is not None and declared == REFUND_URL:
            lines.append(f'credential = "{credential}"')
        lines.append("")
    path = directory / "providers.toml"
    path.write_text("\n".join(lines))
    return path


def _closed_port() -> str:
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago, bound by nobody now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def register_approver(store: Store, party: str = "rita") -> None:
    """`party` as refund_approver in the store's party registry, with its test key (once per store)."""
    from pactwright.runtime.parties import add_party, key_for
    from pactwright.signing import raw_public_key
    from tests.signed_bundles import key

    with store.transaction(write=False) as db:
        known = key_for(db, party, "refund_approver")
    if known is None:
        add_party(store, party, "refund_approver", raw_public_key(key(party).private.public_key()), T0)


def grant(store: Store, request: Mapping[str, Any], at: int, party: str = "rita") -> Any:
    """Grant a parked request with `party`'s test key: the real flow, a signature over its preview digest."""
    from pactwright.runtime import approvals
    from pactwright.signing import sign_statement
    from tests.signed_bundles import key

    statement = approvals.decision_statement(request["id"], request["preview_digest"], "grant")
    return approvals.grant(store, request["id"], party, sign_statement(key(party).private, statement), TestClock(at))


def issued(store: Store, agreement_id: str = "r1", params: dict[str, str] = PARAMS) -> None:
    """Open, assess (its `read_order` call stays prepared), approve and issue one refund."""
    open_agreement(store, PACT_ID, params, PARTIES, agreement_id=agreement_id, clock=TestClock(T0))
    submit(store, agreement_id, "assess", "assistant", "bot", "assess", clock=TestClock(T0 + 10))
    issue_again(store, agreement_id, "issue", at=T0 + 20)


def issue_again(store: Store, agreement_id: str, key: str, at: int) -> Any:
    """Submit `issue` once more under `key` (it parks), and grant it as rita."""
    register_approver(store)
    parked = submit(store, agreement_id, "issue", "support_agent", "sam", key, clock=TestClock(at))
    assert parked.status == "waiting_for_approval", parked
    result = grant(store, parked.approval, at)
    assert result.status == "committed", result
    return result


def settle_calls(store: Store, directory: Path, at: int) -> None:
    """Every call made so far delivered to a provider simulator that acknowledges it (the worker drained).

    A call site holds one call in flight (PW530): a test that fires `issue` again settles the first call.
    """
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator

    with start_simulator() as sim:
        adapter = HttpAdapter(load_providers(providers_file(directory, sim.url)), Credentials())
        EffectWorker(store, adapter, TestClock(at)).drain()
