"""Related amounts (new in 1.1) through the compiler and the verifier.

`param partial: money between 0.00 and price`: the candidate records the
name (`max_param`), the bundle's documents add the literal hull, and the
symbolic explorer decides guards and invariants over both params exactly,
with witnesses that satisfy the relation. The diagnostics of every misuse are
rows of tests/test_diagnostics_table.py; the runtime's refusal is in
tests/test_runtime_related_amounts.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from pactwright.canonical import load_json
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.pipeline import check_bytes
from pactwright.compiler.related import Bounds, cycle, hull
from pactwright.errors import VerifyError
from pactwright.verifier.explorer import Bounds as SearchBounds
from pactwright.verifier.explorer import Explorer
from pactwright.verifier.model import load_model
from pactwright.verifier.verify import VerifyOptions, verify_files

HEAD = """pact "t" version "1.0.0"
currency EUR scale 2
role a
account world "world" external
account card "card" external
account escrow "escrow"
param price: money between 1.00 and 500.00
"""


def _files(source: str) -> dict[str, bytes]:
    result = check_bytes(source.encode())
    assert result.candidate is not None, result.diagnostics
    return compile_candidate(result.candidate, result.source_map, "t.pact")


def _verdicts(source: str) -> dict[str, Any]:
    report = verify_files(_files(source), VerifyOptions(SearchBounds(), mutants=False, proofs=False))
    return {i["name"]: i["verdict"] for i in report["invariants"]} | {"": report}


def _policy(partial: str, guard: str, invariant: str) -> str:
    return HEAD + (
        f"param partial: money between {partial}\n"
        "state s initial\nstate e final\n"
        "transition go: s -> e {\n  by a\n"
        f"  when {guard}\n"
        "  transfer price from world to escrow\n  transfer partial from escrow to card\n}\n"
        f"invariant check: {invariant}\n"
    )


def test_hull_follows_the_relations_both_ways() -> None:
    graph = {
        "b": Bounds(low=0, high=1000),
        "a": Bounds(low=300, high_ref="b"),
        "c": Bounds(low_ref="b", high=200),
    }
    assert hull(graph) == {"b": (300, 200), "a": (300, 200), "c": (300, 200)}
    assert hull({"price": Bounds(low=100, high=500), "p": Bounds(low=0, high_ref="price")})["p"] == (0, 500)
    assert cycle({"a": Bounds(low=0, high_ref="b"), "b": Bounds(low=0, high_ref="a")}) == ["a", "b", "a"]
    assert cycle(graph) is None


def test_the_candidate_names_the_param_and_the_documents_add_the_hull() -> None:
    files = _files(_policy("0.00 and price", "price > 0.00", "price > 0.00"))
    candidate = {p["name"]: p for p in load_json(files["candidate.json"])["params"]}
    assert candidate["partial"] == {"name": "partial", "type": "money", "min": "0", "max_param": "price", "options": []}
    assert "max_param" not in candidate["price"] and "min_param" not in candidate["price"]
    for document in ("transitions.json", "model.json"):
        params = {p["name"]: p for p in load_json(files[document])["params"]}
        assert (params["partial"]["min"], params["partial"]["max"], params["partial"]["max_param"]) == (
            "0",
            "50000",
            "price",
        )


@pytest.mark.parametrize(
    ("guard", "invariant", "expected"),
    [
        # Always enabled under the relation, though the intervals alone (0..500 vs 1..500) cannot say so.
        ("partial <= price", "balance(escrow) >= 0", "holds-to-bound"),
        ("price > 0.00", "balance(escrow) >= 0", "holds-to-bound"),
        # Never enabled: nothing is reached past `s`, so the final-state invariant holds vacuously.
        ("partial > price", "not final", "holds-to-bound"),
        ("partial == price", "balance(escrow) == 0", "holds-to-bound"),
        ("partial < price", "balance(escrow) == 0", "violated"),
    ],
)
def test_guards_and_invariants_over_related_params_are_exact(guard: str, invariant: str, expected: str) -> None:
    assert _verdicts(_policy("0.00 and price", guard, invariant))["check"] == expected


def test_without_the_relation_the_same_refund_can_overdraw_the_escrow() -> None:
    verdicts = _verdicts(_policy("0.00 and 500.00", "price > 0.00", "balance(escrow) >= 0"))
    assert verdicts["funds_available"] == "violated"  # the runtime would refuse `go` where partial > price
    assert _verdicts(_policy("0.00 and price", "price > 0.00", "balance(escrow) >= 0"))["funds_available"] != "violated"


def test_the_witness_satisfies_the_relation_and_is_the_smallest() -> None:
    report = _verdicts(
        _policy("0.00 and price", "price > 0.00", "balance(escrow) <= 0.00 or balance(escrow) >= 10.00")
    )[""]
    (found,) = report["counterexamples"]
    assert found["params"][0] == {"partial": "0.00", "price": "1.00"}


def test_a_lower_bound_named_by_a_param() -> None:
    source = _policy("0.00 and 500.00", "price > 0.00", "price > 0.00").replace(
        "param partial: money between 0.00 and 500.00", "param partial: money between price and 600.00"
    )
    source = source.replace("invariant check: price > 0.00", "invariant check: balance(escrow) <= 0")
    report = _verdicts(source)
    assert report["check"] == "holds-to-bound"


def test_a_model_whose_relations_admit_no_values_is_refused() -> None:
    doc = load_json(_files(_policy("0.00 and price", "price > 0.00", "price > 0.00"))["model.json"])
    for param in doc["params"]:
        if param["name"] == "price":
            param["min"] = param["max"] = "100"
            param["samples"] = ["100"]
        if param["name"] == "partial":
            param["min"], param["max"] = "200", "300"
            param["samples"] = ["200"]
    with pytest.raises(VerifyError) as caught:
        Explorer(load_model(doc), SearchBounds())
    assert caught.value.code == "PW309"
    assert "partial <= price" in caught.value.message
