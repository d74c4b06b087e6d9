"""What one scenario run holds while its steps execute: the store, ledger, clock, keys and what was seen.

Everything a step records here is an observation of the runtime (a result
it returned, a refusal it raised); nothing is copied from the scenario's
expectations.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pactwright.canonical import load_json
from pactwright.errors import PactwrightError
from pactwright.gate.bundles import Builder
from pactwright.gate.scenario import Scenario
from pactwright.runtime import DurableLedger, TestClock
from pactwright.runtime.provider_sim import Simulator
from pactwright.runtime.store import Store

__all__ = ["Context", "StepError"]


class StepError(PactwrightError):
    """A step could not be carried out as written (a grant of a request that never parked): the scenario fails."""

    code = "PW666"


@dataclass
class Context:
    scenario: Scenario
    builder: Builder
    sim: Simulator
    workdir: Path
    store: Store
    store_url: str
    ledger: DurableLedger
    clock: TestClock
    keys: dict[str, Ed25519PrivateKey] = field(default_factory=dict)
    parked: dict[str, dict[str, Any]] = field(default_factory=dict)  # submit key -> approval request (as returned)
    proofs: dict[str, str] = field(default_factory=dict)  # submit key -> last proof sent for its request
    refusals: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    race_committed: int = 0
    destinations: dict[str, str] = field(default_factory=dict)  # declared URL -> simulator path
    effects_at: dict[str, list[str]] = field(default_factory=dict)  # simulator path -> effects declaring it
    pact_id: str | None = None
    opened: bool = False

    def key(self, party: str) -> Ed25519PrivateKey:
        """The party's approval key: generated for this run (a party never registered gets one nobody trusts)."""
        return self.keys.setdefault(party, Ed25519PrivateKey.generate())

    def refused(self, step: int, what: str, exc: PactwrightError) -> None:
        self.refusals.append({"step": step, "what": what, "code": exc.code, "message": exc.message})

    @property
    def providers(self) -> Path:
        return self.workdir / "providers.toml"

    def learn_bundle(self, files: Mapping[str, bytes]) -> None:
        """Route every destination the bundle declares to the simulator (or a closed port when `down`)."""
        table = load_json(files["transitions.json"])
        self.pact_id = str(table["pact"]["id"])
        for effect in table.get("effects", []):
            for egress in effect.get("egress", []):
                url = str(egress["url"])
                parts = urlsplit(url)
                path = "/" + (parts.netloc + parts.path).strip("/")
                self.destinations[url] = path
                names = self.effects_at.setdefault(path, [])
                if effect["name"] not in names:
                    names.append(str(effect["name"]))
        lines = []
        for url, path in sorted(self.destinations.items()):
            base = _closed_port() if url in self.scenario.down else self.sim.url
            lines += [f'[destination."{url}"]', f'endpoint = "{base}{path}"', ""]
        self.providers.write_text("\n".join(lines), encoding="utf-8")


def _closed_port() -> str:
    """A loopback port that was free a moment ago and that nobody listens on: a connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"
