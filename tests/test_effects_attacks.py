"""Adversarial tests of effects, approvals, credentials, budgets, operators and hostile providers.

Each test attacks one promise of docs/effects.md with real stores (SQLite
and PostgreSQL), real OS processes, a real HTTP provider simulator and raw
loopback sockets, and asserts the CORRECT behaviour: what the runtime must
do when the attack is tried. A test whose attack currently succeeds is
marked `xfail(strict=True)` with the precise defect as its reason, so the
suite stays green while the defect is on record, and turns red (XPASS) the
moment the defect is fixed, so the mark is then removed.

The promises attacked, in order: an effect call is sent only as committed
(bytes, key, declared destination), even after a store row, an evidence
record, a providers file or a provider's redirect says otherwise; the
provider's own write count stays 1 with two worker processes racing; an
approval is granted only by a signed, one-use grant; a credential never
leaves through an error detail; commands that depend on a quarantined call
are refused; operators' and the CLI's malformed inputs get codes, never a
traceback; a hostile provider answer is never success, and never holds the
worker past the call's timeout.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pactwright.canonical import canonical_bytes, hash_bytes
from pactwright.errors import PactwrightError
from pactwright.runtime import TestClock, approvals, submit
from pactwright.runtime.effect_adapter import EffectRequest
from pactwright.runtime.effect_http import (
    Credentials,
    HttpAdapter,
    ProviderConfigError,
    Providers,
    Route,
    dispatch_outcome,
    load_providers,
    lookup_result,
)
from pactwright.runtime.effect_ops import list_effects, reconcile
from pactwright.runtime.effect_worker import EffectWorker
from pactwright.runtime.parties import add_party
from pactwright.runtime.provider_sim import Simulator, start_simulator
from pactwright.runtime.store import Store, open_store
from pactwright.signing import sign_statement
from tests.effect_env import PARAMS, T0, issued, providers_file, refund_store, settle_calls
from tests.signed_bundles import BACKENDS, dump
from tests.test_approval_previews import _park, key, proof, public
from tests.test_runtime_approvals import _store

REFUND = "https://api.payments.example.com"
SECRET = "s3cr3t-Bearer-value-0123456789abcdefghijklmnop"  # noqa: S105 - a test credential


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with start_simulator(slow_seconds=1.5) as simulator:
        yield simulator


def _only_refund(store: Store) -> None:
    """Take `read_order`'s call out of the way: only the refund is sent."""
    with store.transaction(exclusive=False) as db:
        db.execute("UPDATE effects SET phase = 'acknowledged' WHERE effect = 'read_order'")


def _adapter(tmp_path: Path, sim: Simulator, credential: str | None = None) -> HttpAdapter:
    return HttpAdapter(
        load_providers(providers_file(tmp_path, sim.url, credential=credential)),
        Credentials({"payments": SECRET}, environ={}) if credential else Credentials(environ={}),
    )


def _refund(store: Store) -> Any:
    return next(r for r in list_effects(store) if r.effect == "refund_payment" and r.compensates is None)


def _drain(store: Store, adapter: HttpAdapter, at: int = T0 + 30, limit: int | None = None) -> list[Any]:
    return EffectWorker(store, adapter, TestClock(at)).drain(limit)


def _edit_payload(store: Store, amount: int) -> None:
    """Rewrite the refund row's body and amount (and its own digest) to carry `amount` minor units."""
    with store.transaction(exclusive=False) as db:
        (payload,) = db.query("SELECT payload FROM effects WHERE effect = 'refund_payment'")[0]
        body = json.loads(payload)
        body["amount"] = str(amount)
        text = canonical_bytes(body).decode("utf-8")
        db.execute(
            "UPDATE effects SET payload = ?, amount = ?, payload_digest = ? WHERE effect = 'refund_payment'",
            (text, str(amount), hash_bytes(text.encode("utf-8"))),
        )


# -- 1. Only the committed bytes, key and destination are sent ---------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_edited_effect_row_is_never_sent(backend: str, tmp_path: Path, sim: Simulator) -> None:
    """Another amount in the row (body, amount and digest edited together): quarantined, nothing sent."""
    with refund_store(backend, tmp_path, "idempotent") as url, open_store(url) as store:
        issued(store)
        _only_refund(store)
        _edit_payload(store, 49_999)
        _drain(store, _adapter(tmp_path, sim))
        assert sim.state()["requests"] == 0
        assert _refund(store).quarantined and "PW644" in (_refund(store).last_error or "")


def test_a_row_edited_to_an_undeclared_destination_opens_no_connection(tmp_path: Path, sim: Simulator) -> None:
    with refund_store("sqlite", tmp_path, "idempotent") as url, open_store(url) as store:
        issued(store)
        _only_refund(store)
        with store.transaction(exclusive=False) as db:
            db.execute("UPDATE effects SET url = ? WHERE effect = 'refund_payment'", ("https://evil.example.com",))
        _drain(store, _adapter(tmp_path, sim))
        assert sim.state()["requests"] == 0 and _refund(store).quarantined


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_edited_row_with_a_rehashed_event_record_is_never_sent(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "idempotent") as url, open_store(url) as store:
        issued(store)
        _only_refund(store)
        _edit_payload(store, 49_999)
        with store.transaction(exclusive=False) as db:
            (payload,) = db.query("SELECT payload FROM effects WHERE effect = 'refund_payment'")[0]
            for seq, text in db.query("SELECT seq, record FROM evidence WHERE agreement_id = 'r1' AND kind = 'event'"):
                record = json.loads(str(text))
                for call in record.get("effects", []):
                    if call["effect"] == "refund_payment":
                        call["amount"] = "49999"
                        call["payload_digest"] = hash_bytes(str(payload).encode("utf-8"))
                data = canonical_bytes(record)
                db.execute(
                    "UPDATE evidence SET record = ?, hash = ? WHERE agreement_id = 'r1' AND seq = ?",
                    (data.decode("utf-8"), hash_bytes(data), seq),
                )
        _drain(store, _adapter(tmp_path, sim))
        sent = [r["amount"] for r in sim.state()["records"]]
        assert sim.state()["requests"] == 0, sent  # a chain that no longer links is no committed event


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_parked_call_is_looked_up_only_under_its_committed_key(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "reconcilable") as url, open_store(url) as store:
        issued(store)
        _only_refund(store)
        sim.queue("lost_request")  # nothing written; the outcome is unknown: parked for a lookup
        adapter = _adapter(tmp_path, sim)
        _drain(store, adapter, limit=1)
        assert _refund(store).phase == "needs_reconciliation"
        other = "pw-" + "0" * 40  # another action's key, with a write of the same amount at the provider
        request = urllib.request.Request(  # noqa: S310 - the loopback simulator
            sim.url + "/refunds", data=b'{"amount": "6490"}', method="POST",
            headers={"Idempotency-Key": other, "Content-Type": "application/json"},
        )  # fmt: skip
        urllib.request.urlopen(request, timeout=5).read()  # noqa: S310 - the loopback simulator
        with store.transaction(exclusive=False) as db:
            db.execute("UPDATE effects SET idempotency_key = ? WHERE effect = 'refund_payment'", (other,))
        _drain(store, adapter, at=T0 + 60)
        assert sim.state()["lookups"] == 0, _refund(store).to_json()
        assert _refund(store).phase != "reconciled_recovered"


class _Raw:
    """A loopback HTTP server answering every connection with `handler(conn)`; counts connections."""

    def __init__(self, handler: Callable[[socket.socket], None]) -> None:
        self.connections = 0
        self.seen: list[bytes] = []
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._handler = handler
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(5)
                self.seen.append(conn.recv(65536))
                self._handler(conn)
            except OSError:
                pass

    def close(self) -> None:
        self._sock.close()


def _answer(status: str, body: bytes, extra: bytes = b"") -> Callable[[socket.socket], None]:
    def handler(conn: socket.socket) -> None:
        conn.sendall(
            b"HTTP/1.1 "
            + status.encode()
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n"
            + extra
            + b"Connection: close\r\n\r\n"
            + body
        )

    return handler


def _request(amount: str | None = "6490", timeout: float = 2.0) -> EffectRequest:
    return EffectRequest("r1/2/e0", "refund_payment", "POST", REFUND, "pw-abc", b'{"amount":"6490"}', amount, timeout)


def _http(endpoint: str, credential: str | None = "payments") -> HttpAdapter:
    return HttpAdapter(
        Providers({REFUND: Route(REFUND, endpoint, credential)}), Credentials({"payments": SECRET}, environ={})
    )


def test_a_redirect_is_not_followed_and_carries_nothing_elsewhere() -> None:
    elsewhere = _Raw(
        _answer("201 Created", b'{"id":"x","idempotency_key":"pw-abc","amount":6490,"status":"succeeded"}')
    )
    redirect = _Raw(_answer("307 Temporary Redirect", b"", f"Location: {elsewhere.url}/steal\r\n".encode()))
    try:
        outcome = _http(redirect.url + "/refunds").dispatch(_request(), [("POST", REFUND)])
        assert outcome.kind == "mismatch" and outcome.detail.startswith("PW632")
        assert elsewhere.connections == 0 and redirect.connections == 1
    finally:
        redirect.close()
        elsewhere.close()


@pytest.mark.parametrize(
    ("document", "code"),
    [
        ('[destination."https://api.payments.example.com"]\nendpoint = "http://u:p@127.0.0.1:1/x"\n', "PW623"),
        ('[destination."https://api.payments.example.com"]\nendpoint = "file:///etc/passwd"\n', "PW623"),
        ('[destination."https://api.payments.example.com"]\nendpoint = 5\n', "PW623"),
        ('destination = "https://api.payments.example.com"\n', "PW623"),
        ('[destination."https://api.payments.example.com"]\nendpoint = "http://127.0.0.1:1/x"\nhost = "a"\n', "PW623"),
        (
            '[destination."https://api.payments.example.com"]\nendpoint = "http://127.0.0.1:1/x"\n'
            'credential = "../x"\n',
            "PW623",
        ),
        ('[destination."not a url"]\nendpoint = "http://127.0.0.1:1/x"\n', "PW623"),
    ],
)
def test_an_odd_providers_file_is_refused_with_its_code(tmp_path: Path, document: str, code: str) -> None:
    path = tmp_path / "providers.toml"
    path.write_text(document)
    with pytest.raises(ProviderConfigError) as refused:
        load_providers(path)
    assert refused.value.code == code


def test_a_route_for_a_near_miss_of_the_declared_url_is_no_route() -> None:
    """`https://api.payments.example.com/` routes nothing for the declared `https://api.payments.example.com`."""
    listener = _Raw(_answer("201 Created", b"{}"))
    try:
        adapter = HttpAdapter(Providers({REFUND + "/": Route(REFUND + "/", listener.url)}), Credentials(environ={}))
        with pytest.raises(PactwrightError) as refused:
            adapter.dispatch(_request(), [("POST", REFUND)])
        assert refused.value.code == "PW621" and listener.connections == 0
    finally:
        listener.close()


# -- 2. One write, with two worker processes racing ------------------------------------------------


def _worker(url: str, providers: Path, clock: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pactwright.cli.main",
            "worker",
            "--store",
            url,
            "--drain",
            "--providers",
            str(providers),
            "--clock-file",
            str(clock),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_worker_processes_at_once_send_each_refund_once(backend: str, tmp_path: Path, sim: Simulator) -> None:
    """`once` is the strategy a double send would show: any second send is a second write."""
    with refund_store(backend, tmp_path, "once") as url:
        with open_store(url) as store:
            for n in range(4):
                issued(store, f"r{n}", {**PARAMS, "order_id": f"ORD-{2000 + n}"})
            _only_refund(store)
        providers = providers_file(tmp_path, sim.url)
        clock = tmp_path / "clock"
        clock.write_text(f"{T0 + 30}\n")
        workers = [_worker(url, providers, clock) for _ in range(2)]
        for worker in workers:
            _, err = worker.communicate(timeout=120)
            assert worker.returncode == 0, err
        state = sim.state()
        assert state["writes"] == 4 and set(state["by_key"].values()) == {1}, state
        with open_store(url) as store:
            assert sorted(r.phase for r in list_effects(store) if r.effect == "refund_payment") == ["acknowledged"] * 4


# -- 3. Approvals: only a signed, one-use grant ------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_forged_one_use_approval_row_does_not_replace_a_signed_grant(backend: str, tmp_path: Path) -> None:
    with refund_store(backend, tmp_path, "reconcilable") as url, open_store(url) as store:
        from pactwright.runtime import open_agreement
        from tests.effect_env import PACT_ID, PARTIES

        open_agreement(store, PACT_ID, PARAMS, PARTIES, agreement_id="r1", clock=TestClock(T0))
        submit(store, "r1", "assess", "assistant", "bot", "assess", clock=TestClock(T0 + 10))
        _forge_approval(store, "r1", "apr-forged")  # no approval request, no signature
        result = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 20))
        assert result.status == "waiting_for_approval"


@pytest.fixture(params=BACKENDS)
def approval_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    yield from _store(request.param, tmp_path)


def _refused(url: str, code: str, call: Callable[[], Any]) -> None:
    before = dump(url)
    with pytest.raises(PactwrightError) as caught:
        call()
    assert caught.value.code == code, caught.value
    assert dump(url) == before


def test_a_reject_signature_is_not_a_grant(approval_url: str) -> None:
    with open_store(approval_url) as store:
        request = _park(store)
        signed = proof(request, decision="reject")
        _refused(
            approval_url,
            "PW608",
            lambda: approvals.grant(store, request["id"], "rita", signed, clock=TestClock(T0 + 30)),
        )


def test_a_key_registered_for_another_role_does_not_grant(approval_url: str) -> None:
    with open_store(approval_url) as store:
        request = _park(store, register=False)
        add_party(store, "rita", "operator", public("rita"), T0)  # rita's key, but as an operator
        _refused(
            approval_url,
            "PW606",
            lambda: approvals.grant(store, request["id"], "rita", proof(request), clock=TestClock(T0 + 30)),
        )


def test_a_signature_over_a_reordered_or_padded_statement_is_refused(approval_url: str) -> None:
    with open_store(approval_url) as store:
        request = _park(store)
        other = {"approval": request["id"], "preview_digest": request["preview_digest"].upper(), "decision": "grant"}
        forged = sign_statement(key("rita"), other)
        _refused(
            approval_url,
            "PW608",
            lambda: approvals.grant(store, request["id"], "rita", forged, clock=TestClock(T0 + 30)),
        )
        good = proof(request)
        _refused(
            approval_url,
            "PW608",
            lambda: approvals.grant(store, request["id"], "rita", good + "\n", clock=TestClock(T0 + 30)),
        )


def test_a_grant_racing_a_reject_decides_once(tmp_path: Path) -> None:
    """Four threads, each with its own PostgreSQL connection: exactly one decision, the others PW604."""
    stores = _store("postgresql", tmp_path)
    url = next(stores)
    try:
        with open_store(url) as store:
            request = _park(store)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=_decide, args=(url, request, d, outcomes))
            for d in ("grant", "reject", "grant", "reject")
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        decided = [o for o in outcomes if o in ("grant", "reject")]
        assert len(decided) == 1 and sorted(set(outcomes) - {"grant", "reject"}) == ["PW604"], outcomes
        with open_store(url) as store, store.transaction(write=False) as db:
            rows = db.query("SELECT count(*) FROM effects WHERE effect = 'refund_payment'")
            assert int(rows[0][0]) == (1 if decided == ["grant"] else 0)
    finally:
        stores.close()


def _decide(url: str, request: dict[str, Any], decision: str, outcomes: list[str]) -> None:
    with open_store(url) as own:
        signed = proof(request, decision=decision)
        action = approvals.grant if decision == "grant" else approvals.reject
        try:
            action(own, request["id"], "rita", signed, clock=TestClock(T0 + 30))
            outcomes.append(decision)
        except PactwrightError as exc:
            outcomes.append(exc.code or "")


def test_the_cli_grant_never_prints_or_stores_the_proof(tmp_path: Path) -> None:
    from pactwright.keys import load_private_key

    for url in _store("sqlite", tmp_path):
        run = _cli("keygen", "--out", str(tmp_path / "rita"))
        assert run.returncode == 0, run.stderr
        private = load_private_key(str(tmp_path / "rita.key"))
        run = _cli(
            "parties",
            "add",
            "rita",
            "--role",
            "refund_approver",
            "--public-key",
            str(tmp_path / "rita.pub"),
            "--store",
            url,
        )
        assert run.returncode == 0, run.stderr
        with open_store(url) as store:
            from pactwright.runtime import open_agreement
            from tests.test_approval_previews import PARAMS as P
            from tests.test_approval_previews import PARTIES as Q
            from tests.test_runtime_approvals import PACT_ID

            open_agreement(store, PACT_ID, P, Q, agreement_id="r1", clock=TestClock(T0))
            submit(store, "r1", "assess", "assistant", "bot", "assess", clock=TestClock(T0 + 10))
            parked = submit(store, "r1", "issue", "support_agent", "sam", "issue", clock=TestClock(T0 + 20))
        request = parked.approval or {}
        statement = approvals.decision_statement(request["id"], request["preview_digest"], "grant")
        signature = sign_statement(private, statement)  # ed25519 is deterministic: the CLI's proof
        clock = tmp_path / "clock"
        clock.write_text(f"{T0 + 30}\n")
        run = _cli(
            "approvals",
            "grant",
            request["id"],
            "--key",
            str(tmp_path / "rita.key"),
            "--as",
            "rita",
            "--store",
            url,
            "--format",
            "json",
            "--clock-file",
            str(clock),
        )
        assert run.returncode == 0, run.stderr
        assert signature not in run.stdout + run.stderr
        assert signature not in repr(dump(url))


# -- 4. Credentials ------------------------------------------------------------------------------------


def test_a_provider_echoing_the_credential_never_puts_any_of_it_in_a_detail() -> None:
    echoed = json.dumps({"id": "x", "idempotency_key": "k" * 30 + SECRET, "amount": 6490, "status": "succeeded"})
    provider = _Raw(_answer("200 OK", echoed.encode()))
    try:
        outcome = _http(provider.url + "/refunds").dispatch(_request(), [("POST", REFUND)])
        assert outcome.kind == "mismatch"
        assert SECRET[:12] not in outcome.detail, outcome.detail
    finally:
        provider.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_credential_goes_only_to_its_own_destination(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "idempotent") as url, open_store(url) as store:
        issued(store)  # read_order (orders, no credential) and refund_payment (payments, credential)
        adapter = _adapter(tmp_path, sim, credential="payments")
        for n in range(4):
            _drain(store, adapter, at=T0 + 30 + 1000 * n)
        by_path = {r["path"]: r["authorization"] for r in sim.state()["records"]}
        assert by_path["/refunds"] is not None  # the refund's destination carries its credential
        assert SECRET not in repr(dump(url))
        read = [r for r in list_effects(store) if r.effect == "read_order"]
        assert read and read[0].phase == "acknowledged"
        assert all(r["authorization"] is None for r in sim.state()["records"] if r["path"] != "/refunds")


# -- 5. Budgets and parked dependencies ------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_quarantined_refund_blocks_what_depends_on_it(backend: str, tmp_path: Path, sim: Simulator) -> None:
    with refund_store(backend, tmp_path, "repeatable") as url, open_store(url) as store:
        issued(store)
        _only_refund(store)
        sim.queue("wrong_amount")
        _drain(store, _adapter(tmp_path, sim))
        assert _refund(store).quarantined
        _refused(
            url,
            "PW527",
            lambda: submit(store, "r1", "issue", "support_agent", "sam", "issue-2", clock=TestClock(T0 + 3000)),
        )
        assert sim.state()["writes"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dry_run_over_budget_is_refused_and_writes_nothing(backend: str, tmp_path: Path) -> None:
    with refund_store(backend, tmp_path, "twice") as url, open_store(url) as store:
        issued(store)
        settle_calls(store, tmp_path, T0 + 30)  # the first refund settled: its call site is free again
        _refused(
            url,
            "PW523",
            lambda: submit(
                store, "r1", "issue", "support_agent", "sam", "issue-2", dry_run=True, clock=TestClock(T0 + 40)
            ),
        )


# -- 6. Operators and the CLI -------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_operator_cannot_resolve_a_call_through_another_agreement(
    backend: str, tmp_path: Path, sim: Simulator
) -> None:
    with refund_store(backend, tmp_path, "reconcilable") as url, open_store(url) as store:
        issued(store, "r1")
        issued(store, "r2", {**PARAMS, "order_id": "ORD-2"})
        _only_refund(store)
        sim.queue("lost_response", "lookup_unknown")
        _drain(store, _adapter(tmp_path, sim), limit=2)
        parked = list_effects(store, parked=True)
        assert parked, list_effects(store)
        add_party(store, "olga", "operator", None, T0)
        victim = parked[0]
        other = "r2" if victim.agreement_id == "r1" else "r1"
        _refused(url, "PW640", lambda: reconcile(store, other, victim.id, "not_occurred", "olga"))
        _refused(
            url,
            "PW643",
            lambda: reconcile(
                store, victim.agreement_id, victim.id, "recovered_acknowledgement", "olga", provider_ref="ref\nforged"
            ),
        )


def test_malformed_cli_inputs_get_codes_not_tracebacks(tmp_path: Path) -> None:
    url = str(tmp_path / "store.db")
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe[destination]\n")
    odd = tmp_path / "odd.toml"
    odd.write_text("destination = 5\n")
    garbage = tmp_path / "garbage.key"
    garbage.write_text("not a key\n")
    garbage.chmod(0o600)
    runs = [
        ("worker", "--store", url, "--drain", "--providers", str(tmp_path / "missing.toml")),
        ("worker", "--store", url, "--drain", "--providers", str(tmp_path)),
        ("worker", "--store", url, "--drain", "--providers", str(bad)),
        ("worker", "--store", url, "--drain", "--providers", str(odd)),
        ("effects", "abandon", "r1", "refund_payment", "--reason", "x", "--as", "olga", "--store", url),
        (
            "effects",
            "reconcile",
            "r1",
            "refund_payment",
            "--resolution",
            "not_occurred",
            "--as",
            "olga",
            "--provider-ref",
            "x",
            "--store",
            url,
        ),
        ("approvals", "show", "apr-nope", "--store", url),
        ("approvals", "grant", "apr-nope", "--key", str(garbage), "--as", "rita", "--store", url),
        ("parties", "add", "rita", "--role", "Bad Role", "--store", url),
        ("parties", "add", "rita", "--role", "refund_approver", "--public-key", str(garbage), "--store", url),
    ]
    for args in runs:
        run = _cli(*args)
        assert run.returncode != 0, (args, run.stdout)
        assert "Traceback" not in run.stderr, (args, run.stderr)
        assert "PW" in run.stderr + run.stdout, (args, run.stderr)


# -- 7. Hostile provider answers -----------------------------------------------------------------------


ACK = {"id": "sim_1", "idempotency_key": "pw-abc", "amount": 6490, "status": "succeeded"}


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, b"<html><body>OK</body></html>"),
        (200, b""),
        (200, b"\xef\xbb\xbf" + json.dumps(ACK).encode()),  # a byte-order mark
        (200, json.dumps({**ACK, "amount": 6490.0}).encode()),
        (200, json.dumps({**ACK, "amount": True}).encode()),
        (200, json.dumps({**ACK, "amount": "6490.00"}).encode()),
        (200, json.dumps({**ACK, "amount": "06490"}).encode()),
        (200, json.dumps({**ACK, "idempotency_key": "PW-ABC"}).encode()),
        (200, json.dumps({**ACK, "status": "SUCCEEDED"}).encode()),
        (200, json.dumps({**ACK, "status": "pending"}).encode()),
        (200, json.dumps({**ACK, "id": ""}).encode()),
        (200, json.dumps([ACK]).encode()),
        (200, b'{"id":"a","id":"b","idempotency_key":"pw-abc","amount":6490,"status":"succeeded"}'),
        (200, b"\xff" * 10),
        (202, json.dumps(ACK).encode()),
        (204, b""),
        (302, json.dumps(ACK).encode()),
        (299, json.dumps(ACK).encode()),
    ],
)
def test_a_hostile_answer_is_never_success(status: int, body: bytes) -> None:
    assert dispatch_outcome(_request(), status, body).kind == "mismatch"
    assert lookup_result(_request(), status, body).kind != "applied"


def test_an_oversized_answer_is_never_success_over_the_wire() -> None:
    big = json.dumps({**ACK, "pad": "x" * (70 * 1024)}).encode()
    provider = _Raw(_answer("200 OK", big))
    try:
        outcome = _http(provider.url + "/refunds").dispatch(_request(), [("POST", REFUND)])
        assert outcome.kind == "mismatch" and outcome.detail.startswith("PW630")
    finally:
        provider.close()


def _drip(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(30):  # a header line every 0.1 s: each read is quick, the whole answer is not
        conn.sendall(b"X-Slow: 1\r\n")
        time.sleep(0.1)
    body = json.dumps(ACK).encode()
    conn.sendall(b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def test_a_provider_dripping_headers_does_not_outlast_the_timeout() -> None:
    provider = _Raw(_drip)
    try:
        started = time.monotonic()
        outcome = _http(provider.url + "/refunds").dispatch(_request(timeout=0.5), [("POST", REFUND)])
        elapsed = time.monotonic() - started
        assert outcome.kind == "uncertain"
        assert elapsed < 1.5, elapsed
    finally:
        provider.close()


def _forge_approval(store: Store, agreement_id: str, approval_id: str) -> None:
    """An unconsumed one-use approval row written straight into the store: no request, no signature."""
    from pactwright.runtime import payload_digest

    with store.transaction(exclusive=False) as db:
        db.execute(
            "INSERT INTO approvals (id, agreement_id, transition, payload_digest, approver_role, approver_party, "
            "granted_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (approval_id, agreement_id, "issue", payload_digest("issue", "support_agent", "sam"), "refund_approver",
             "rita", T0),
        )  # fmt: skip
