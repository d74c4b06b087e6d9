"""The documentation stays true to the code.

- every code in `pactwright/codes.py` has its section in docs/errors.md, with
  the same title and an explicit `#pwNNN` anchor (each SARIF rule's
  `help.text` points there), and errors.md documents no code that does not
  exist;
- every `PW1xx` code the front end can emit is registered in codes.py;
- every complete policy in a ` ```pact ` block of the docs checks as stated
  (no diagnostics, or exactly the codes named by `expect=`);
- the candidate example in docs/candidate.md is what the code produces, and
  every hash quoted in README.md and the pages above is a current candidate
  hash (or the manifest hash of a reference policy's compiled bundle);
- the reserved words in docs/language.md are the grammar's keywords, and its
  static-checks table lists every PW1xx check code;
- docs/cli.md has a section for every command of the CLI;
- relative links and anchors in README.md and docs/ resolve;
- the README's demo runs and shows what it says.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pactwright.canonical import hash_bytes
from pactwright.cli.main import COMMANDS
from pactwright.codes import CODES
from pactwright.compiler.bundle import compile_candidate
from pactwright.compiler.parser import keywords
from pactwright.compiler.pipeline import check_bytes, check_text
from pactwright.manifest import MANIFEST_PATH

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
ERRORS = DOCS / "errors.md"
LANGUAGE = DOCS / "language.md"
CANDIDATE = DOCS / "candidate.md"
CLI = DOCS / "cli.md"
MARKDOWN = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
# The pages whose quoted hashes are all candidate hashes (other pages may quote artifact hashes).
CANDIDATE_PAGES = [
    REPO / "README.md",
    *(DOCS / name for name in ("language.md", "errors.md", "cli.md", "candidate.md")),
]

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_SECTION = re.compile(r"^### (PW\d{3}) — (.+)$", re.MULTILINE)


def _fences(path: Path, language: str) -> list[tuple[int, str, str]]:
    """(line, info string, body) of every fenced block of `language` in `path`."""
    text = path.read_text("utf-8")
    found = []
    for match in _FENCE.finditer(text):
        info = match["info"].strip()
        if info.split(" ", 1)[0] == language:
            found.append((text.count("\n", 0, match.start()) + 1, info, match["body"]))
    return found


# errors.md <-> codes.py -------------------------------------------------------------


def test_every_code_has_a_section_with_its_title_and_anchor() -> None:
    text = ERRORS.read_text("utf-8")
    sections = dict(_SECTION.findall(text))
    missing = [code for code in CODES if code not in sections]
    assert not missing, f"codes without a `### PWnnn — title` section in docs/errors.md: {missing}"
    wrong = {code: (sections[code], title) for code, title in CODES.items() if sections[code] != title}
    assert not wrong, f"section titles differ from codes.py (doc, code): {wrong}"
    anchors = set(re.findall(r'<a id="(pw\d{3})"></a>', text))
    assert not [c for c in CODES if c.lower() not in anchors], 'every code needs `<a id="pwNNN"></a>`'


def test_errors_md_documents_only_registered_codes_once() -> None:
    found = [code for code, _ in _SECTION.findall(ERRORS.read_text("utf-8"))]
    assert len(found) == len(set(found)), "a code has two sections"
    unknown = sorted(set(found) - set(CODES))
    assert not unknown, f"docs/errors.md documents codes that codes.py does not list: {unknown}"


def test_errors_md_sections_are_in_code_order() -> None:
    found = [code for code, _ in _SECTION.findall(ERRORS.read_text("utf-8"))]
    assert found == sorted(found)


def test_every_front_end_code_is_registered() -> None:
    emitted: dict[str, str] = {}
    for path in sorted((REPO / "compiler").rglob("*.py")):
        for code in re.findall(r"\"(PW1\d\d)\"", path.read_text("utf-8")):
            emitted.setdefault(code, str(path.relative_to(REPO)))
    assert emitted, "found no PW1xx literals in compiler/: has the front end moved?"
    unregistered = {code: where for code, where in emitted.items() if code not in CODES}
    assert not unregistered, f"codes emitted by the front end but missing from codes.py: {unregistered}"


# Examples ------------------------------------------------------------------------

_EXAMPLES = [
    pytest.param(path, line, info, body, id=f"{path.name}:{line}")
    for path in sorted(DOCS.glob("*.md"))
    for line, info, body in _fences(path, "pact")
]


def test_language_md_has_complete_examples() -> None:
    assert len(_fences(LANGUAGE, "pact")) >= 4


@pytest.mark.parametrize(("path", "line", "info", "body"), _EXAMPLES)
def test_pact_examples_check_as_documented(path: Path, line: int, info: str, body: str) -> None:
    expected: list[str] = []
    for word in info.split()[1:]:
        key, _, value = word.partition("=")
        assert key == "expect", f"{path.name}:{line}: unknown fence option `{word}`"
        expected = sorted(value.split(","))
    result = check_text(body)
    found = sorted(d.code for d in result.diagnostics)
    details = [f"{d.code} at example line {d.span.line}: {d.message}" for d in result.diagnostics]
    assert found == expected, f"{path.name}:{line}: expected {expected or 'no diagnostics'}, got {details}"
    blocking = any(code in CODES and not CODES[code].endswith("(warning)") for code in expected)
    assert (result.candidate is None) == blocking


def test_candidate_example_is_what_the_code_produces() -> None:
    (_, _, policy), *others = _fences(CANDIDATE, "pact")
    assert not others, "candidate.md has one example policy"
    documented = [body for _, info, body in _fences(CANDIDATE, "json") if info.split()[1:] == ["candidate"]]
    assert len(documented) == 1, "candidate.md marks its example candidate with ```json candidate"
    result = check_text(policy)
    assert result.candidate is not None
    assert json.loads(documented[0]) == result.candidate.to_json()
    text = CANDIDATE.read_text("utf-8")
    assert result.candidate.hash() in text
    assert f"{len(result.candidate.canonical_bytes())} bytes" in text


def test_every_hash_quoted_in_the_docs_is_current() -> None:
    """A digest quoted in README or the language, error, CLI and candidate pages is current.

    That is a candidate hash, or the manifest hash that `pactwright compile` prints
    for a reference policy (cli.md shows it); anything else is a stale example.
    """
    current: set[str] = set()
    for source in sorted((REPO / "policies").glob("*.pact")):
        result = check_bytes(source.read_bytes())
        if result.candidate is not None:
            current.add(result.candidate.hash().removeprefix("sha256:"))
            bundle = compile_candidate(result.candidate, result.source_map, f"policies/{source.name}")
            current.add(hash_bytes(bundle[MANIFEST_PATH]).removeprefix("sha256:"))
    for path in MARKDOWN:
        for _, _, body in _fences(path, "pact"):
            result = check_text(body)
            if result.candidate is not None:
                current.add(result.candidate.hash().removeprefix("sha256:"))
    for path in CANDIDATE_PAGES:
        quoted = set(re.findall(r"\b[0-9a-f]{64}\b", path.read_text("utf-8")))
        stale = sorted(quoted - current)
        assert not stale, f"{path.name} quotes digests that no current policy has: {stale}"


# language.md <-> grammar and checks -------------------------------------------------


def test_reserved_words_are_the_grammar_keywords() -> None:
    text = LANGUAGE.read_text("utf-8")
    section = text.split("### Reserved words", 1)[1].split("\n\n", 3)
    listed = set(re.findall(r"`([a-z_]+)`", section[2]))
    assert listed == set(keywords()), (
        f"only in the doc: {sorted(listed - set(keywords()))}; only in the grammar: {sorted(set(keywords()) - listed)}"
    )


# PW1xx codes that are not static checks: PW199 is how compile, build, verify and
# diff end when a policy has blockers. It has its errors.md section like every
# code, but no row in the static-checks table, and no check in compiler/ emits it.
NOT_STATIC_CHECKS = {"PW199"}


def test_static_checks_table_lists_every_parse_and_check_code() -> None:
    text = LANGUAGE.read_text("utf-8")
    table = text.split("## Static checks", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| (PW1\d\d) \| (blocker|warning) \|", table, re.MULTILINE))
    assert NOT_STATIC_CHECKS.issubset(CODES), "a code excluded here no longer exists in codes.py"
    for path in sorted((REPO / "compiler").rglob("*.py")):
        assert not NOT_STATIC_CHECKS & set(re.findall(r"\"(PW1\d\d)\"", path.read_text("utf-8"))), path
    codes = {code for code in CODES if code.startswith("PW1")} - NOT_STATIC_CHECKS
    assert set(rows) == codes
    for code, severity in rows.items():
        assert (severity == "warning") == CODES[code].endswith("(warning)"), code


# cli.md <-> the CLI -------------------------------------------------------------------


def test_cli_md_documents_every_command() -> None:
    text = CLI.read_text("utf-8")
    sections = set(re.findall(r"^## `pactwright ([a-z][a-z-]*)", text, re.MULTILINE))
    assert sections == set(COMMANDS), (
        f"commands without a section: {sorted(set(COMMANDS) - sections)}; "
        f"sections for no command: {sorted(sections - set(COMMANDS))}"
    )
    table = text.split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z][a-z-]*)[ `]", table, re.MULTILINE))
    assert listed == set(COMMANDS), "the command table at the top of cli.md lists every command"


# Links -----------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`."""
    text = re.sub(r"[`*_]", lambda m: "_" if m.group() == "_" else "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text("utf-8"))
    anchors = {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}
    return anchors | set(re.findall(r'<a id="([^"]+)"></a>', text))


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.name)
def test_relative_links_and_anchors_resolve(path: Path) -> None:
    text = _FENCE.sub("", path.read_text("utf-8"))
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        exists = linked.exists()
        if not exists or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
            broken.append(target)
    assert not broken, f"broken links in {path.name}: {broken}"


# README ----------------------------------------------------------------------------


def test_readme_commands_exist_in_the_makefile() -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    makefile = (REPO / "Makefile").read_text("utf-8")
    for target in ("demo", "test"):
        assert f"make {target}" in readme
        assert re.search(rf"^{target}:", makefile, re.MULTILINE)
    assert "-m pactwright.demo" in makefile


def test_demo_runs_and_shows_the_reference_hashes() -> None:
    from pactwright import demo

    lines: list[str] = []
    assert demo.run(out=lines.append) == 0, "\n".join(lines)
    output = "\n".join(lines)
    for name in demo.REFERENCE_POLICIES:
        result = check_bytes((REPO / "policies" / name).read_bytes())
        assert result.candidate is not None
        assert f"policies/{name}" in output
        assert result.candidate.hash() in output
    assert "error[PW131]" in output
    # The unsafe fixture fails as the README says: the chargeback is refused, the money stranded.
    assert "VIOLATED funds_available" in output
    assert re.search(r"^\s+4\. arbiter\s+refused chargeback\s", output, re.MULTILINE)
    assert "VIOLATED funds_not_stuck" in output
    assert "VIOLATED settles_once" not in output
