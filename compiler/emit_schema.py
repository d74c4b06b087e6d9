"""`events.schema.json`: JSON Schema (draft 2020-12) for every command and event.

Generated from pydantic models built per policy, so a client can validate a
command before sending it and the runtime's own validation and the schema
cannot drift apart. Money travels as a decimal string of minor units.
"""

from __future__ import annotations

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
    if param["type"] == "money":
        description = f"minor units, {param['min']} to {param['max']} inclusive"
        return (str | None, Field(default=None, pattern=_MINOR_UNITS, description=description))
    if param["type"] == "percent":
        return (str | None, Field(default=None, pattern=_PERCENT, description=f"{param['min']}% to {param['max']}%"))
    if param.get("options"):
        return (_literal(param["options"]) | None, Field(default=None))
    pattern = param.get("pattern")
    return (str | None, Field(default=None, pattern=f"^(?:{pattern})$" if pattern else None))


def model_name(prefix: str, name: str) -> str:
    """`CommandAutoRelease` for prefix `Command` and transition `auto_release`."""
    return prefix + "".join(part.capitalize() for part in name.split("_"))


def build_event_schema(table: Json) -> Json:
    """The schema document: `$defs` for every command and event, `oneOf` over them."""
    roles = [r["name"] for r in table["roles"]]
    per_agreement = [p for p in table["params"] if "value" not in p]
    params_model = create_model(  # type: ignore[call-overload]
        "Params",
        __base__=_Closed,
        **{p["name"]: _param_field(p) for p in per_agreement},
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
