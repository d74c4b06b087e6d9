"""schemathesis against a live `pactwright serve` (a real process on loopback, PostgreSQL store), from the
OpenAPI document the service publishes.

Two runs, both bounded and seeded so that CI is reproducible:

- every operation fuzzed with schema-valid and schema-invalid data, one
  pytest case per operation (`APIOperation.as_strategy` under Hypothesis;
  schemathesis's own `pytest.from_fixture` fails on this pytest);
- the stateful run (`as_state_machine`): sequences chained by the OpenAPI
  links the service publishes (open -> submit -> show, events, evidence),
  with realistic bodies mixed into what schemathesis draws for
  `openAgreement` and `submitCommand` (the marketplace's pact id, parties,
  prices and transitions), and each command sent with the token of the
  party that holds its role, so that sequences reach committed commands
  rather than stopping at the first refusal. The test asserts that at least
  three sequences opened an agreement, committed a command on it and then
  read it back.

Every response passes: no 5xx (`not_a_server_error`), the status, media
type, headers and body the OpenAPI document declares for it, a
schema-invalid request refused with a 4xx (fuzzing run), and
`problem_documents`: every error is `application/problem+json` with a `code`
of the form PWnnn, a `status` equal to the HTTP status and a `type` naming
the code. Requests carry a real bearer token issued by
`runtime.tokens.issue_token` to a registered party.

`positive_data_acceptance` is not run: it asks that every schema-valid
request be answered with a 2xx (or 401, 403, 404, 409), and it flags the
runtime's refusals of schema-valid requests for reasons of the pact itself,
which are 422 with their PW codes: a price outside the pact's bounds
(`"price": "0.00"`, PW503, as the stateful run sends), a param the pact does
not have, a role the pact does not know. Those refusals are the behaviour
under test, not a defect, and `problem_documents` checks each of them.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    missing_required_header,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from pactwright.service._routes import openapi
from tests.test_service_env import PARTIES, Env, service_env
from tests.test_service_process import serving

SEED = 20260601
FUZZ_EXAMPLES = 20  # per operation
SCENARIOS, STEPS = 40, 10  # stateful sequences, and at most this many calls each
ROLE_OF = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
# the marketplace's transitions and the role each is made by (`scheduler` is its clock: no token may act in it)
TRANSITIONS = (
    ("fund", "buyer"), ("deliver", "seller"), ("release", "buyer"), ("dispute", "buyer"),
    ("rule_for_buyer", "arbiter"), ("rule_for_seller", "arbiter"), ("auto_release", "scheduler"),
)  # fmt: skip
# the stateful run's operations: the others on an agreement (evidence verification, review page) are fuzzed
AGREEMENT_OPERATIONS = ("openAgreement", "submitCommand", "showAgreement", "listEvents", "showEvidence")
_CODE = re.compile(r"PW[0-9]{3}")


def problem_documents(ctx: Any, response: schemathesis.Response, case: schemathesis.Case) -> bool | None:
    """Every error is an RFC 9457 problem document carrying its PW code and its own status."""
    if response.status_code < 400:
        return None
    media = response.headers.get("content-type", [""])[0]
    assert media == "application/problem+json", f"{response.status_code} answered as `{media}`"
    doc = response.json()
    assert isinstance(doc, dict), doc
    code = doc.get("code")
    assert isinstance(code, str) and _CODE.fullmatch(code), f"no PW code in {doc}"
    assert doc.get("status") == response.status_code, doc
    assert doc.get("type") == f"urn:pactwright:error:{code.lower()}", doc
    assert "Traceback" not in response.content.decode("utf-8", "replace")
    return True


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, missing_required_header, problem_documents]  # fmt: skip


@dataclass
class Live:
    env: Env
    base: str
    seen: list[list[tuple[str, int, str]]] = field(default_factory=list)  # per sequence: (operation, status, id)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    directory = tmp_path_factory.mktemp("schemathesis")
    with service_env("postgresql", directory) as env:
        command = [sys.executable, "-m", "pactwright.cli.main", "serve", "--store", env.store, "--ledger", env.ledger,
                   "--port", "0"]  # fmt: skip
        with serving(command) as (base, process):
            yield Live(env, base)
            assert process.poll() is None, "serve stopped during the run"


def _config(mode: str, token: str) -> schemathesis.Config:
    """Seeded; `token` as the document's `bearer` scheme (so negative cases can leave it out or spoil it); the
    coverage phase (every boundary of every schema: minutes here) left out."""
    return schemathesis.Config.from_dict({"seed": SEED, "generation": {"mode": mode},
                                          "auth": {"openapi": {"bearer": {"bearer": token}}},
                                          "phases": {"coverage": {"enabled": False}}})  # fmt: skip


@pytest.fixture(scope="module")
def fuzz_schema(live: Live) -> Any:
    return schemathesis.openapi.from_url(f"{live.base}/openapi.json", config=_config("all", live.env.tokens["alice"]))


OPERATIONS = sorted((method.upper(), path) for path, ops in openapi()["paths"].items() for method in ops)


@pytest.mark.parametrize(("method", "path"), OPERATIONS, ids=[f"{m} {p}" for m, p in OPERATIONS])
def test_every_operation_fuzzed(method: str, path: str, fuzz_schema: Any, live: Live) -> None:
    """Positive and negative data for one operation, as the live service's own document describes it."""
    operation = fuzz_schema[path][method]
    cases = st.one_of(operation.as_strategy(GenerationMode.POSITIVE), operation.as_strategy(GenerationMode.NEGATIVE))

    @seed(SEED)
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=cases)
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(checks=[*CHECKS, negative_data_rejection])

    run()


# Stateful ------------------------------------------------------------------------------------------------

_IDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=24)
_PRICES = st.integers(min_value=0, max_value=1_100_000).map(lambda cents: f"{cents // 100}.{cents % 100:02d}")


def _open_bodies() -> st.SearchStrategy[dict[str, Any]]:
    """Opening bodies the marketplace accepts (and a few prices outside its range, refused with their code)."""
    return st.builds(lambda agreement, price: {"pact_id": "marketplace.milestone", "id": agreement,
                                               "params": {"price": price}, "parties": PARTIES},
                     _IDS, _PRICES)  # fmt: skip


def _commands() -> st.SearchStrategy[dict[str, Any]]:
    """The marketplace's commands: mostly in the role that may make each, sometimes in another one; `fund`
    and `deliver` (the way out of a new agreement's first two states) more often than the rest."""
    proper = st.sampled_from(TRANSITIONS).map(lambda pair: {"transition": pair[0], "role": pair[1]})
    early = st.sampled_from(TRANSITIONS[:2]).map(lambda pair: {"transition": pair[0], "role": pair[1]})
    other = st.builds(lambda pair, role: {"transition": pair[0], "role": role}, st.sampled_from(TRANSITIONS),
                      st.sampled_from(sorted(ROLE_OF)))  # fmt: skip
    return st.one_of(early, proper, other)


_FRESH = itertools.count()


def _fresh(body: Any) -> Any:
    """The body with its agreement id made unique (a counter, not a draw): Hypothesis replays a sequence to
    check it, and a replayed `openAgreement` must open again rather than meet the agreement it opened before."""
    if isinstance(body, dict) and isinstance(body.get("id"), str):
        return {**body, "id": f"{body['id'][:180]}-{next(_FRESH)}"}
    return body


def _realistic(context: schemathesis.HookContext, body: Any) -> st.SearchStrategy[Any]:
    operation = context.operation.label if context.operation is not None else ""
    if operation == "POST /v1/agreements":
        return st.one_of(st.just(body), _open_bodies(), _open_bodies(), _open_bodies()).map(_fresh)
    if operation == "POST /v1/agreements/{id}/commands":
        return st.one_of(st.just(body), _commands(), _commands(), _commands())
    return st.just(body)


@pytest.fixture(scope="module")
def stateful_schema(live: Live) -> Any:
    loaded = schemathesis.openapi.from_url(
        f"{live.base}/openapi.json", config=_config("positive", live.env.tokens["alice"])
    )
    schema = loaded.include(operation_id=list(AGREEMENT_OPERATIONS))
    schema.hooks.register_hook_with_name(_realistic, "flatmap_body")
    return schema


def _agreement_of(case: schemathesis.Case, response: schemathesis.Response) -> str:
    if case.operation.label == "POST /v1/agreements" and response.status_code == 201:
        return str(response.json()["id"])
    return str((case.path_parameters or {}).get("id", ""))


def test_stateful_sequences_open_submit_show(stateful_schema: Any, live: Live) -> None:
    base = stateful_schema.as_state_machine()

    class Sequences(base):  # type: ignore[misc, valid-type]
        def setup(self) -> None:
            live.seen.append([])
            super().setup()

        def get_call_kwargs(self, case: schemathesis.Case) -> dict[str, Any]:
            role = case.body.get("role") if isinstance(case.body, dict) else None
            return {"headers": live.env.auth(ROLE_OF.get(role, "alice") if isinstance(role, str) else "alice")}

        def after_call(self, response: schemathesis.Response, case: schemathesis.Case) -> None:
            super().after_call(response, case)
            live.seen[-1].append((case.operation.label, response.status_code, _agreement_of(case, response)))

        def validate_response(self, response: schemathesis.Response, case: schemathesis.Case,
                              additional_checks: Any = None, **kwargs: Any) -> None:  # fmt: skip
            case.validate_response(response, checks=CHECKS, transport_kwargs=kwargs or None, recorder=self.recorder)

    Sequences.run(settings=settings(max_examples=SCENARIOS, stateful_step_count=STEPS, deadline=None, database=None,
                                    derandomize=True,
                                    suppress_health_check=list(HealthCheck)))  # fmt: skip
    chains = [steps for steps in live.seen if _opened_submitted_shown(steps)]
    calls = sum(len(steps) for steps in live.seen)
    print(f"\nstateful: {len(live.seen)} sequences, {calls} calls, {len(chains)} open -> commit -> read back")
    assert len(chains) >= 3, live.seen


_READS = ("GET /v1/agreements/{id}", "GET /v1/agreements/{id}/events", "GET /v1/agreements/{id}/evidence")


def _opened_submitted_shown(steps: list[tuple[str, int, str]]) -> bool:
    """A sequence that opened an agreement, committed a command on it, then read it back (show, its events or
    its evidence: each answers from the committed state)."""
    opened = {
        agreement for operation, status, agreement in steps if (operation, status) == ("POST /v1/agreements", 201)
    }
    committed: set[str] = set()
    for operation, status, agreement in steps:
        if operation == "POST /v1/agreements/{id}/commands" and status == 201 and agreement in opened:
            committed.add(agreement)
        elif operation in _READS and status == 200 and agreement in committed:
            return True
    return False


def test_the_published_document_links_open_to_submit_and_show(live: Live) -> None:
    import httpx2

    doc = httpx2.get(f"{live.base}/openapi.json", timeout=30).json()
    opened = doc["paths"]["/v1/agreements"]["post"]["responses"]["201"]["links"]
    assert opened["submitCommand"] == {"operationId": "submitCommand", "parameters": {"path.id": "$response.body#/id"}}
    assert opened["showAgreement"]["parameters"] == {"path.id": "$response.body#/id"}
    committed = doc["paths"]["/v1/agreements/{id}/commands"]["post"]["responses"]["201"]["links"]
    assert committed["showAgreement"]["parameters"] == {"path.id": "$response.body#/agreement"}
    operations = {op["operationId"] for ops in doc["paths"].values() for op in ops.values()}
    targets = {link["operationId"] for ops in doc["paths"].values() for op in ops.values()
               for response in op["responses"].values() for link in response.get("links", {}).values()}  # fmt: skip
    assert targets <= operations, targets - operations


@pytest.mark.parametrize(("query", "name"), [("parkd=true", "parkd"), ("parked=true&agreemnt=a1", "agreemnt"),
                                             ("=x", "")])  # fmt: skip
def test_an_unknown_query_parameter_is_refused_not_ignored(query: str, name: str, live: Live) -> None:
    """Found from a schemathesis report (`query: violates additionalProperties` accepted with 200): a misspelt
    filter was ignored, so `?parkd=true` listed every effect call instead of the parked ones. Bodies refuse
    unknown fields; so do queries now (PW684, naming the parameter), and nothing is listed."""
    import httpx2

    from tests.test_service_env import problem_of

    response = httpx2.get(f"{live.base}/v1/effects?{query}", headers=live.env.auth("ops"), timeout=30)
    doc = problem_of(response, 422, "PW684")
    assert doc["field"] == name
    assert doc["expected"] == "agreement, parked"
    listed = httpx2.get(f"{live.base}/v1/effects?parked=true&agreement=a1", headers=live.env.auth("ops"), timeout=30)
    assert listed.status_code == 200, listed.text
