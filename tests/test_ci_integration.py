"""CI integration as users adopt it: the example workflow, the pre-commit hooks, `python -m pactwright`.

The example GitHub Actions workflow (examples/ci/pactwright.yml, shown in
docs/ci.md) is not only parsed: every `run:` step is executed in order with
bash, as the runner would (`bash --noprofile --norc -eo pipefail`), in a
temporary git repository whose pull request modifies, adds, renames and
breaks real policies. `${{ ... }}` expressions in step environments are
evaluated from the pull request's facts and the earlier steps' outputs.
Two things are stood in for: the install step (pactwright comes from this
tree instead of the package index) and `gh`, whose recorded arguments and
body file are asserted. The `uses:` steps (SARIF upload, JUnit report,
artifact upload) run on GitHub; what the test checks is that the files they
are pointed at exist and are what those actions expect.

PyYAML comes with the dev extra (schemathesis depends on it).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from pactwright import __version__
from pactwright.cli.main import build_parser

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / "examples" / "ci" / "pactwright.yml"
HOOKS = REPO / ".pre-commit-hooks.yaml"
CI_DOC = REPO / "docs" / "ci.md"
POLICIES = REPO / "policies"
PR_NUMBER = "12"
_EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")
# Shell words that end a command line's arguments.
_OPERATORS = {">", ">>", "2>", "2>>", "<", "|", "||", "&&", ";", "2>&1", "then", "do"}
# git as on a fresh runner: no global or system configuration of whoever runs the tests.
_GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _workflow() -> dict[Any, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text("utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _steps() -> list[dict[str, Any]]:
    (job,) = _workflow()["jobs"].values()
    steps: list[dict[str, Any]] = job["steps"]
    return steps


def _git(repo: Path, *args: str) -> str:
    env = dict(os.environ, **_GIT_ENV)
    result = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout.strip()


def _write_tool(path: Path, body: str) -> None:
    path.write_text("#!/usr/bin/env bash\n" + body, "utf-8")
    path.chmod(0o755)


def _command_lines(script: str) -> list[list[str]]:
    """The argument lists of every `pactwright ...` command in a shell script."""
    found = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        for start, word in enumerate(words):
            if word != "pactwright" or (start and words[start - 1] not in _OPERATORS | {"if", "!"}):
                continue
            args = []
            for arg in words[start + 1 :]:
                if arg in _OPERATORS:
                    break
                args.append(arg)
            found.append(args)
    return found


@dataclass
class Run:
    """One simulated workflow run on a pull request."""

    repo: Path
    base_sha: str
    calls: list[list[str]]  # every pactwright invocation, in order
    gh_args: list[str]
    gh_body: str
    rc: dict[str, int] = field(default_factory=dict)  # step name -> exit code
    stdout: dict[str, str] = field(default_factory=dict)

    @property
    def out(self) -> Path:
        return self.repo / "pactwright-out"


def _evaluate(expression: str, base_sha: str, outputs: dict[str, dict[str, str]]) -> str:
    """The few expressions the workflow's step environments may use; anything else fails the test."""
    known = {
        "github.event.pull_request.base.sha": base_sha,
        "github.event.pull_request.number": PR_NUMBER,
        "github.token": "test-token",
    }
    if expression in known:
        return known[expression]
    match = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression)
    assert match, f"expression the test does not know how to evaluate: {expression}"
    return outputs.get(match[1], {}).get(match[2], "")  # GitHub gives "" for a missing output


def _run_workflow(repo: Path, base_sha: str, tmp: Path, only: set[str] | None = None) -> Run:
    """Run the workflow's `run:` steps in order (or only the steps named in `only`)."""
    tools = tmp / "tools"
    tools.mkdir()
    log, gh_log, gh_body = tmp / "pactwright.log", tmp / "gh.args", tmp / "gh.body"
    # The pactwright on PATH is this tree's, through `python -m pactwright`; each call is logged.
    _write_tool(
        tools / "pactwright",
        f'printf "%q " "$@" >> {shlex.quote(str(log))}; echo >> {shlex.quote(str(log))}\n'
        f'exec {shlex.quote(sys.executable)} -m pactwright "$@"\n',
    )
    _write_tool(
        tools / "gh",
        f'printf "%s\\n" "$@" > {shlex.quote(str(gh_log))}\n'
        'while [ $# -gt 0 ]; do if [ "$1" = --body-file ]; then '
        f'cp "$2" {shlex.quote(str(gh_body))}; fi; shift; done\n',
    )
    workflow = _workflow()
    assert workflow["defaults"]["run"]["shell"] == "bash"
    env_base = {
        "PATH": f"{tools}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        **_GIT_ENV,
        **{key: str(value) for key, value in workflow["env"].items()},
    }
    outputs: dict[str, dict[str, str]] = {}
    run = Run(repo=repo, base_sha=base_sha, calls=[], gh_args=[], gh_body="")
    for index, step in enumerate(_steps()):
        if "run" not in step:
            continue
        name = step["name"]
        script = step["run"]
        assert "${{" not in script, f"step `{name}` expands an expression inside its script (use env:)"
        if name == "Install pactwright":
            assert script.strip() == 'python -m pip install "$PACTWRIGHT"'
            continue  # pactwright is this tree's (see the tools directory above)
        if only is not None and name not in only:
            continue
        output_file = tmp / f"output-{index}"
        output_file.write_text("", "utf-8")
        env = dict(env_base, GITHUB_OUTPUT=str(output_file))
        for key, value in step.get("env", {}).items():
            env[key] = _EXPRESSION.sub(lambda m: _evaluate(m[1], base_sha, outputs), str(value))
        script_file = tmp / f"step-{index}.sh"
        script_file.write_text(script, "utf-8")
        result = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        run.rc[name] = result.returncode
        run.stdout[name] = result.stdout + result.stderr
        if "id" in step:
            pairs = (line.split("=", 1) for line in output_file.read_text("utf-8").splitlines() if "=" in line)
            outputs[step["id"]] = dict(pairs)
    run.calls = [shlex.split(line) for line in log.read_text("utf-8").splitlines()] if log.exists() else []
    run.gh_args = gh_log.read_text("utf-8").splitlines() if gh_log.exists() else []
    run.gh_body = gh_body.read_text("utf-8") if gh_body.exists() else ""
    return run


def _repo_with_pull_request(tmp: Path, base: dict[str, bytes], head: dict[str, bytes | None]) -> tuple[Path, str]:
    """A git repository with `base` committed on main and `head` (None deletes) committed on top."""
    repo = tmp / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet", "--initial-branch=main")
    _git(repo, "config", "user.email", "ci@example.com")
    _git(repo, "config", "user.name", "ci")
    for path, data in base.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    _git(repo, "add", "--all")
    _git(repo, "commit", "--quiet", "-m", "base")
    base_sha = _git(repo, "rev-parse", "HEAD")
    for path, data in head.items():
        if data is None:
            _git(repo, "rm", "--quiet", path)
            continue
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(data)
    _git(repo, "add", "--all")
    _git(repo, "commit", "--quiet", "-m", "pull request")
    return repo, base_sha


def _policy(name: str) -> bytes:
    return (POLICIES / name).read_bytes()


def _without_approval(source: bytes) -> bytes:
    line = b"  approval by refund_approver not requester\n"
    assert line in source
    return source.replace(line, b"")


def _junit(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()  # noqa: S314 - our own verifier's output
    assert root.tag == "testsuite"
    return root


# The workflow file ---------------------------------------------------------------


def test_workflow_parses_and_has_the_documented_shape() -> None:
    workflow = _workflow()
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as true
    assert trigger == {"pull_request": {"paths": ["**.pact"]}}
    assert workflow["permissions"] == {
        "contents": "read",
        "actions": "read",
        "security-events": "write",
        "checks": "write",
        "pull-requests": "write",
    }
    uses = [step["uses"].split("@")[0] for step in _steps() if "uses" in step]
    assert uses == [
        "actions/checkout",
        "actions/setup-python",
        "github/codeql-action/upload-sarif",
        "mikepenz/action-junit-report",
        "actions/upload-artifact",
    ]
    checkout = _steps()[0]
    assert checkout["with"]["fetch-depth"] == 0, "the base commit must be fetched for git diff and git show"
    for step in _steps():
        assert ("uses" in step) != ("run" in step), step


def test_docs_show_the_example_workflow_verbatim() -> None:
    text = CI_DOC.read_text("utf-8")
    assert f"```yaml\n{WORKFLOW.read_text('utf-8')}```\n" in text
    assert "examples/ci/pactwright.yml" in text


def test_every_pactwright_command_line_in_the_workflow_is_accepted_by_the_cli_parser() -> None:
    parser = build_parser()
    commands = []
    for step in _steps():
        for args in _command_lines(step.get("run", "")):
            namespace = parser.parse_args(args)  # a refused line raises SystemExit(2)
            commands.append(namespace.command)
    assert sorted(set(commands)) == ["build", "check", "diff", "verify"]
    assert any(
        args[:3] == ["check", "--format", "sarif"] for s in _steps() for args in _command_lines(s.get("run", ""))
    )


def test_a_pull_request_is_checked_built_verified_and_its_diff_commented(tmp_path: Path) -> None:
    support = _policy("support_refund.pact")
    repo, base_sha = _repo_with_pull_request(
        tmp_path,
        base={
            "policies/marketplace.pact": _policy("marketplace_milestone.pact"),
            "policies/support_refund.pact": support,
            "policies/desk_limit.pact": _policy("desk_limit.pact"),
            "policies/partial_refund.pact": _policy("partial_refund.pact"),
            "README.md": b"policies\n",
        },
        head={
            # modified: a chargeback replaces the dispute path (verification fails, downgrades flagged)
            "policies/marketplace.pact": _policy("unsafe_chargeback.pact"),
            # modified: the refund loses its approval (a blocker: no bundle, no diff)
            "policies/support_refund.pact": _without_approval(support),
            # added with the same blocker, and renamed without a change
            "policies/drafts/refund.pact": _without_approval(support),
            "policies/desk_limit.pact": None,
            "policies/desk/limit.pact": _policy("desk_limit.pact"),
        },
    )
    run = _run_workflow(repo, base_sha, tmp_path)
    final = "Fail on blockers or a failed verification"
    assert {name: rc for name, rc in run.rc.items() if name != final} == dict.fromkeys(
        [name for name in run.rc if name != final], 0
    ), run.stdout
    assert run.rc[final] == 1
    assert "::error::pactwright check exited 1" in run.stdout[final]
    assert "::error::a changed policy failed to build or verify" in run.stdout[final]

    changed = (run.out / "changed.tsv").read_text("utf-8").splitlines()
    assert sorted(changed) == [
        "policies/desk/limit.pact\tpolicies/desk_limit.pact",
        "policies/drafts/refund.pact\t",
        "policies/marketplace.pact\tpolicies/marketplace.pact",
        "policies/support_refund.pact\tpolicies/support_refund.pact",
    ]

    # SARIF for every tracked policy, as the upload step is pointed at it.
    (upload,) = [step for step in _steps() if step.get("uses", "").startswith("github/codeql-action/upload-sarif")]
    sarif = json.loads((repo / upload["with"]["sarif_file"]).read_text("utf-8"))
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in results] == [
        ("PW131", "policies/drafts/refund.pact"),
        ("PW131", "policies/support_refund.pact"),
    ]
    check_call = next(call for call in run.calls if call[0] == "check")
    assert check_call[:3] == ["check", "--format", "sarif"]
    assert sorted(check_call[3:]) == sorted(_git(repo, "ls-files", "*.pact").splitlines())

    # Bundles with their reports for the changed policies that have no blockers.
    bundles = run.out / "bundles" / "policies"
    for name in ("marketplace", "desk/limit"):
        assert (bundles / name / "manifest.json").is_file(), name
        assert (bundles / name / "report.html").is_file(), name
    assert not (bundles / "support_refund").exists()
    assert not (bundles / "drafts").exists()

    # JUnit from verify, where the JUnit step looks for it.
    (junit_step,) = [step for step in _steps() if step.get("uses", "").startswith("mikepenz/action-junit-report")]
    reports = sorted(glob.glob(str(repo / junit_step["with"]["report_paths"])))
    suites = {Path(path).stem: _junit(Path(path)) for path in reports}
    assert sorted(suites) == ["policies_desk_limit", "policies_marketplace"]
    assert int(suites["policies_marketplace"].get("failures", "0")) >= 1
    assert suites["policies_desk_limit"].get("failures") == "0"
    (artifact,) = [step for step in _steps() if step.get("uses", "").startswith("actions/upload-artifact")]
    assert (repo / artifact["with"]["path"]).is_dir()

    # The semantic diff against the base version, posted once as a comment.
    assert run.gh_args == ["pr", "comment", PR_NUMBER, "--body-file", "pactwright-out/diff.md"]
    body = run.gh_body
    assert body == (run.out / "diff.md").read_text("utf-8")
    sections = dict(re.findall(r"^### `([^`]+)`\n(.*?)(?=^### |\Z)", body, re.MULTILINE | re.DOTALL))
    assert sorted(sections) == sorted(line.split("\t")[0] for line in changed)
    market = sections["policies/marketplace.pact"]
    assert f"Compared with `policies/marketplace.pact` at the base commit `{base_sha[:12]}`." in market
    assert "**Safety downgrades flagged: a reviewer has to read them.**" in market
    assert "| added | transitions | `chargeback` | `8.1` |" in market
    assert "| **downgrade** | `invariant escrow_empty_when_final` | `7.3` | `invariant dropped` |" in market
    blocked = sections["policies/support_refund.pact"]
    assert f"Could not compare with `policies/support_refund.pact` at the base commit `{base_sha[:12]}`:" in blocked
    assert "policies/support_refund.pact:68:3: error[PW131]" in blocked
    assert sections["policies/drafts/refund.pact"].strip() == "New policy: there is no base version to compare with."
    renamed = sections["policies/desk/limit.pact"]
    assert "Compared with `policies/desk_limit.pact`" in renamed
    assert "No semantic changes." in renamed
    assert "Safety downgrades flagged" not in renamed
    assert body.count("~~~text\n") == body.count("\n~~~\n") == 1  # only the error of the blocked policy

    # Every command line of the workflow ran for real; none was only parsed.
    assert {call[0] for call in run.calls} == {"check", "build", "verify", "diff"}
    assert sum(call[0] == "build" for call in run.calls) == 4
    assert sum(call[0] == "verify" and call[-2:] == ["--format", "junit"] for call in run.calls) == 2


def test_a_clean_pull_request_passes(tmp_path: Path) -> None:
    desk = _policy("desk_limit.pact")
    repo, base_sha = _repo_with_pull_request(
        tmp_path,
        base={"policies/desk_limit.pact": desk},
        head={"policies/desk_limit.pact": desk + b"# reviewed\n"},
    )
    run = _run_workflow(repo, base_sha, tmp_path)
    assert set(run.rc.values()) == {0}, run.stdout
    sarif = json.loads((run.out / "pactwright.sarif").read_text("utf-8"))
    assert sarif["runs"][0]["results"] == []
    (report,) = (run.out / "junit").glob("*.xml")
    assert _junit(report).get("failures") == "0"
    assert "No semantic changes." in run.gh_body
    assert "Safety downgrades flagged" not in run.gh_body


def test_a_diff_too_long_for_a_comment_is_cut_at_a_whole_line(tmp_path: Path) -> None:
    desk = _policy("desk_limit.pact")
    many = b"".join(b"invariant kept_%04d: balance(customer) >= 0\n" % i for i in range(600))
    repo, base_sha = _repo_with_pull_request(
        tmp_path, base={"policies/desk_limit.pact": desk + many}, head={"policies/desk_limit.pact": desk}
    )
    steps = {"Find the changed policies", "Semantic diff against the base branch"}
    run = _run_workflow(repo, base_sha, tmp_path, only=steps)
    assert run.rc == dict.fromkeys(steps, 0), run.stdout
    full = (run.out / "diff.part.md").read_text("utf-8")
    assert len(full) > 60000
    body = (run.out / "diff.md").read_bytes()
    note = b"\n\n(cut at 60000 bytes: run `pactwright diff --format markdown` locally for the rest)\n"
    assert body.endswith(note)
    kept = body[: -len(note)]
    assert len(kept) <= 60000
    text = kept.decode("utf-8")  # never a character cut in two
    diff_lines = set(full.splitlines())
    body_lines = text.split("at the base commit", 1)[1].splitlines()[2:]
    assert len(body_lines) > 500
    assert all(line in diff_lines for line in body_lines), "the comment holds only whole lines of the diff"
    assert "**Safety downgrades flagged: a reviewer has to read them.**" in text


# pre-commit hooks ----------------------------------------------------------------


def _hooks() -> dict[str, dict[str, Any]]:
    loaded = yaml.safe_load(HOOKS.read_text("utf-8"))
    assert isinstance(loaded, list)
    return {hook["id"]: hook for hook in loaded}


def _run_hook(hook: dict[str, Any], files: list[Path], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a hook as pre-commit does: its entry, split like a shell would, then the staged files."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    args = [*shlex.split(hook["entry"]), *(str(path.relative_to(cwd)) for path in files)]
    assert shutil.which(args[0], path=env["PATH"]), f"`{args[0]}` is not on the hook's PATH"
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_pre_commit_hooks_are_declared_for_pact_files() -> None:
    hooks = _hooks()
    assert sorted(hooks) == ["pactwright-check", "pactwright-fmt"]
    assert hooks["pactwright-check"]["entry"] == "pactwright check"
    assert hooks["pactwright-fmt"]["entry"] == "pactwright fmt --check"
    for hook in hooks.values():
        assert hook["language"] == "python"
        assert {"id", "name", "entry", "language", "files"} <= set(hook)
        pattern = re.compile(hook["files"])
        assert pattern.search("policies/refund.pact")
        assert not pattern.search("policies/refund.pact.orig")
        assert not pattern.search("notes.md")


def test_check_hook_passes_a_good_policy_and_refuses_a_blocker(tmp_path: Path) -> None:
    hook = _hooks()["pactwright-check"]
    good, bad = tmp_path / "good.pact", tmp_path / "bad.pact"
    good.write_bytes(_policy("support_refund.pact"))
    bad.write_bytes(_without_approval(_policy("support_refund.pact")))
    passed = _run_hook(hook, [good], tmp_path)
    assert passed.returncode == 0, passed.stderr
    assert passed.stdout.startswith("good.pact: ok  candidate sha256:")
    refused = _run_hook(hook, [good, bad], tmp_path)
    assert refused.returncode == 1
    assert "bad.pact:68:3: error[PW131]" in refused.stdout + refused.stderr


def test_fmt_hook_passes_a_formatted_policy_and_refuses_another_layout_without_changing_it(tmp_path: Path) -> None:
    hook = _hooks()["pactwright-fmt"]
    good, bad = tmp_path / "good.pact", tmp_path / "bad.pact"
    original = _policy("marketplace_milestone.pact")  # aligned columns: not the canonical layout
    good.write_bytes(original)
    bad.write_bytes(original)
    formatted = subprocess.run(
        [sys.executable, "-m", "pactwright", "fmt", "good.pact"], cwd=tmp_path, capture_output=True, check=False
    )
    assert formatted.returncode == 0, formatted.stderr
    assert good.read_bytes() != original
    passed = _run_hook(hook, [good], tmp_path)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    refused = _run_hook(hook, [good, bad], tmp_path)
    assert refused.returncode == 1
    assert "--- bad.pact\n+++ bad.pact (formatted)\n" in refused.stdout
    assert "good.pact" not in refused.stdout
    assert bad.read_bytes() == original, "fmt --check must change nothing"


# python -m pactwright --------------------------------------------------------------


def _module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pactwright", *args], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_python_dash_m_runs_the_same_entry_as_the_console_script() -> None:
    version = _module("--version")
    assert (version.returncode, version.stdout) == (0, f"pactwright {__version__}\n")
    checked = _module("check", "policies/marketplace_milestone.pact")
    script = Path(sys.executable).parent / "pactwright"
    assert script.is_file(), "the console script is installed beside the interpreter"
    by_script = subprocess.run(
        [str(script), "check", "policies/marketplace_milestone.pact"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr
    assert (checked.returncode, checked.stdout, checked.stderr) == (
        by_script.returncode,
        by_script.stdout,
        by_script.stderr,
    )
    assert checked.stdout.startswith("policies/marketplace_milestone.pact: ok  candidate sha256:")


def test_python_dash_m_maps_errors_to_the_documented_exit_codes() -> None:
    usage = _module("check", "--format", "xml", "policies/marketplace_milestone.pact")
    assert usage.returncode == 2
    assert "error[PW001]: argument --format: invalid choice: 'xml'" in usage.stderr
    assert "Traceback" not in usage.stderr
    nothing = _module()
    assert nothing.returncode == 2
    assert nothing.stderr.startswith("usage: pactwright")


@pytest.mark.parametrize("hook_id", ["pactwright-check", "pactwright-fmt"])
def test_hook_entries_are_cli_commands(hook_id: str) -> None:
    entry = shlex.split(_hooks()[hook_id]["entry"])
    assert entry[0] == "pactwright"
    assert build_parser().parse_args([*entry[1:], "x.pact"]).command == entry[1]
