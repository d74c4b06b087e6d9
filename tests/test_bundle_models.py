"""The bundle's typed contract: `transitions.json` and `model.json` through `pactwright/bundle_models.py`.

Every policy the project ships (the references, the planted bugs and their
fixes) compiles to documents that the kernel models accept and dump back
byte for byte, and the golden files on disk do too. A malformed document is
refused with a stable code by both readers: the verifier (PW301, PW304 for
an unknown operator) and the runtime (PW518), never with a KeyError. The
models import only the kernel, so a deploy host without the compiler stack
reads bundles through them.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import ValidationError

from pactwright.bundle_models import ModelDocument, TransitionTable, emitted, problem
from pactwright.canonical import canonical_bytes
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.errors import CommandError, VerifyError
from pactwright.runtime._agreement import bundle_of
from pactwright.runtime.store import StoredBundle
from pactwright.verifier.model import load_model
from tests.bundles import GOLDEN, GOLDEN_BUNDLES, POLICIES, REFERENCE

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(POLICIES.glob("*.pact")) + sorted((ROOT / "tests" / "planted").glob("*.pact"))
DOCUMENTS: dict[str, type[TransitionTable] | type[ModelDocument]] = {
    "transitions.json": TransitionTable,
    "model.json": ModelDocument,
}


@cache
def _compiled(path: Path) -> dict[str, bytes]:
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None, result.diagnostics
    return compile_candidate(result.candidate, result.source_map, path.name)


def _golden(name: str, document: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN_BUNDLES / name / document).read_bytes())
    return loaded


def test_every_shipped_policy_is_covered() -> None:
    assert len(SOURCES) > 40
    assert {p.stem for p in SOURCES} >= set(REFERENCE)


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_each_compiled_document_validates_and_round_trips_byte_identically(source: Path, document: str) -> None:
    data = _compiled(source)[document]
    model = DOCUMENTS[document].model_validate(json.loads(data))
    assert canonical_bytes(model.to_json()) == data


@pytest.mark.parametrize("name", GOLDEN)
@pytest.mark.parametrize("document", sorted(DOCUMENTS))
def test_the_golden_files_round_trip_byte_identically(name: str, document: str) -> None:
    data = (GOLDEN_BUNDLES / name / document).read_bytes()
    model = DOCUMENTS[document].model_validate(json.loads(data))
    assert canonical_bytes(model.to_json()) == data
    assert _compiled(POLICIES / f"{name}.pact")[document] == data


def test_the_corpus_exercises_each_nullable_and_optional_field_both_ways() -> None:
    """The round trips above mean something only if `null` and absence each occur, and their opposites."""
    seen: dict[str, set[bool]] = {}

    def note(what: str, present: bool) -> None:
        seen.setdefault(what, set()).add(present)

    for source in SOURCES:
        table = TransitionTable.model_validate(json.loads(_compiled(source)["transitions.json"]))
        model = ModelDocument.model_validate(json.loads(_compiled(source)["model.json"]))
        note("budget", table.budget is not None)
        for transition in table.transitions:
            note("guard", transition.guard is not None)
            note("approval", transition.approval is not None)
            note("ledger", transition.ledger is not None)
            for call in transition.effects:
                note("call amount", call.amount is not None)
        for effect in table.effects:
            note("effect ceiling", effect.ceiling is not None)
            note("effect strategy", effect.strategy is not None)
        for param in model.params:
            note("param fixed", param.fixed is not None)
            note("param samples", param.samples is not None)
        for deadline in model.deadlines:
            note("deadline stamp", deadline.stamp is not None)
    both = {"guard", "approval", "ledger", "call amount", "effect ceiling", "param fixed", "param samples", "budget"}
    assert {what for what, ways in seen.items() if ways == {True, False}} >= both, seen


# Malformed documents --------------------------------------------------------------

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: Any) -> Edit:
    def edit(doc: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node: Any = doc
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        if value is _DELETE:
            del node[key]
        else:
            node[key] = value

    return edit


_DELETE = object()
_GUARDED = next(i for i, t in enumerate(_golden("marketplace_milestone", "model.json")["transitions"]) if t["guard"])

MODEL_DEFECTS: dict[str, tuple[Edit, str, str]] = {
    # what is wrong: (edit, code, field the message names)
    "missing field": (_set("transitions/0/guard", _DELETE), "PW301", "transitions/0/guard"),
    "extra field": (_set("states/0/colour", "red"), "PW301", "states/0/colour"),
    "wrong type": (_set("currency/scale", "2"), "PW301", "currency/scale"),
    "bool for an int": (_set("bounds/max_depth", True), "PW301", "bounds/max_depth"),
    "unknown state": (_set("transitions/0/to", "nowhere"), "PW301", "transitions"),
    "unknown effect": (_set("effects", []), "PW301", "transitions"),
    "bad sample": (_set("params/1/samples/0", "12.5"), "PW301", "params/1"),
    "float-like money": (_set("transitions/0/postings/0/amount/value", "1e3"), "PW301", "transitions/0/postings"),
    "unknown operator": (_set(f"transitions/{_GUARDED}/guard/op", "xor"), "PW304", ""),
    "wrong arity": (_set(f"transitions/{_GUARDED}/guard/args", []), "PW301", f"transitions/{_GUARDED}/guard"),
}


@pytest.mark.parametrize("defect", sorted(MODEL_DEFECTS))
def test_the_verifier_refuses_a_malformed_model_with_a_clear_code(defect: str) -> None:
    edit, code, field = MODEL_DEFECTS[defect]
    name = "support_refund" if defect == "unknown effect" else "marketplace_milestone"
    doc = _golden(name, "model.json")
    if defect == "float-like money":
        doc["transitions"][0]["postings"][0]["amount"] = {"op": "lit", "type": "money", "value": "1"}
    edit(doc)
    with pytest.raises(VerifyError) as caught:
        load_model(doc)
    assert caught.value.code == code
    if code == "PW304":
        assert "`xor`" in caught.value.message
    else:
        assert caught.value.field is not None and caught.value.field.startswith(field), caught.value.field
        assert caught.value.file == "model.json"


def test_the_verifier_refuses_a_document_that_is_not_an_object_or_of_another_format() -> None:
    docs: list[object] = [[], {"format": "pactwright.model/99"}, {}]
    for doc in docs:
        with pytest.raises(VerifyError) as caught:
            load_model(cast(dict[str, Any], doc))
        assert caught.value.code == "PW301"


def test_the_verifier_indexes_the_validated_dump() -> None:
    doc = _golden("marketplace_milestone", "model.json")
    model = load_model(copy.deepcopy(doc))
    assert model.doc == doc
    assert model.transitions is model.doc["transitions"]


def _stored(files: dict[str, bytes]) -> StoredBundle:
    return StoredBundle(
        pact_id="marketplace.milestone",
        pact_version="1.0.0",
        manifest_hash="sha256:" + "0" * 64,
        files=files,
        activation=cast(Any, None),  # bundle_of reads only the files
    )


TABLE_DEFECTS: dict[str, Edit] = {
    "missing field": _set("transitions/0/ledger", _DELETE),
    "extra field": _set("accounts/0/balance", "0"),
    "wrong type": _set("states/0/final", "false"),
    "unknown operator": _set("invariants/0/expr/op", "xor"),
    "unknown account": _set("transitions/0/postings/0/source", "vault"),
    "bad share": _set("transitions/0/postings/0/rule/portions/0/share", "one tenth"),
    "bad amount source": _set("transitions/0/postings/0/amount_source/kind", "guess"),
    "null where a list is": _set("transitions/0/roles", None),
}


@pytest.mark.parametrize("defect", sorted(TABLE_DEFECTS))
def test_the_runtime_refuses_a_malformed_transition_table_with_pw518(defect: str) -> None:
    doc = _golden("marketplace_milestone", "transitions.json")
    TABLE_DEFECTS[defect](doc)
    with pytest.raises(CommandError) as caught:
        bundle_of(_stored({"transitions.json": canonical_bytes(doc)}))
    assert caught.value.code == "PW518"
    assert caught.value.file == "transitions.json" and caught.value.field


@pytest.mark.parametrize("data", [b"{", b'{"format": 1.5}', b"[]", b'{"format": "pactwright.transitions/9"}'])
def test_the_runtime_refuses_unreadable_json_with_pw518(data: bytes) -> None:
    with pytest.raises(CommandError) as caught:
        bundle_of(_stored({"transitions.json": data}))
    assert caught.value.code == "PW518"


def test_the_runtime_reads_the_golden_table_and_shares_the_read() -> None:
    data = (GOLDEN_BUNDLES / "marketplace_milestone" / "transitions.json").read_bytes()
    first, second = bundle_of(_stored({"transitions.json": data})), bundle_of(_stored({"transitions.json": data}))
    assert first.table is second.table and first.doc is second.doc
    assert canonical_bytes(first.doc) == data
    assert first.table.currency.asset == first.asset == "EUR/2"


# The models themselves --------------------------------------------------------------


@pytest.mark.parametrize(
    ("node", "kind"),
    [
        ({"op": "xor", "type": "bool"}, "unknown_operator"),
        ({"op": "not", "type": "bool"}, "operator_arity"),
        ({"op": "param", "type": "money"}, "operator_name"),
        ({"op": "lit", "type": "money"}, "operator_value"),
        ({"op": "lit", "type": "money", "value": "1.5"}, "number_shape"),
        ({"op": "now", "type": "money"}, "operator_type"),
        ({"op": "now", "type": "time", "args": []}, "empty_args"),
        ({"op": "now", "type": "date"}, "literal_error"),
    ],
)
def test_an_expression_node_is_checked(node: dict[str, Any], kind: str) -> None:
    doc = _golden("marketplace_milestone", "transitions.json")
    doc["invariants"][0]["expr"] = node
    with pytest.raises(ValidationError) as caught:
        TransitionTable.model_validate(doc)
    path, message, found = problem(caught.value)
    assert found == kind, message
    assert path.startswith("invariants/0/expr")


def test_the_emitter_guard_refuses_a_document_its_model_would_write_differently() -> None:
    doc = _golden("marketplace_milestone", "transitions.json")
    assert emitted(TransitionTable, doc).to_json() == doc
    doc["states"][0] = tuple(doc["states"][0].items())  # not JSON: validation refuses it
    with pytest.raises(ValidationError):
        emitted(TransitionTable, doc)
    changed = _golden("marketplace_milestone", "transitions.json")
    changed["transitions"][0]["from"] = tuple(changed["transitions"][0]["from"])  # a dump would write a list
    with pytest.raises(ValueError, match="does not reproduce"):
        emitted(TransitionTable, changed)


def test_the_documents_are_frozen() -> None:
    table = TransitionTable.model_validate(_golden("marketplace_milestone", "transitions.json"))
    with pytest.raises(ValidationError):
        table.states[0].name = "other"  # type: ignore[misc]


_CHILD = """
import json, sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("lark", "jinja2", "networkx", "z3"):
            raise ImportError(name)
        return None

sys.meta_path.insert(0, Block())
from pactwright.bundle_models import ModelDocument, TransitionTable
import pactwright.runtime._agreement
TransitionTable.model_validate(json.loads(open(sys.argv[1], "rb").read()))
ModelDocument.model_validate(json.loads(open(sys.argv[2], "rb").read()))
heavy = ("pactwright.compiler", "pactwright.verifier", "pactwright.templates", "lark", "jinja2", "networkx", "z3")
print(sorted(m for m in sys.modules if m.startswith(heavy)))
"""


def test_the_models_import_only_the_kernel() -> None:
    golden = GOLDEN_BUNDLES / "marketplace_milestone"
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(golden / "transitions.json"), str(golden / "model.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
