"""The wheel users install: built from the tree, installed in a fresh venv, run elsewhere.

An editable install hides packaging mistakes (a subpackage missing from
pyproject's list, grammar files not shipped, a top-level `compiler` module
leaking out), so these tests build a real wheel from a copy of the tree,
install it in a new virtual environment, and run `pactwright check`,
`pactwright verify` and `python -m pactwright` from a directory outside the
repository. One wheel and one venv serve every test of the module. Installing
the wheel's dependencies needs the package index; the build itself uses
`build` from the dev extra.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from pactwright import __version__
from pactwright.compiler.pipeline import check_bytes

REPO = Path(__file__).resolve().parents[1]
ROOMS = ("pactwright", "compiler", "verifier", "runtime", "templates", "gate", "service")
POLICY = "policies/marketplace_milestone.pact"
_SKIP = shutil.ignore_patterns(
    ".git", ".venv", "venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".ruff_cache",
    ".mypy_cache", ".hypothesis", "out",
)  # fmt: skip


def _clean_env() -> dict[str, str]:
    """The environment without anything that would point back into the repository."""
    env = dict(os.environ)
    for key in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH"):
        env.pop(key, None)
    return env


def _run(args: list[str], cwd: Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_clean_env(), capture_output=True, text=True, timeout=timeout, check=False)


def _must(result: subprocess.CompletedProcess[str], what: str) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"{what} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    outside: Path  # a working directory outside the repository

    def bin(self, name: str) -> Path:
        return self.venv / ("Scripts" if os.name == "nt" else "bin") / name


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a clean copy of the tree (no stale build/ or egg-info)."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    shutil.copytree(REPO, source, ignore=_SKIP, symlinks=True)
    dist = base / "dist"
    _must(_run([sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)], cwd=base), "build")
    (built,) = dist.glob("pactwright-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel installed with its dependencies into a brand-new venv."""
    base = tmp_path_factory.mktemp("venv")
    venv = base / "venv"
    _must(_run([sys.executable, "-m", "venv", str(venv)], cwd=base), "venv")
    python = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    _must(_run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], cwd=base), "pip install")
    outside = base / "elsewhere"
    (outside / "policies").mkdir(parents=True)
    shutil.copyfile(REPO / POLICY, outside / POLICY)
    assert not outside.resolve().is_relative_to(REPO.resolve())
    return Installed(wheel=wheel, venv=venv, outside=outside)


def test_wheel_ships_the_grammar_and_only_the_pactwright_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert "pactwright/compiler/grammar/pact.lark" in names
    assert "pactwright/py.typed" in names
    assert "pactwright/__main__.py" in names, "`python -m pactwright` needs the package's __main__"
    tops = {name.split("/", 1)[0] for name in names}
    dist_info = {top for top in tops if top.endswith(".dist-info")}
    assert tops - dist_info == {"pactwright"}, f"unexpected top-level entries: {sorted(tops - dist_info)}"
    for room in ROOMS[1:]:
        assert not any(name.startswith(f"{room}/") for name in names), f"top-level `{room}` package in the wheel"


def test_installed_wheel_checks_a_policy_outside_the_repo(installed: Installed) -> None:
    result = _run([str(installed.bin("pactwright")), "check", POLICY], cwd=installed.outside, timeout=120)
    assert result.returncode == 0, result.stderr
    in_process = check_bytes((REPO / POLICY).read_bytes())
    assert in_process.candidate is not None
    assert result.stdout == f"{POLICY}: ok  candidate {in_process.candidate.hash()}\n"


def test_installed_wheel_runs_as_a_module(installed: Installed) -> None:
    python = str(installed.bin("python"))
    version = _run([python, "-m", "pactwright", "--version"], cwd=installed.outside, timeout=120)
    assert (version.returncode, version.stdout) == (0, f"pactwright {__version__}\n"), version.stderr
    by_module = _run([python, "-m", "pactwright", "check", POLICY], cwd=installed.outside, timeout=120)
    by_script = _run([str(installed.bin("pactwright")), "check", POLICY], cwd=installed.outside, timeout=120)
    assert by_module.returncode == 0, by_module.stderr
    assert (by_module.stdout, by_module.stderr) == (by_script.stdout, by_script.stderr)


def test_installed_wheel_verifies_a_reference_policy_as_the_tree_does(installed: Installed) -> None:
    """The installed verifier's report is byte for byte the one this tree's verifier writes."""
    args = ["verify", POLICY, "--format", "json"]
    # Both runs at once: each is a few seconds of exploration, proofs and mutants.
    wheel = subprocess.Popen(
        [str(installed.bin("pactwright")), *args], cwd=installed.outside, env=_clean_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    tree = _run([sys.executable, "-m", "pactwright", *args], cwd=REPO, timeout=120)
    out, err = wheel.communicate(timeout=120)
    assert wheel.returncode == 0, err
    assert tree.returncode == 0, tree.stderr
    report = json.loads(out)
    assert report["format"] == "pactwright.report/1"
    assert report["verdict"] == "pass"
    assert out == tree.stdout


def test_installed_wheel_serves_http(installed: Installed, tmp_path: Path) -> None:
    """`serve` from the wheel: the service package and its web dependencies are installed and answer."""
    store = tmp_path / "store.sqlite"
    server = subprocess.Popen(
        [str(installed.bin("pactwright")), "serve", "--store", str(store), "--port", "0"],
        cwd=installed.outside, env=_clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None
        ready, _, _ = select.select([server.stdout], [], [], 60)
        line = server.stdout.readline() if ready else ""
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:\d+)\n", line)
        assert match, f"no `listening on` line from serve: {line!r}"
        health = httpx2.get(f"{match[1]}/healthz", timeout=10)
        assert (health.status_code, health.json()) == (200, {"status": "ok"})
        spec = httpx2.get(f"{match[1]}/openapi.json", timeout=10)
        assert spec.status_code == 200
        assert spec.json()["paths"], "the published OpenAPI document lists no paths"
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    assert "Traceback" not in err, err


def test_installed_wheel_imports_from_its_own_venv(installed: Installed) -> None:
    probe = (
        "import importlib.util, pactwright, pactwright.compiler;"
        "print(pactwright.__file__);"
        "print(pactwright.compiler.__file__);"
        f"print([m for m in {ROOMS[1:]!r} if importlib.util.find_spec(m)])"
    )
    result = _run([str(installed.bin("python")), "-c", probe], cwd=installed.outside, timeout=120)
    assert result.returncode == 0, result.stderr
    kernel, compiler, tops = result.stdout.splitlines()
    venv = installed.venv.resolve()
    assert Path(kernel).resolve().is_relative_to(venv)
    assert Path(compiler).resolve().is_relative_to(venv)
    assert tops == "[]", f"top-level modules importable from the installed wheel: {tops}"


def _tree_packages() -> set[str]:
    """Import names of every directory with an `__init__.py` in the mapped rooms."""
    found: set[str] = set()
    for room in ROOMS:
        root = REPO / room
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if any(part.startswith(".") or part == "__pycache__" for part in rel.parts):
                continue
            prefix = "pactwright" if room == "pactwright" else f"pactwright.{room}"
            found.add(".".join((prefix, *rel.parts)))
    return found


def test_every_package_in_the_tree_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    package_dir = config["package-dir"]
    for room in ROOMS:
        name = "pactwright" if room == "pactwright" else f"pactwright.{room}"
        assert package_dir.get(name) == room, f"package-dir must map `{name}` to `{room}/`"
    found = _tree_packages()
    missing = sorted(found - listed)
    assert not missing, f"packages in the tree but not in pyproject's [tool.setuptools] packages: {missing}"
    stale = sorted(listed - found)
    assert not stale, f"packages listed in pyproject that have no __init__.py in the tree: {stale}"
