"""Scenario files: parse one TOML file into a checked `Scenario`, or refuse it naming the line and key.

A scenario is plain text a reviewer reads (docs/gate.md documents every
key). Everything is checked before anything runs: an unknown key, a missing
one or a value of the wrong type is a malformed scenario (PW660-PW663, exit
2), never a failed one, so a typo cannot pass as "the expectation did not
hold" or, worse, silently drop an expectation.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pactwright.errors import UsageError

__all__ = ["EXPECT_KEYS", "STEP_KINDS", "Scenario", "ScenarioError", "Step", "load_scenario"]

DEFAULT_START = 1780315200  # 2026-06-01T12:00:00Z: the trusted clock a scenario starts at
FAULTS = frozenset({"lost_request", "lost_response", "error_5xx", "slow", "duplicate_ack", "wrong_amount",
                    "wrong_key", "oversized", "not_utf8", "lookup_unknown"})  # fmt: skip
CRASH_POINTS = ("after_claim", "after_dispatched", "after_send", "after_outcome")


class ScenarioError(UsageError):
    """A scenario file that cannot be run as written (exit 2): its code, file, line and key."""

    code = "PW661"


# A key's type: str, int, bool, float, strs (list of text), texts (table of text), edit, commands.
_COMMAND = {"transition": ("str", True), "as": ("str", True), "key": ("str", True), "params": ("texts", False),
            "expect_version": ("int", False)}  # fmt: skip
STEP_KINDS: dict[str, dict[str, tuple[str, bool]]] = {
    "open": {"id": ("str", False), "params": ("texts", False), "omit": ("strs", False)},
    "submit": _COMMAND,
    "grant": {"request": ("str", True), "by": ("str", True), "signer": ("str", False), "replay": ("bool", False),
              "advance": ("int", False)},
    "reject": {"request": ("str", True), "by": ("str", True), "signer": ("str", False), "advance": ("int", False)},
    "advance": {"seconds": ("int", True)},
    "fault": {"faults": ("strs", True)},
    "provider": {"ignore_keys": ("bool", False), "slow_seconds": ("float", False)},
    "drain": {"rounds": ("int", False)},
    "crash": {"at": ("str", True)},
    "race": {"commands": ("commands", True)},
    "reconcile": {"effect": ("str", True), "resolution": ("str", True), "provider_ref": ("str", False),
                  "by": ("str", True)},
    "abandon": {"effect": ("str", True), "reason": ("str", True), "by": ("str", True)},
    "activate": {"version": ("str", False), "edit": ("change", False), "tamper": ("edit", False),
                 "force_reason": ("str", False)},
    "tamper_store": {"file": ("str", True), "find": ("str", True), "replace": ("str", True)},
}  # fmt: skip
EXPECT_KEYS: dict[str, str] = {
    "writes": "int", "effect_writes": "ints", "state": "str", "opened": "bool", "version": "int",
    "refusals": "strs", "effects": "phases", "effect_attempts": "ints", "ledger": "texts",
    "invariants": "invariants", "evidence": "str", "approvals": "strs", "race_committed": "int",
    "replayed": "int", "active_version": "str",
}  # fmt: skip
_TOP = {"name", "description", "policy", "bundle", "activate", "start", "agreement", "registry", "provider",
        "steps", "expect"}  # fmt: skip
_AGREEMENT = {"id": "str", "params": "texts", "parties": "texts", "open": "bool"}
_REGISTRY = {"approvers": "texts", "operators": "strs"}
_PROVIDER = {"ignore_keys": "bool", "slow_seconds": "float", "down": "strs"}
_EDIT = {"file": "str", "find": "str", "replace": "str"}


@dataclass(frozen=True)
class Step:
    """One step: its kind, its 1-based number, the line of its `[[steps]]` header, and its checked fields."""

    kind: str
    number: int
    line: int
    fields: Mapping[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


@dataclass(frozen=True)
class Scenario:
    """A checked scenario file. `policy` and `bundle` are absolute paths; exactly one is set."""

    path: Path
    name: str
    description: str
    policy: Path | None
    bundle: Path | None
    activate: bool
    start: int
    agreement_id: str
    params: Mapping[str, str]
    parties: Mapping[str, str]
    open_at_start: bool
    approvers: Mapping[str, str]  # party -> approval role (a key is generated for it)
    operators: tuple[str, ...]
    ignore_keys: bool
    slow_seconds: float
    down: tuple[str, ...]
    steps: tuple[Step, ...]
    expect: Mapping[str, Any] = field(default_factory=dict)


class _Lines:
    """Finds the line a key is written on, so a refusal can point at it (tomllib gives no positions)."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()
        self.headers = [n + 1 for n, line in enumerate(self.lines) if re.match(r"\s*\[\[\s*steps\s*\]\]", line)]

    def of(self, key: str, after: int = 0) -> int:
        bare = key.rsplit(".", 1)[-1]
        pattern = re.compile(rf'\s*(\[+\s*)?("?){re.escape(bare)}\2\s*[=\].]')
        for n in range(max(after - 1, 0), len(self.lines)):
            if pattern.match(self.lines[n]):
                return n + 1
        return max(after, 1)

    def step(self, index: int) -> int:
        return self.headers[index] if index < len(self.headers) else 1

    def error(self, code: str, message: str, key: str, line: int, **extra: str) -> ScenarioError:
        where = f"{self.path}:{line}"
        return ScenarioError(f"{where}: `{key}`: {message}", code=code, file=str(self.path), field=key, **extra)


def _typed(lines: _Lines, key: str, value: Any, kind: str, line: int) -> Any:
    """`value` checked against `kind`; returns it normalized (tuples, dicts of text)."""
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "strs": isinstance(value, list) and all(isinstance(v, str) for v in value),
        "texts": isinstance(value, dict) and all(isinstance(v, str) for v in value.values()),
        "ints": isinstance(value, dict) and all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()),
        "phases": isinstance(value, dict)
        and all(
            isinstance(v, str) or (isinstance(v, list) and all(isinstance(p, str) for p in v)) for v in value.values()
        ),
        "invariants": value == "hold" or (isinstance(value, dict) and all(isinstance(v, bool) for v in value.values())),
        "edit": isinstance(value, dict),
        "change": isinstance(value, dict),
        "commands": isinstance(value, list) and len(value) >= 2 and all(isinstance(v, dict) for v in value),
    }[kind]
    if not ok:
        shown = {"strs": "a list of strings", "texts": "a table of strings", "ints": "a table of integers",
                 "phases": "a table of phase names (a string or a list of strings)", "edit": "a table",
                 "change": "a table",
                 "invariants": '"hold" or a table of invariant names to true/false',
                 "commands": "a list of at least two command tables", "int": "an integer", "str": "a string",
                 "bool": "true or false", "float": "a number"}[kind]  # fmt: skip
        raise lines.error("PW662", f"must be {shown}", key, line, found=repr(value)[:80])
    if kind == "edit":
        return _table(lines, key, value, _EDIT, line, required=set(_EDIT))
    if kind == "change":
        change = {"find": "str", "replace": "str"}
        return _table(lines, key, value, change, line, required=set(change))
    if kind == "commands":
        return tuple(_fields(lines, f"{key}[{n}]", v, _COMMAND, line) for n, v in enumerate(value))
    if kind == "float":
        return float(value)
    if kind == "strs":
        return tuple(value)
    if kind in ("texts", "ints", "phases", "invariants") and isinstance(value, dict):
        return {str(k): (tuple(v) if isinstance(v, list) else v) for k, v in value.items()}
    return value


def _table(lines: _Lines, key: str, value: Any, schema: Mapping[str, str], line: int,
           required: set[str] | None = None) -> dict[str, Any]:  # fmt: skip
    if not isinstance(value, dict):
        raise lines.error("PW662", "must be a table", key, line)
    out: dict[str, Any] = {}
    for name, item in value.items():
        if name not in schema:
            raise lines.error("PW661", f"unknown key (expected one of {', '.join(sorted(schema))})",
                              f"{key}.{name}", lines.of(name, line))  # fmt: skip
        out[name] = _typed(lines, f"{key}.{name}", item, schema[name], lines.of(name, line))
    for name in sorted((required or set()) - set(out)):
        raise lines.error("PW661", "missing required key", f"{key}.{name}", line)
    return out


def _fields(lines: _Lines, key: str, value: Any, schema: Mapping[str, tuple[str, bool]], line: int) -> dict[str, Any]:
    types = {name: kind for name, (kind, _) in schema.items()}
    return _table(lines, key, value, types, line, required={n for n, (_, must) in schema.items() if must})


def _step(lines: _Lines, index: int, raw: Any) -> Step:
    line = lines.step(index)
    key = f"steps[{index + 1}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("do"), str):
        raise lines.error("PW661", "a step is a `[[steps]]` table with `do = KIND`", key, line)
    kind = str(raw["do"])
    if kind not in STEP_KINDS:
        raise lines.error("PW662", f"unknown step kind `{kind}` (expected one of {', '.join(STEP_KINDS)})",
                          f"{key}.do", lines.of("do", line))  # fmt: skip
    fields = _fields(lines, key, {k: v for k, v in raw.items() if k != "do"}, STEP_KINDS[kind], line)
    for name in ("as",):
        if name in fields and ":" not in fields[name]:
            raise lines.error("PW662", "must be `ROLE:PARTY`", f"{key}.{name}", lines.of(name, line))
    for command in fields.get("commands", ()):
        if ":" not in command["as"]:
            raise lines.error("PW662", "must be `ROLE:PARTY`", f"{key}.commands.as", line)
    bad = [f for f in fields.get("faults", ()) if f not in FAULTS]
    if bad:
        raise lines.error("PW662", f"unknown fault `{bad[0]}` (expected one of {', '.join(sorted(FAULTS))})",
                          f"{key}.faults", lines.of("faults", line))  # fmt: skip
    if kind == "crash" and fields["at"] not in CRASH_POINTS:
        raise lines.error("PW662", f"unknown crash point (expected one of {', '.join(CRASH_POINTS)})",
                          f"{key}.at", lines.of("at", line))  # fmt: skip
    return Step(kind, index + 1, line, fields)


def _expect(lines: _Lines, raw: Any) -> dict[str, Any]:
    line = lines.of("expect")
    if not isinstance(raw, dict) or not raw:
        raise lines.error("PW661", "a scenario states what must hold in a non-empty `[expect]` table", "expect", line)
    return _table(lines, "expect", raw, EXPECT_KEYS, line)


def load_scenario(path: Path) -> Scenario:
    """Read and check one scenario file (PW660 unreadable or not TOML; PW661 keys; PW662 values; PW663 paths)."""
    try:
        text = path.read_bytes().decode("utf-8")
        doc = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{path}: cannot read the scenario: {exc}", code="PW660", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not a TOML scenario: {exc}", code="PW660", file=str(path)) from None
    lines = _Lines(path, text)
    for name in doc:
        if name not in _TOP:
            raise lines.error("PW661", f"unknown key (expected one of {', '.join(sorted(_TOP))})", name,
                              lines.of(name))  # fmt: skip
    if not isinstance(doc.get("name"), str) or not doc["name"].strip():
        raise lines.error("PW661", "a scenario needs a `name`", "name", lines.of("name"))
    if ("policy" in doc) == ("bundle" in doc):
        raise lines.error("PW661", "name exactly one of `policy` (a .pact file) or `bundle` (a directory)",
                          "policy", lines.of("policy"))  # fmt: skip
    source_key = "policy" if "policy" in doc else "bundle"
    source = _typed(lines, source_key, doc[source_key], "str", lines.of(source_key))
    target = (path.parent / source).resolve()
    if not (target.is_file() if source_key == "policy" else target.is_dir()):
        raise lines.error("PW663", f"`{source}` is not a {'file' if source_key == 'policy' else 'directory'}",
                          source_key, lines.of(source_key))  # fmt: skip
    top = {k: _typed(lines, k, doc[k], kind, lines.of(k)) for k, kind in
           (("description", "str"), ("activate", "bool"), ("start", "int")) if k in doc}  # fmt: skip
    agreement = _table(lines, "agreement", doc.get("agreement", {}), _AGREEMENT, lines.of("agreement"))
    registry = _table(lines, "registry", doc.get("registry", {}), _REGISTRY, lines.of("registry"))
    provider = _table(lines, "provider", doc.get("provider", {}), _PROVIDER, lines.of("provider"))
    raw_steps = doc.get("steps", [])
    if not isinstance(raw_steps, list):
        raise lines.error("PW662", "must be an array of `[[steps]]` tables", "steps", lines.of("steps"))
    steps = tuple(_step(lines, n, raw) for n, raw in enumerate(raw_steps))
    return Scenario(
        path=path, name=str(doc["name"]).strip(), description=str(top.get("description", "")),
        policy=target if source_key == "policy" else None, bundle=target if source_key == "bundle" else None,
        activate=bool(top.get("activate", True)), start=int(top.get("start", DEFAULT_START)),
        agreement_id=str(agreement.get("id", "a1")), params=dict(agreement.get("params", {})),
        parties=dict(agreement.get("parties", {})), open_at_start=bool(agreement.get("open", True))
        and not any(s.kind == "open" for s in steps),
        approvers=dict(registry.get("approvers", {})), operators=tuple(registry.get("operators", ())),
        ignore_keys=bool(provider.get("ignore_keys", False)), slow_seconds=float(provider.get("slow_seconds", 1.5)),
        down=tuple(provider.get("down", ())), steps=steps, expect=_expect(lines, doc.get("expect")),
    )  # fmt: skip
