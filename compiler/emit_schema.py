"""`events.schema.json`: JSON Schema (draft 2020-12) for every command and event.

Generated from pydantic models built per policy, so a client can validate a
command before sending it and the runtime's own validation and the schema
cannot drift apart. Money travels as a decimal string of minor units.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from pactwright.compiler.lower import Json

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_MINOR_UNITS = r"^(0|[1-9][0-9]*)$"
_PERCENT = r"^(0|[1-9][0-9]*)(\.[0-9]{1,4})?$"


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Posting(_Closed):
    """One ledger posting as the runtime records it."""

    source: str
    destination: str
    amount: str = Field(pattern=_MINOR_UNITS, description="minor units")
    asset: str


def _literal(values: list[str]) -> Any:
    return Literal[tuple(values)]


def _param_field(param: Json) -> tuple[Any, Any]:
    # The field gets a neutral Python name and the param's name as its alias:
    # a param may be called `model_config`, `schema` or `json`, which pydantic
    # reserves or would shadow.
    alias = param["name"]
    if param["type"] == "money":
        description = f"minor units, {param['min']} to {param['max']} inclusive"
        for key, word in (("min_param", "at least"), ("max_param", "at most")):  # new in 1.1
            description += f", {word} `{param[key]}`" if key in param else ""
        return (str | None, Field(default=None, alias=alias, pattern=_MINOR_UNITS, description=description))
    if param["type"] == "percent":
        description = f"{param['min']}% to {param['max']}%"
        return (str | None, Field(default=None, alias=alias, pattern=_PERCENT, description=description))
    if param.get("options"):
        return (_literal(param["options"]) | None, Field(default=None, alias=alias))
    pattern = param.get("pattern")
    return (str | None, Field(default=None, alias=alias, pattern=anchored_pattern(pattern) if pattern else None))


def anchored_pattern(pattern: str) -> str:
    """A `text matching` pattern as the schema states it: the whole value must match."""
    return f"^(?:{pattern})$"


def model_name(prefix: str, name: str) -> str:
    """`CommandAutoRelease` for prefix `Command` and transition `auto_release`.

    One-to-one on names: an `_` is dropped only before a letter, which is
    upper-cased, so `a_1` (`CommandA_1`) and `a1` (`CommandA1`), or `a__b`
    and `a_b`, keep definitions of their own. Names are lower-case, so each
    upper-case letter marks exactly one dropped `_`.
    """
    return prefix + re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name[:1].upper() + name[1:])


def build_event_schema(table: Json) -> Json:
    """The schema document: `$defs` for every command and event, `oneOf` over them."""
    roles = [r["name"] for r in table["roles"]]
    per_agreement = [p for p in table["params"] if "value" not in p]
    params_model = create_model(  # type: ignore[call-overload]
        "Params",
        __base__=_Closed,
        **{f"param_{index}": _param_field(p) for index, p in enumerate(per_agreement)},
    )
    actor_model = create_model(
        "Actor",
        __base__=_Closed,
        id=(str, Field(min_length=1, max_length=200)),
        role=(_literal(roles), ...),
    )
    # One command model and one event model, generated once; each transition
    # gets a copy whose `transition` property is pinned to its id. Building a
    # pydantic model per transition would cost a second per 500 transitions.
    command = create_model(
        "Command",
        __base__=_Closed,
        kind=(_literal(["command"]), ...),
        agreement=(str, Field(min_length=1, max_length=200)),
        transition=(str, ...),
        actor=(actor_model, ...),
        params=(params_model, Field(default_factory=params_model)),
        idempotency_key=(str, Field(min_length=1, max_length=200)),
        expected_version=(int, Field(ge=0)),
    )
    event = create_model(
        "Event",
        __base__=_Closed,
        kind=(_literal(["event"]), ...),
        agreement=(str, Field(min_length=1)),
        transition=(str, ...),
        sequence=(int, Field(ge=1)),
        version=(int, Field(ge=1)),
        actor=(actor_model, ...),
        params=(params_model, ...),
        at=(int, Field(ge=0, description="trusted commit time, seconds since the epoch")),
        postings=(list[Posting], ...),
        previous_hash=(str | None, ...),
        hash=(str, Field(pattern=r"^sha256:[0-9a-f]{64}$")),
    )
    defs: dict[str, Any] = {}
    templates: dict[str, dict[str, Any]] = {}
    for model in (command, event):
        schema = model.model_json_schema(ref_template="#/$defs/{model}")
        defs.update(schema.pop("$defs", {}))
        templates[model.__name__] = schema
    refs: list[dict[str, str]] = []
    for transition in table["transitions"]:
        tid = transition["id"]
        for prefix, template in templates.items():
            name = model_name(prefix, tid)
            properties = dict(template["properties"])
            properties["transition"] = {"const": tid, "title": "Transition", "type": "string"}
            defs[name] = {**template, "title": name, "properties": properties}
            refs.append({"$ref": f"#/$defs/{name}"})
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"urn:pactwright:{table['pact']['id']}:{table['pact']['version']}:events",
        "title": f"commands and events of {table['pact']['id']} {table['pact']['version']}",
        "oneOf": refs,
        "$defs": dict(sorted(defs.items())),
    }
