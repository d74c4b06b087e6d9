"""The compiled bundle: golden bytes, closure of the manifest, traceability."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pactwright.canonical import hash_bytes, load_json
from pactwright.manifest import MANIFEST_PATH, build_manifest
from tests.bundles import GOLDEN, GOLDEN_BUNDLES, POLICIES, reference_bundle


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", GOLDEN)
def test_bundle_matches_golden_files_byte_for_byte(name: str) -> None:
    golden = _tree(GOLDEN_BUNDLES / name)
    built = reference_bundle(name)
    assert sorted(built) == sorted(golden), "file set differs; run `make golden` and review the diff"
    for path in built:
        assert built[path] == golden[path], f"{name}/{path} differs from its golden file"


@pytest.mark.parametrize("name", GOLDEN)
def test_manifest_lists_every_file_and_nothing_else(name: str) -> None:
    files = reference_bundle(name)
    manifest = load_json(files[MANIFEST_PATH], require_canonical=True)
    listed = {a["path"]: a for a in manifest["artifacts"]}
    assert set(listed) == set(files) - {MANIFEST_PATH}
    for path, entry in listed.items():
        assert entry["sha256"] == hash_bytes(files[path])
        assert entry["size"] == len(files[path])
    assert manifest["candidate_hash"] == hash_bytes(files["candidate.json"])


@pytest.mark.parametrize("name", GOLDEN)
def test_every_json_artifact_is_canonical(name: str) -> None:
    for path, data in reference_bundle(name).items():
        if path.endswith(".json"):
            load_json(data, require_canonical=True)


@pytest.mark.parametrize("name", GOLDEN)
def test_manifest_hash_changes_with_any_byte_of_any_artifact(name: str) -> None:
    files = {p: d for p, d in reference_bundle(name).items() if p != MANIFEST_PATH}
    manifest = load_json(reference_bundle(name)[MANIFEST_PATH])

    def manifest_hash(variant: dict[str, bytes]) -> str:
        doc = build_manifest(
            pact_id=manifest["pact"]["id"],
            pact_version=manifest["pact"]["version"],
            compiler_version=manifest["compiler"]["version"],
            candidate_hash=manifest["candidate_hash"],
            files=variant,
        )
        from pactwright.canonical import hash_document

        return hash_document(doc)

    original = manifest_hash(files)
    assert original == hash_bytes(reference_bundle(name)[MANIFEST_PATH])
    seen = {original}
    for path, data in files.items():
        for index in {0, len(data) // 2, len(data) - 1}:
            mutated = bytearray(data)
            mutated[index] ^= 0x01
            changed = manifest_hash({**files, path: bytes(mutated)})
            assert changed not in seen, f"flipping byte {index} of {path} did not change the manifest hash"
            seen.add(changed)


def _resolve_pointer(document: object, pointer: str) -> object:
    node = document
    for token in pointer.lstrip("/").split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        node = node[int(token)] if isinstance(node, list) else node[token]  # type: ignore[index]
    return node


@pytest.mark.parametrize("name", GOLDEN)
def test_every_clause_reaches_its_implementation(name: str) -> None:
    files = reference_bundle(name)
    trace = load_json(files["trace.json"])
    source = (POLICIES / f"{name}.pact").read_text()
    labels = {line.split('"')[1] for line in source.splitlines() if line.startswith("clause ")}
    assert {c["clause"] for c in trace["clauses"]} == labels
    for clause in trace["clauses"]:
        assert clause["transitions"] or clause["invariants"] or clause.get("properties")
        for item in trace["transitions"] + trace["invariants"] + trace.get("properties", []):
            if item["clause"] != clause["clause"]:
                continue
            span = item["span"]
            assert f'clause "{clause["clause"]}"' in source.splitlines()[span["line"] - 1]
            for artifact in item["artifacts"]:
                data = files[artifact["path"]]
                if "pointer" in artifact:
                    target = _resolve_pointer(json.loads(data), artifact["pointer"])
                    key = item.get("id") or item.get("name")
                    assert isinstance(target, dict)
                    assert (
                        key in (target.get("id"), target.get("name"), target.get("title"))
                        or str(target.get("properties", {}).get("transition", {}).get("const")) == key
                    )
                else:
                    first, last = artifact["lines"]
                    lines = data.decode().splitlines()
                    assert 1 <= first <= last <= len(lines)
                    if "posting" in artifact:
                        assert lines[first - 1].startswith("send ") and lines[last - 1] == ")"


def test_explain_prints_the_chain_for_a_clause(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    cli = [sys.executable, "-m", "pactwright.cli.main"]
    subprocess.run([*cli, "compile", str(POLICIES / "marketplace_milestone.pact"), "-o", str(out)], check=True)
    shown = subprocess.run([*cli, "explain", str(out), "--clause", "4.1"], capture_output=True, text=True, check=True)
    assert "transition release: delivered -> released" in shown.stdout
    assert "ledger/release.num:" in shown.stdout and "transitions.json#/transitions/" in shown.stdout
    missing = subprocess.run([*cli, "explain", str(out), "--clause", "99"], capture_output=True, text=True)
    assert missing.returncode == 1 and "PW202" in missing.stderr


def test_compile_refuses_a_policy_with_blockers_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pact"
    bad.write_text('pact "x" version "1"\ncurrency EUR scale 2\nstate a initial\n')
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", "compile", str(bad), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert "error[PW124]" in done.stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.pact"]


def test_compile_never_overwrites_a_directory_that_is_not_a_bundle(tmp_path: Path) -> None:
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    done = subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", "compile", str(POLICIES / "support_refund.pact"), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert (out / "notes.txt").read_text() == "keep me"
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_recompiling_replaces_a_bundle_whole(tmp_path: Path) -> None:
    out = tmp_path / "b"
    cli = [sys.executable, "-m", "pactwright.cli.main", "compile"]
    subprocess.run(
        [*cli, str(POLICIES / "marketplace_milestone.pact"), "-o", str(out)], check=True, capture_output=True
    )
    subprocess.run([*cli, str(POLICIES / "support_refund.pact"), "-o", str(out)], check=True, capture_output=True)
    assert _tree(out) == reference_bundle("support_refund")
    assert [p.name for p in tmp_path.iterdir()] == ["b"], "no staging directories left behind"


# Declared effect amounts (language.md "Effects that move money") ------------------------------

PAYOUT = """pact "psp.payout" version "1.0.0"
currency EUR scale 2
default deny
role agent
param payout: money between 1.00 and 200.00
param fee: money = 2.50
param order_id: text matching "O-[0-9]{1,9}"
account escrow "escrow:{agreement}"
account world "world" external
rule R1 allow
effect psp_payout {
  risk R1
  reversibility irreversible
  ceiling 100.00
  strategy idempotent
  key order_id
  amount payout
  consequence "{payout} will be paid for order {order_id}."
}
effect credit { risk R1 reversibility compensable strategy compensate with notify }
effect notify { risk R1 reversibility not_applicable }
state open initial
state funded
state paid final
transition fund: open -> funded {
  by agent
  transfer payout + fee from world to escrow
}
transition pay: funded -> paid {
  by agent
  call notify
  call psp_payout
  call credit amount fee * 2
  transfer fee from escrow to world
  transfer payout from escrow to world
}
"""


def _compiled(text: str) -> tuple[dict[str, object], dict[str, object], list[str]]:
    from pactwright.compiler.bundle import compile_candidate
    from pactwright.compiler.pipeline import check_text

    result = check_text(text)
    assert result.candidate is not None, [f"{d.code} {d.message}" for d in result.diagnostics]
    files = compile_candidate(result.candidate, result.source_map, "payout.pact")
    warnings = [d.code for d in result.diagnostics]
    return json.loads(files["model.json"]), json.loads(files["transitions.json"]), warnings


def test_each_call_carries_exactly_the_declared_amount() -> None:
    model, table, _ = _compiled(PAYOUT)
    pay = next(t for t in model["transitions"] if t["id"] == "pay")
    calls = {c["effect"]: c for c in pay["effects"]}
    # Two transfers and no money key: the old guess would have said nothing; the declaration decides.
    assert calls["psp_payout"]["amount"] == {"op": "param", "type": "money", "name": "payout"}
    assert calls["credit"]["amount"] == {
        "op": "*",
        "type": "money",
        "args": [{"op": "param", "type": "money", "name": "fee"}, {"op": "lit", "type": "int", "value": "2"}],
    }
    assert calls["notify"]["amount"] is None
    assert [c["money_moving"] for c in pay["effects"]] == [False, True, True]
    table_pay = next(t for t in table["transitions"] if t["id"] == "pay")
    assert table_pay["effects"] == pay["effects"], "transitions.json and model.json describe calls alike"


def test_effects_say_whether_they_move_money_in_both_documents() -> None:
    model, table, _ = _compiled(PAYOUT)
    for document in (model, table):
        flags = {e["name"]: e["money_moving"] for e in document["effects"]}
        assert flags == {"credit": True, "notify": False, "psp_payout": True}
    declared = next(e for e in model["effects"] if e["name"] == "psp_payout")
    assert declared["amount"] == {"op": "param", "type": "money", "name": "payout"}


def test_a_payout_above_the_ceiling_is_carried_as_the_payout() -> None:
    """A 120.49 payout under a 100.00 ceiling: the model carries `payout`, so the verifier sees 120.49."""
    model, _, warnings = _compiled(PAYOUT)
    assert "PW152" in warnings  # check says the ceiling is below what the amount can be
    site = next(c for t in model["transitions"] for c in t["effects"] if c["effect"] == "psp_payout")
    ceiling = int(next(e for e in model["effects"] if e["name"] == "psp_payout")["ceiling"])
    payout = next(p for p in model["params"] if p["name"] == "payout")
    assert site["amount"] == {"op": "param", "type": "money", "name": "payout"}
    assert ceiling == 10000
    assert int(payout["min"]) <= 12049 <= int(payout["max"])  # 120.49 is a value the amount takes
    assert ceiling < 12049


def test_no_amount_is_guessed_for_an_effect_that_moves_no_money() -> None:
    text = PAYOUT.replace("call psp_payout\n", "").replace("call credit amount fee * 2\n", "")
    model, _, _ = _compiled(text)
    pay = next(t for t in model["transitions"] if t["id"] == "pay")
    assert pay["effects"] == [
        {"effect": "notify", "strategy": None, "risk": "R1", "amount": None, "money_moving": False}
    ]
