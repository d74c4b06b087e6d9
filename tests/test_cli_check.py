"""`pactwright check` as a user and a CI system run it: a real process, real files.

Covers the text layout (`file:line:col: error[PWnnn]: message`, source line,
caret, `help:`, summary) and the stream split (every diagnostic on stderr,
only `FILE: ok  candidate ...` lines on stdout), the JSON shape, SARIF 2.1.0
against the official schema plus GitHub code scanning's extra demands,
standard input (`-`), the exit-code contract, and `--emit-candidate`. Tests
assert codes and structure, not message wording.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from jsonschema import Draft4Validator

from pactwright.codes import CODES
from pactwright.compiler.pipeline import check_bytes

REPO = Path(__file__).resolve().parents[1]
POLICIES = REPO / "policies"
MARKETPLACE = "policies/marketplace_milestone.pact"
SARIF_SCHEMA = Path(__file__).resolve().parent / "schemas" / "sarif-schema-2.1.0.json"
ERRORS_MD = REPO / "docs" / "errors.md"
HASH = re.compile(r"sha256:[0-9a-f]{64}")
OK_LINE = re.compile(rf"^(?P<file>.+): ok  candidate (?P<hash>{HASH.pattern})$")
APPROVAL_LINE = "  approval by refund_approver not requester\n"


def _command() -> list[str]:
    script = Path(sys.executable).with_name("pactwright")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "pactwright.cli.main"]


def pw(*args: str, cwd: Path = REPO, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `pactwright ARGS...` in `cwd`, feeding it `stdin`, and capture everything."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED",)}
    return subprocess.run(
        [*_command(), *args],
        cwd=cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        timeout=120,
        check=False,
    )


def in_process_hash(path: Path) -> str:
    result = check_bytes(path.read_bytes())
    assert result.candidate is not None
    return result.candidate.hash()


@pytest.fixture
def bad_policy(tmp_path: Path) -> Path:
    """The spec's blocker example: an R4 effect called without an approval (PW131)."""
    source = (POLICIES / "support_refund.pact").read_text("utf-8")
    assert APPROVAL_LINE in source
    path = tmp_path / "refund.pact"
    path.write_text(source.replace(APPROVAL_LINE, "", 1), "utf-8")
    return path


@pytest.fixture
def multi_error_policy(tmp_path: Path) -> Path:
    """Three blockers on three lines, to check ordering and every caret."""
    path = tmp_path / "multi.pact"
    path.write_text(
        'pact "multi" version "1.0.0"\n'
        "currency EUR scale 2\n"
        "role buyer\n"
        "param price: money between 1.005 and 10.00\n"
        'account world "world" external\n'
        'account escrow "escrow:{agreement}"\n'
        "state draft initial\n"
        "state paid final\n"
        "transition pay: draft -> paid {\n"
        "  by buyre\n"
        "  transfer price from world to escrw\n"
        "}\n",
        "utf-8",
    )
    return path


@pytest.fixture
def warning_policy(tmp_path: Path) -> Path:
    """support_refund.pact without `default deny`: passes, with warning PW153."""
    source = (POLICIES / "support_refund.pact").read_text("utf-8")
    lines = [line for line in source.splitlines(keepends=True) if not line.startswith("default deny")]
    path = tmp_path / "warn.pact"
    path.write_text("".join(lines), "utf-8")
    return path


# Text output --------------------------------------------------------------------

_HEADLINE = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning)\[(?P<code>PW\d{3})\]: (?P<msg>.+)$"
)


def _blocks(text: str) -> list[list[str]]:
    """Split rendered diagnostics into one list of lines per diagnostic."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if _HEADLINE.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    return blocks


def _codes(text: str) -> list[str]:
    """The codes of the rendered diagnostics in `text`, in order."""
    return [match["code"] for line in text.splitlines() if (match := _HEADLINE.match(line))]


def _assert_rendered(block: list[str], file: str, source: list[str], diag: dict[str, Any]) -> None:
    """One diagnostic: headline, gutter, source line, caret under the span, gutter, help."""
    head = _HEADLINE.match(block[0])
    assert head is not None, block[0]
    line, col = int(head["line"]), int(head["col"])
    assert (head["file"], line, col, head["code"], head["sev"]) == (
        file,
        diag["line"],
        diag["column"],
        diag["code"],
        diag["severity"],
    )
    assert head["msg"] == diag["message"]
    gutter = " " * len(str(line))
    assert block[1] == f"{gutter} |"
    assert block[2] == f"{line} | {source[line - 1]}"
    caret = block[3]
    assert caret.startswith(f"{gutter} | ")
    marks = caret[len(f"{gutter} | ") :]
    assert marks[: col - 1] == " " * (col - 1), "the caret starts under the span's first column"
    width = len(marks[col - 1 :]) - len(marks[col - 1 :].lstrip("^"))
    assert width >= 1
    if diag["end_line"] == line:
        assert width == max(1, diag["end_column"] - col), "the caret covers exactly the span"
    assert block[4] == f"{gutter} |"
    assert block[5] == f"help: {diag['hint']}"


def test_text_blocker_layout_matches_the_json_diagnostic(bad_policy: Path) -> None:
    text = pw("check", bad_policy.name, cwd=bad_policy.parent)
    assert text.returncode == 1
    assert text.stdout == "", "a refused file prints nothing on stdout in text mode"
    data = json.loads(pw("check", "--format", "json", bad_policy.name, cwd=bad_policy.parent).stdout)
    diags = data["files"][0]["diagnostics"]
    assert [d["code"] for d in diags] == ["PW131"]
    blocks = _blocks(text.stderr)
    assert len(blocks) == 1
    source = bad_policy.read_text("utf-8").splitlines()
    _assert_rendered(blocks[0], "refund.pact", source, diags[0])
    assert source[diags[0]["line"] - 1].strip() == "call refund_payment"
    assert text.stderr.splitlines()[-1] == "refund.pact: 1 error, 0 warnings"


def test_text_lists_every_blocker_in_source_order(multi_error_policy: Path) -> None:
    text = pw("check", multi_error_policy.name, cwd=multi_error_policy.parent)
    assert text.returncode == 1
    data = json.loads(pw("check", "--format", "json", multi_error_policy.name, cwd=multi_error_policy.parent).stdout)
    diags = data["files"][0]["diagnostics"]
    assert [d["code"] for d in diags] == ["PW105", "PW120", "PW120"]
    assert [d["line"] for d in diags] == sorted(d["line"] for d in diags)
    source = multi_error_policy.read_text("utf-8").splitlines()
    blocks = _blocks(text.stderr)
    assert len(blocks) == len(diags)
    for block, diag in zip(blocks, diags, strict=True):
        _assert_rendered(block, "multi.pact", source, diag)
    assert text.stderr.splitlines()[-1] == "multi.pact: 3 errors, 0 warnings"


def test_text_clean_policy_prints_ok_and_the_in_process_hash() -> None:
    result = pw("check", MARKETPLACE)
    assert result.returncode == 0, result.stderr
    expected = in_process_hash(REPO / MARKETPLACE)
    assert result.stdout == f"{MARKETPLACE}: ok  candidate {expected}\n"
    assert result.stderr == ""


def test_text_reference_policies_all_pass() -> None:
    names = [f"policies/{n}" for n in ("marketplace_milestone.pact", "support_refund.pact", "unsafe_chargeback.pact")]
    result = pw("check", *names)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == names
    for name, line in zip(names, lines, strict=True):
        assert line.endswith(in_process_hash(REPO / name))


# Warnings ---------------------------------------------------------------------


def test_warnings_only_exits_zero_and_prints_the_warning_on_stderr(warning_policy: Path) -> None:
    result = pw("check", warning_policy.name, cwd=warning_policy.parent)
    assert result.returncode == 0
    assert result.stdout == f"warn.pact: ok  candidate {in_process_hash(warning_policy)}\n", (
        "stdout carries only the ok line; the warning goes to stderr"
    )
    data = json.loads(pw("check", "--format", "json", warning_policy.name, cwd=warning_policy.parent).stdout)
    diags = data["files"][0]["diagnostics"]
    blocks = _blocks(result.stderr)
    assert len(blocks) == len(diags) == 1
    assert [(d["code"], d["severity"]) for d in diags] == [("PW153", "warning")]
    _assert_rendered(blocks[0], "warn.pact", warning_policy.read_text("utf-8").splitlines(), diags[0])
    assert result.stderr.splitlines()[-1] == "warn.pact: 0 errors, 1 warning"


def test_text_stdout_carries_only_ok_lines(warning_policy: Path, bad_policy: Path) -> None:
    """A passing file, a file with a warning and a refused one: stdout has two ok lines, nothing else."""
    files = [str(REPO / MARKETPLACE), str(warning_policy), str(bad_policy)]
    result = pw("check", *files)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    matches = [OK_LINE.match(line) for line in lines]
    assert all(matches), f"a stdout line is not an ok line: {lines}"
    assert [(m["file"], m["hash"]) for m in matches if m] == [
        (files[0], in_process_hash(REPO / MARKETPLACE)),
        (files[1], in_process_hash(warning_policy)),
    ]
    assert _codes(result.stderr) == ["PW153", "PW131"]
    assert "sha256:" not in result.stderr


def test_warnings_only_in_json_and_sarif(warning_policy: Path) -> None:
    data = json.loads(pw("check", "--format", "json", warning_policy.name, cwd=warning_policy.parent).stdout)
    entry = data["files"][0]
    assert entry["ok"] is True
    assert HASH.fullmatch(entry["candidate_hash"])
    assert [(d["code"], d["severity"]) for d in entry["diagnostics"]] == [("PW153", "warning")]
    sarif, log = _sarif(warning_policy.name, cwd=warning_policy.parent)
    assert sarif.returncode == 0
    _assert_github_code_scanning(log)
    (run,) = log["runs"]
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("PW153", "warning")]
    assert [rule["defaultConfiguration"]["level"] for rule in run["tool"]["driver"]["rules"]] == ["warning"]


# JSON -------------------------------------------------------------------------

_DIAGNOSTIC_KEYS = {"code", "severity", "line", "column", "end_line", "end_column", "message", "hint"}
_POSITION_KEYS = ("line", "column", "end_line", "end_column")


def _assert_unreadable_entry(entry: dict[str, Any], file: str) -> None:
    """An unreadable file: not ok, no hash, exactly one PW001 error at line 0 naming the file."""
    assert entry["file"] == file
    assert entry["ok"] is False
    assert entry["candidate_hash"] is None
    (diag,) = entry["diagnostics"]
    assert set(diag) == _DIAGNOSTIC_KEYS
    assert (diag["code"], diag["severity"]) == ("PW001", "error")
    assert [diag[key] for key in _POSITION_KEYS] == [0, 0, 0, 0], "no position in the file applies"
    assert f"`{file}`" in diag["message"]
    assert isinstance(diag["hint"], str)
    assert diag["hint"]


def _assert_json_shape(data: Any) -> None:
    assert set(data) == {"files"}
    for entry in data["files"]:
        assert set(entry) == {"file", "ok", "candidate_hash", "diagnostics"}
        assert isinstance(entry["file"], str)
        assert isinstance(entry["ok"], bool)
        if entry["ok"]:
            assert HASH.fullmatch(entry["candidate_hash"])
        else:
            assert entry["candidate_hash"] is None
        if [d["code"] for d in entry["diagnostics"]] == ["PW001"]:
            _assert_unreadable_entry(entry, entry["file"])
            continue
        for diag in entry["diagnostics"]:
            assert set(diag) == _DIAGNOSTIC_KEYS
            assert re.fullmatch(r"PW1\d{2}", diag["code"]), "a file that was read has only front-end codes"
            assert diag["severity"] in ("error", "warning")
            for key in _POSITION_KEYS:
                assert isinstance(diag[key], int)
                assert diag[key] >= 1
            assert (diag["end_line"], diag["end_column"]) >= (diag["line"], diag["column"])


def test_json_shape_for_good_and_bad_files(bad_policy: Path) -> None:
    result = pw("check", "--format", "json", str(REPO / MARKETPLACE), str(bad_policy))
    assert result.returncode == 1
    assert result.stderr == ""
    data = json.loads(result.stdout)
    _assert_json_shape(data)
    good, bad = data["files"]
    assert good["ok"] is True
    assert good["candidate_hash"] == in_process_hash(REPO / MARKETPLACE)
    assert good["diagnostics"] == []
    assert bad["ok"] is False
    assert [d["code"] for d in bad["diagnostics"]] == ["PW131"]


def test_json_stays_valid_when_a_file_is_missing(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.pact")
    result = pw("check", "--format", "json", str(REPO / MARKETPLACE), missing)
    assert result.returncode == 2
    assert result.stderr == "", "in JSON mode the unreadable file is reported inside the document"
    data = json.loads(result.stdout)
    _assert_json_shape(data)
    good, bad = data["files"]
    assert good["ok"] is True
    assert good["candidate_hash"] == in_process_hash(REPO / MARKETPLACE)
    _assert_unreadable_entry(bad, missing)


def test_json_reports_a_directory_as_unreadable() -> None:
    result = pw("check", "--format", "json", "policies")
    assert result.returncode == 2
    (entry,) = json.loads(result.stdout)["files"]
    _assert_unreadable_entry(entry, "policies")


# SARIF ------------------------------------------------------------------------


def _sarif(*args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    result = pw("check", "--format", "sarif", *args, cwd=cwd)
    log = json.loads(result.stdout)
    schema = json.loads(SARIF_SCHEMA.read_text("utf-8"))
    errors = sorted(Draft4Validator(schema).iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    return result, log


def _assert_github_code_scanning(log: dict[str, Any]) -> None:
    """GitHub code scanning's requirements beyond the schema, and pactwright's own rule shape.

    Every result's file is under the working directory here, so its uri must be
    relative (code scanning maps results to files by repository-relative path).
    """
    assert log["version"] == "2.1.0"
    assert log["$schema"].startswith("https://")
    anchors = set(re.findall(r'<a id="(pw\d{3})"></a>', ERRORS_MD.read_text("utf-8")))
    for run in log["runs"]:
        driver = run["tool"]["driver"]
        assert driver["name"] == "pactwright"
        assert "informationUri" not in driver, "no guessed URLs in the log"
        rules = driver.get("rules", [])
        rule_ids = [rule["id"] for rule in rules]
        assert len(rule_ids) == len(set(rule_ids))
        for rule in rules:
            assert rule["shortDescription"]["text"] == CODES[rule["id"]]
            assert "helpUri" not in rule, "no guessed URLs in the log"
            anchor = rule["id"].lower()
            assert rule["help"]["text"] == f"see docs/errors.md#{anchor}"
            assert anchor in anchors, f"docs/errors.md has no `#{anchor}` for {rule['id']}"
            warning = CODES[rule["id"]].endswith("(warning)")
            assert rule["defaultConfiguration"]["level"] == ("warning" if warning else "error")
        (invocation,) = run["invocations"]
        assert isinstance(invocation["executionSuccessful"], bool)
        for result in run["results"]:
            assert result["ruleId"] in rule_ids
            rule = rules[rule_ids.index(result["ruleId"])]
            if "ruleIndex" in result:
                assert rule_ids[result["ruleIndex"]] == result["ruleId"]
            assert result["message"]["text"]
            assert result["level"] == rule["defaultConfiguration"]["level"]
            assert result["locations"], "code scanning needs a location"
            physical = result["locations"][0]["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            assert not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", uri), f"uri `{uri}` has a scheme"
            assert not uri.startswith("/"), f"uri `{uri}` is absolute; code scanning wants repository-relative"
            assert "\\" not in uri
            region = physical["region"]
            assert region["startLine"] >= 1
            assert region.get("startColumn", 1) >= 1
            assert region.get("endLine", region["startLine"]) >= region["startLine"]


def _uris(log: dict[str, Any]) -> set[str]:
    return {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in log["runs"][0]["results"]}


def test_sarif_for_a_blocker_is_valid_and_code_scanning_ready(bad_policy: Path) -> None:
    result, log = _sarif(bad_policy.name, cwd=bad_policy.parent)
    assert result.returncode == 1
    _assert_github_code_scanning(log)
    (run,) = log["runs"]
    assert [(r["ruleId"], r["level"]) for r in run["results"]] == [("PW131", "error")]
    location = run["results"][0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "refund.pact"
    json_diag = json.loads(pw("check", "--format", "json", bad_policy.name, cwd=bad_policy.parent).stdout)
    diag = json_diag["files"][0]["diagnostics"][0]
    assert location["region"]["startLine"] == diag["line"]
    assert location["region"]["startColumn"] == diag["column"]


def test_sarif_with_nested_relative_paths(multi_error_policy: Path) -> None:
    nested = multi_error_policy.parent / "sub" / "dir"
    nested.mkdir(parents=True)
    target = nested / "multi.pact"
    target.write_bytes(multi_error_policy.read_bytes())
    result, log = _sarif("sub/dir/multi.pact", cwd=multi_error_policy.parent)
    assert result.returncode == 1
    _assert_github_code_scanning(log)
    assert _uris(log) == {"sub/dir/multi.pact"}


def test_sarif_for_a_clean_run_is_valid_and_empty() -> None:
    result, log = _sarif(MARKETPLACE, cwd=REPO)
    assert result.returncode == 0
    _assert_github_code_scanning(log)
    (run,) = log["runs"]
    assert run["results"] == []
    assert run["tool"]["driver"]["rules"] == []
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_sarif_uri_is_relative_for_an_absolute_file_argument(bad_policy: Path) -> None:
    nested = bad_policy.parent / "policies"
    nested.mkdir()
    target = nested / "refund.pact"
    target.write_bytes(bad_policy.read_bytes())
    _, log = _sarif(str(target), cwd=bad_policy.parent)
    _assert_github_code_scanning(log)
    assert _uris(log) == {"policies/refund.pact"}


def test_sarif_uri_is_a_file_uri_outside_the_working_directory(bad_policy: Path) -> None:
    elsewhere = bad_policy.parent / "elsewhere"
    elsewhere.mkdir()
    result, log = _sarif(str(bad_policy), cwd=elsewhere)
    assert result.returncode == 1
    assert _uris(log) == {bad_policy.resolve().as_uri()}
    assert next(iter(_uris(log))).startswith("file:///")


def test_sarif_reports_an_unreadable_file_as_a_tool_notification(bad_policy: Path) -> None:
    result, log = _sarif("refund.pact", "missing.pact", cwd=bad_policy.parent)
    assert result.returncode == 2
    assert result.stderr == ""
    _assert_github_code_scanning(log)
    (run,) = log["runs"]
    assert [r["ruleId"] for r in run["results"]] == ["PW131"], "the readable file still has its results"
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False
    (note,) = invocation["toolExecutionNotifications"]
    assert note["level"] == "error"
    assert note["descriptor"]["id"] == "PW001"
    assert "`missing.pact`" in note["message"]["text"]
    assert "PW001" not in [rule["id"] for rule in run["tool"]["driver"]["rules"]], "PW001 is not a result rule"


# Exit codes -------------------------------------------------------------------


def test_exit_0_on_clean() -> None:
    assert pw("check", MARKETPLACE).returncode == 0


def test_exit_1_on_blocker(bad_policy: Path) -> None:
    assert pw("check", str(bad_policy)).returncode == 1


def test_exit_2_on_missing_file(tmp_path: Path) -> None:
    result = pw("check", str(tmp_path / "nope.pact"))
    assert result.returncode == 2
    assert "error[PW001]" in result.stderr
    assert result.stdout == ""


def test_exit_2_on_a_directory() -> None:
    result = pw("check", "policies")
    assert result.returncode == 2
    assert "error[PW001]" in result.stderr


_GOOD = str(REPO / MARKETPLACE)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("check",), id="no-file"),
        pytest.param(("check", "--format", "xml", _GOOD), id="bad-format"),
        pytest.param(("check", "--no-such-flag", _GOOD), id="unknown-flag"),
        pytest.param(("no-such-command",), id="unknown-command"),
        pytest.param(
            ("check", _GOOD, str(POLICIES / "support_refund.pact"), "--emit-candidate", "out.json"),
            id="emit-with-two-files",
        ),
    ],
)
def test_exit_2_on_bad_usage(args: tuple[str, ...], tmp_path: Path) -> None:
    result = pw(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "error[PW001]" in result.stderr
    assert result.stdout == ""
    assert list(tmp_path.iterdir()) == [], "a usage error writes nothing"


def test_exit_2_without_a_command_prints_the_help_on_stderr() -> None:
    result = pw()
    assert result.returncode == 2
    assert result.stdout == ""
    assert "check" in result.stderr


def test_mixed_good_and_bad_exits_1(bad_policy: Path) -> None:
    result = pw("check", str(REPO / MARKETPLACE), str(bad_policy))
    assert result.returncode == 1
    assert in_process_hash(REPO / MARKETPLACE) in result.stdout
    assert "error[PW131]" in result.stderr


def test_mixed_good_and_missing_exits_2(tmp_path: Path) -> None:
    result = pw("check", MARKETPLACE, str(tmp_path / "missing.pact"))
    assert result.returncode == 2
    assert in_process_hash(REPO / MARKETPLACE) in result.stdout, "the good file is still checked"
    assert "error[PW001]" in result.stderr


def test_bad_and_missing_exits_2(bad_policy: Path, tmp_path: Path) -> None:
    assert pw("check", str(bad_policy), str(tmp_path / "missing.pact")).returncode == 2


# Standard input -------------------------------------------------------------------


def test_stdin_clean_policy_prints_the_in_process_hash() -> None:
    result = pw("check", "-", stdin=(REPO / MARKETPLACE).read_text("utf-8"))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"-: ok  candidate {in_process_hash(REPO / MARKETPLACE)}\n"
    assert result.stderr == ""


def test_stdin_blocker_is_reported_against_dash(bad_policy: Path) -> None:
    source = bad_policy.read_text("utf-8")
    text = pw("check", "-", stdin=source)
    assert text.returncode == 1
    assert text.stdout == ""
    assert _codes(text.stderr) == ["PW131"]
    assert text.stderr.startswith("-:")
    data = json.loads(pw("check", "--format", "json", "-", stdin=source).stdout)
    _assert_json_shape(data)
    (entry,) = data["files"]
    assert (entry["file"], entry["ok"]) == ("-", False)
    _assert_rendered(_blocks(text.stderr)[0], "-", source.splitlines(), entry["diagnostics"][0])


def test_stdin_with_emit_candidate_writes_the_same_bytes(tmp_path: Path) -> None:
    out = tmp_path / "candidate.json"
    result = pw("check", "-", "--emit-candidate", str(out), stdin=(REPO / MARKETPLACE).read_text("utf-8"))
    assert result.returncode == 0, result.stderr
    in_process = check_bytes((REPO / MARKETPLACE).read_bytes())
    assert in_process.candidate is not None
    assert out.read_bytes() == in_process.candidate.canonical_bytes()


# --emit-candidate ---------------------------------------------------------------


def test_emit_candidate_writes_exactly_the_canonical_bytes(tmp_path: Path) -> None:
    out = tmp_path / "candidate.json"
    result = pw("check", MARKETPLACE, "--emit-candidate", str(out))
    assert result.returncode == 0, result.stderr
    written = out.read_bytes()
    in_process = check_bytes((REPO / MARKETPLACE).read_bytes())
    assert in_process.candidate is not None
    assert written == in_process.candidate.canonical_bytes()
    assert rfc8785.dumps(json.loads(written)) == written, "the bytes are their own RFC 8785 encoding"
    assert not written.endswith(b"\n")
    digest = "sha256:" + hashlib.sha256(written).hexdigest()
    assert digest == in_process.candidate.hash()
    assert digest in result.stdout


def test_emit_candidate_is_byte_identical_across_runs_and_cwd(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    assert pw("check", MARKETPLACE, "--emit-candidate", str(first)).returncode == 0
    assert pw("check", str(REPO / MARKETPLACE), "--emit-candidate", str(second), cwd=tmp_path).returncode == 0
    assert first.read_bytes() == second.read_bytes()


def test_emit_candidate_with_a_blocker_writes_nothing(bad_policy: Path, tmp_path: Path) -> None:
    out = tmp_path / "candidate.json"
    result = pw("check", str(bad_policy), "--emit-candidate", str(out))
    assert result.returncode == 1
    assert not out.exists()


def test_emit_candidate_with_json_format(tmp_path: Path) -> None:
    out = tmp_path / "candidate.json"
    result = pw("check", "--format", "json", MARKETPLACE, "--emit-candidate", str(out))
    assert result.returncode == 0
    data = json.loads(result.stdout)
    assert data["files"][0]["candidate_hash"] == "sha256:" + hashlib.sha256(out.read_bytes()).hexdigest()


def test_emit_candidate_to_an_unwritable_path_exits_2(tmp_path: Path) -> None:
    result = pw("check", MARKETPLACE, "--emit-candidate", str(tmp_path / "no" / "such" / "dir" / "c.json"))
    assert result.returncode == 2
    assert result.stderr.startswith("error[PW001]: "), result.stderr
    assert len(result.stderr.splitlines()) == 1, "one error line, no traceback or internal-error report"
    assert list(tmp_path.iterdir()) == []


def test_emit_candidate_onto_a_directory_exits_2(tmp_path: Path) -> None:
    result = pw("check", MARKETPLACE, "--emit-candidate", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.startswith("error[PW001]: "), result.stderr
    assert list(tmp_path.iterdir()) == []


# Start-up time --------------------------------------------------------------------


def test_check_startup_time_is_measured(capsys: pytest.CaptureFixture[str]) -> None:
    """Wall time of a whole `check` process on a reference policy: printed, not asserted."""
    runs = 5
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        result = pw("check", MARKETPLACE)
        times.append(time.perf_counter() - start)
        assert result.returncode == 0
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare = time.perf_counter() - start
    with capsys.disabled():
        print(
            f"\n[startup] pactwright check {MARKETPLACE}: "
            f"min {min(times) * 1000:.0f} ms, median {statistics.median(times) * 1000:.0f} ms "
            f"over {runs} runs (bare python start-up {bare * 1000:.0f} ms)"
        )
