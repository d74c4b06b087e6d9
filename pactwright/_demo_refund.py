"""The demo's refund step: preview, approval, dispatch over HTTP, a lost response, reconciliation, evidence.

The activated support refund policy runs against the provider simulator
(a real HTTP server on loopback, `pactwright provider-sim`): the support
agent's `issue` parks with a preview, the approver grants it with her
ed25519 key, the worker sends the refund, the simulator loses the response
after performing the write and cannot answer the first lookup, an operator
reconciles the parked call with the provider's reference, and the evidence
states the claim. The simulator's own write count shows one refund.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pactwright.demo import Demo


def _providers(directory: Path, url: str) -> Path:
    path = directory / "providers.toml"
    path.write_text(
        '[destination."https://api.payments.example.com"]\n'
        f'endpoint = "{url}/refunds"\n\n'
        '[destination."https://orders.internal.example.com"]\n'
        f'endpoint = "{url}/orders"\n'
    )
    return path


def _sim(demo: Demo) -> tuple[subprocess.Popen[str], str]:
    """`pactwright provider-sim` in its own process; its URL from its first line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pactwright.cli.main", "provider-sim", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    url = line.rsplit(" ", 1)[-1]
    demo.out(f"  $ pactwright provider-sim --port 0 &\n    {line}")
    return process, url


def _control(url: str, path: str, body: dict[str, object] | None = None) -> dict[str, object]:
    import httpx2

    response = httpx2.post(url + path, json=body) if body is not None else httpx2.get(url + path)
    answer: dict[str, object] = response.json()
    return answer


def refund_with_approval(demo: Demo) -> None:
    """The support refund end to end: preview, approval, a lost response, reconciliation, the evidence claim."""
    from pactwright.demo import DemoFailure, _cli

    store, keys, clock = str(demo.store), demo.workdir / "keys", demo.workdir / "clock"
    clock.write_text("1780000000")
    common = ("--store", store, "--clock-file", str(clock))
    process, url = _sim(demo)
    try:
        providers = _providers(demo.workdir, url)
        _cli(demo, "keygen", "--out", str(keys / "rita"), show=False)
        _cli(demo, "parties", "add", "rita", "--role", "refund_approver", "--public-key", str(keys / "rita.pub"),
             "--store", store)  # fmt: skip
        _cli(demo, "parties", "add", "olga", "--role", "operator", "--store", store)
        parties = ("--party", "support_agent=sam", "--party", "refund_approver=rita", "--party", "assistant=bot")
        _cli(demo, "open", "support.refund", "--id", "r1", "--param", "amount=64.90", "--param", "order_id=ORD-1001",
             "--param", "reason=damaged_on_arrival", *parties, *common)  # fmt: skip
        _cli(demo, "submit", "r1", "assess", "--as", "assistant:bot", "--key", "assess-1", *common)
        demo.out("  the support agent issues the refund: it needs refund_approver's approval, so it parks")
        parked = _cli(demo, "submit", "r1", "issue", "--as", "support_agent:sam", "--key", "issue-1", *common,
                      "--format", "json", show=False)  # fmt: skip
        approval = json.loads(parked).get("approval") or {}
        request = str(approval.get("id"))
        demo.out(f"    waiting for approval: request {request}, preview digest {approval.get('preview_digest')}")
        _cli(demo, "approvals", "show", request, *common)
        demo.out("  the approver grants exactly that preview with her key (a one-use proof bound to its digest):")
        _cli(demo, "approvals", "grant", request, "--key", str(keys / "rita.key"), "--as", "rita", *common)
        demo.out("  a replay of the same grant is refused:")
        _cli(demo, "approvals", "grant", request, "--key", str(keys / "rita.key"), "--as", "rita", *common, expect=1)
        _control(url, "/_sim/faults", {"faults": ["lost_response", "lookup_unknown"]})
        demo.out("  the provider performs the refund but its response is lost; its first lookup cannot answer:")
        _cli(demo, "worker", "--drain", "--providers", str(providers), *common, expect=0)
        _cli(demo, "effects", "list", "--parked", "--store", store)
        writes = _control(url, "/_sim/state").get("records") or []
        ref = str(writes[0]["id"]) if isinstance(writes, list) and writes and isinstance(writes[0], dict) else "?"
        demo.out(f"  the operator finds the refund at the provider ({ref}) and reconciles the parked call:")
        _cli(demo, "effects", "reconcile", "r1", "refund_payment", "--resolution", "recovered_acknowledgement",
             "--provider-ref", ref, "--as", "olga", *common)  # fmt: skip
        _cli(demo, "worker", "--drain", "--providers", str(providers), *common, show=False)
        state = _control(url, "/_sim/state")
        demo.out(f"  the provider's own count: {state.get('writes')} refund written")
        if state.get("writes") != 1:
            raise DemoFailure(f"the provider should have written exactly one refund, not {state.get('writes')}")
        _cli(demo, "evidence", "r1", "--store", store)
        _cli(demo, "evidence", "verify", "r1", "--store", store)
    finally:
        process.terminate()
        process.wait(timeout=10)
