"""The review page's facts, read back from the HTML with the standard library's parser.

Both page kinds are rendered from real inputs: bundles compiled and
verified in-process from the reference policies (the unsafe chargeback
fails with two counterexamples), and stores where agreements really ran:
the marketplace escrow delivered to a real ledger by the outbox worker (one
delivery answered with a posting the commit did not expect, so it is
quarantined), and a support refund whose provider response was lost and
then recovered by reconciliation against the HTTP provider simulator. The
tests check what a reviewer reads (clause labels, source lines, programs,
verdicts, counterexample steps, events, balances, effect lifecycles, ledger
references and whether each matched), that every piece of text is escaped,
and that the same input renders to the same bytes.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pactwright.cli.main import main
from pactwright.runtime import TestClock, open_agreement, submit
from pactwright.runtime.ledger_api import Ledger
from pactwright.runtime.ledger_db import open_ledger
from pactwright.runtime.numscript import Posting
from pactwright.runtime.store import open_store
from pactwright.runtime.worker import Worker
from pactwright.service.review import render_agreement_page, render_bundle_files, render_bundle_page
from tests.bundles import GOLDEN, GOLDEN_BUNDLES, POLICIES
from tests.signed_bundles import BACKENDS, POSTGRES_URL, compile_verified, store_with_policy, write

T0 = 1780315200  # 2026-06-01T12:00:00Z
PARTIES = {"buyer": "alice", "seller": "bob", "arbiter": "carol"}
HAPPY = (("fund", "buyer", "alice"), ("deliver", "seller", "bob"), ("release", "buyer", "alice"))


# Inputs ------------------------------------------------------------------------------------------


def bundle_files(name: str, source: bytes | None = None) -> dict[str, bytes]:
    """The policy's bundle as `pactwright build` writes it (report included; mutants and proofs off)."""
    path = POLICIES / f"{name}.pact"
    return compile_verified(source if source is not None else path.read_bytes(), path.name)[0]


def bundle_dir(name: str, directory: Path) -> Path:
    return write(bundle_files(name), directory / name)


class Lying:
    """A ledger that applies the postings but answers with one minor unit more on the first."""

    def __init__(self, inner: Ledger) -> None:
        self.inner = inner

    def apply(self, reference: str, program_text: str, variables: dict[str, str]) -> list[Posting]:
        answer = self.inner.apply(reference, program_text, variables)
        first = answer[0]
        return [Posting(first.source, first.destination, first.amount + 1, first.asset), *answer[1:]]

    def postings(self, reference: str) -> list[Posting] | None:
        return self.inner.postings(reference)

    def balances(self, accounts: list[str] | None = None) -> dict[str, int]:
        return self.inner.balances(accounts)


@contextlib.contextmanager
def marketplace_store(backend: str, directory: Path) -> Iterator[str]:
    """`m1` ran fund, deliver, release, all delivered; `q1` was funded and its delivery answered wrongly."""
    with store_with_policy(backend, directory, POLICIES / "marketplace_milestone.pact") as url:
        try:
            with open_store(url) as store, open_ledger(None, url) as ledger:
                for agreement, steps in (("m1", HAPPY), ("q1", HAPPY[:1])):
                    open_agreement(store, "marketplace.milestone", {"price": "64.90"}, PARTIES,
                                   agreement_id=agreement, clock=TestClock(T0))  # fmt: skip
                    for n, (transition, role, party) in enumerate(steps, 1):
                        submit(store, agreement, transition, role, party, f"{agreement}-{transition}",
                               clock=TestClock(T0 + 60 * n))  # fmt: skip
                    worker_ledger: Ledger = Lying(ledger) if agreement == "q1" else ledger
                    Worker(store, worker_ledger, TestClock(T0 + 600)).drain()
            yield url
        finally:
            if backend == "postgresql":
                import psycopg

                schema = url.rsplit("%3D", 1)[1]
                with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
                    admin.execute(f'DROP SCHEMA IF EXISTS "{schema}_ledger" CASCADE')


@contextlib.contextmanager
def refund_store_ran(directory: Path) -> Iterator[str]:
    """A support refund (`r1`) issued with approval; the provider's first answer is lost, then reconciled."""
    from pactwright.runtime.effect_http import Credentials, HttpAdapter, load_providers
    from pactwright.runtime.effect_worker import EffectWorker
    from pactwright.runtime.provider_sim import start_simulator
    from tests.effect_env import issued, providers_file, refund_store

    with start_simulator(slow_seconds=1.5) as sim, refund_store("sqlite", directory, "reconcilable") as url:
        with open_store(url) as store:
            issued(store)
            sim.queue("lost_response")
            adapter = HttpAdapter(load_providers(providers_file(directory, sim.url)), Credentials())
            for n in range(12):
                if not EffectWorker(store, adapter, TestClock(T0 + 30 + n * 1000)).drain() and n > 0:
                    break
        yield url


# Reading the page --------------------------------------------------------------------------------


@dataclass
class Node:
    tag: str
    attrs: dict[str, str]
    children: list[Node] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)  # its text and its descendants', in document order

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def find(self, predicate: Callable[[Node], bool]) -> list[Node]:
        """Every descendant for which `predicate` holds, in document order."""
        out: list[Node] = []
        stack = list(reversed(self.children))
        while stack:
            node = stack.pop()
            if predicate(node):
                out.append(node)
            stack.extend(reversed(node.children))
        return out


_VOID = {"meta", "link", "br", "img", "input", "hr", "source", "wbr", "col", "area", "base", "embed", "param", "track"}


class Tree(HTMLParser):
    """A tolerant DOM: elements with attributes, children and the text inside them, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {})
        self.stack = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in _VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth].tag == tag:
                del self.stack[depth:]
                return

    def handle_data(self, data: str) -> None:
        for node in self.stack:
            node.text_parts.append(data)


def parse(html: str) -> Node:
    tree = Tree()
    tree.feed(html)
    tree.close()
    return tree.root


def text_of(node: Node) -> str:
    return re.sub(r"\s+", " ", "".join(node.text_parts)).strip()


def by_id(root: Node, ident: str) -> Node:
    found = root.find(lambda n: n.attrs.get("id") == ident)
    assert len(found) == 1, f"{len(found)} elements with id {ident!r}"
    return found[0]


def with_class(root: Node, css: str, tag: str | None = None) -> list[Node]:
    return root.find(lambda n: css in n.classes and (tag is None or n.tag == tag))


def with_attr(root: Node, name: str, value: str | None = None) -> list[Node]:
    return root.find(lambda n: name in n.attrs and (value is None or n.attrs[name] == value))


def verdict_rows(root: Node) -> dict[str, str]:
    """name -> verdict of every row of the verification tables under `root`."""
    return {
        n.attrs["data-name"]: n.attrs["data-verdict"] for n in with_attr(root, "data-verdict") if "data-name" in n.attrs
    }


@pytest.fixture(scope="module")
def unsafe_page() -> Node:
    source = (POLICIES / "unsafe_chargeback.pact").read_bytes()
    return parse(render_bundle_files(bundle_files("unsafe_chargeback"), source))


# The bundle page ---------------------------------------------------------------------------------


def test_the_failing_bundle_shows_each_clause_with_its_lines_program_verdicts_and_counterexamples(
    unsafe_page: Node,
) -> None:
    page = unsafe_page
    assert "verdict-fail" in page.find(lambda n: n.tag == "body")[0].classes
    assert text_of(by_id(page, "verdict")) == "FAIL"
    cards = {c.attrs["data-clause"]: c for c in with_class(page, "clause", "article")}
    assert sorted(cards) == ["2.1", "3.1", "4.1", "7.1", "7.2", "8.1"]
    release = cards["4.1"]
    # Its source lines, exactly as written in the policy, with their numbers.
    source = with_class(release, "source", "pre")[0]
    lines = {int(n.attrs["data-line"]): text_of(n) for n in with_class(source, "line", "span")}
    assert lines[36].endswith('clause "4.1" transition release: delivered -> released {')
    assert sorted(lines) == list(range(36, 43))
    # Its transition and its ledger program, every line of `ledger/release.num`, the posting's lines shaded.
    transition = with_attr(release, "data-transition", "release")[0]
    assert "delivered → released" in text_of(transition.find(lambda n: n.tag == "h4")[0])
    program = with_attr(release, "data-program", "ledger/release.num")[0]
    shown = [("".join(n.children[0].text_parts), n) for n in with_class(program, "line", "span")]
    written = bundle_files("unsafe_chargeback")["ledger/release.num"].decode().splitlines()
    assert [text_of(n)[len(no) :].strip() for no, n in shown] == [w.strip() for w in written]
    assert [int(n.attrs["data-line"]) for _, n in shown if "posting" in n.classes] == list(range(10, 17))
    # The verdicts that cite it: `settles_once` names `release`; the built-in checks its counterexamples break.
    assert verdict_rows(release) == {"settles_once": "holds-to-bound", "funds_available": "violated",
                                     "funds_not_stuck": "violated"}  # fmt: skip
    assert verdict_rows(cards["7.1"]) == {"escrow_never_negative": "holds-to-bound"}  # mutants off: no vacuity
    # The chargeback is what counterexample 1 is refused at commit: its clause says so.
    refs = [(r.attrs["data-counterexample"], text_of(r)) for r in with_class(cards["8.1"], "cx-ref")]
    assert [n for n, _ in refs] == ["1"]
    assert "4. refused chargeback" in refs[0][1] and "funds_available" in refs[0][1]
    assert "failing" in cards["8.1"].classes and "failing" not in cards["7.2"].classes
    # Counterexample 1 in full: its steps and their commands.
    steps = [(n.attrs["data-step"], n.attrs["data-command"]) for n in with_attr(by_id(page, "cx-1"), "data-command")]
    assert steps == [("1", "fund"), ("2", "deliver"), ("3", "release"), ("4", "refused chargeback")]
    on_path = {n.attrs["data-transition"] for n in with_class(by_id(page, "cx1-svg"), "cx-path", "g")}
    assert on_path == {"fund", "deliver", "release"}


@pytest.mark.parametrize("name", ["marketplace_milestone", "support_refund"])
def test_a_reference_bundle_passes_and_every_clause_and_program_is_on_its_page(name: str, tmp_path: Path) -> None:
    files = bundle_files(name)
    page = parse(render_bundle_page(bundle_dir(name, tmp_path)))
    assert text_of(by_id(page, "verdict")) == "PASS"
    import json

    trace = json.loads(files["trace.json"])
    cards = {c.attrs["data-clause"]: c for c in with_class(page, "clause", "article")}
    assert sorted(cards) == sorted(c["clause"] for c in trace["clauses"])
    for card in cards.values():
        assert re.search(r"lines? \d+", text_of(with_class(card, "where")[0])), "each clause gives its lines"
        assert not with_class(card, "source", "pre"), "no source was given: line numbers only"
    table = json.loads(files["transitions.json"])
    for row in table["transitions"]:
        program = with_attr(page, "data-program", row["ledger"]["program"]) if row["ledger"] else []
        assert len(program) == (1 if row["ledger"] else 0), row["id"]
    assert not with_class(page, "counterexample", "section")
    if name == "support_refund":
        issue = with_attr(cards["2"], "data-transition", "issue")[0]
        assert "approval by refund_approver, not the requester" in text_of(issue)
        assert "call refund_payment carrying amount (reconcilable, risk R4)" in text_of(issue)
        # Invariants that name the effect `issue` calls cite its clause.
        assert verdict_rows(cards["2"]) == {"refund_at_most_once": "holds-to-bound",
                                            "refund_within_ceiling": "holds-to-bound",
                                            "refund_only_when_approved": "holds-to-bound"}  # fmt: skip
        why = with_attr(cards["2"], "data-name", "refund_only_when_approved")[0]
        assert text_of(with_class(why, "why")[0]) == "names issue, refund_payment"


def test_a_script_in_a_clause_is_shown_as_text_and_never_becomes_markup() -> None:
    label = '<script>alert("x")</script>'
    source = (
        (POLICIES / "unsafe_chargeback.pact")
        .read_bytes()
        .replace(b'clause "4.1"', f'clause "{label.replace(chr(34), chr(92) + chr(34))}"'.encode())
    )
    html = render_bundle_files(bundle_files("unsafe_chargeback", source), source)
    page = parse(html)
    assert not page.find(lambda n: n.tag == "script"), "no element of the page is a script"
    assert "<script>" not in html and "&lt;script&gt;" in html
    cards = [c for c in with_class(page, "clause", "article") if c.attrs["data-clause"] == label]
    assert len(cards) == 1, "the label is the clause's, as written"
    assert label in text_of(cards[0].find(lambda n: n.tag == "h3")[0])
    assert any(label.replace('"', '\\"') in text_of(n) for n in with_class(cards[0], "line", "span"))


def test_the_bundle_page_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    directory = bundle_dir("unsafe_chargeback", tmp_path)
    first = render_bundle_page(directory)
    assert render_bundle_page(directory) == first
    # A fresh interpreter (new set and dict orders, no caches) writes the same file.
    out = tmp_path / "page.html"
    done = subprocess.run([sys.executable, "-m", "pactwright.cli.main", "report", str(directory), "--out", str(out)],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert out.read_text("utf-8") == first


def test_report_refuses_a_source_that_is_not_the_bundles_and_a_tampered_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = bundle_dir("unsafe_chargeback", tmp_path)
    out = tmp_path / "page.html"
    code = main(["report", str(directory), "--source", str(POLICIES / "marketplace_milestone.pact"),
                 "--out", str(out)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "error[PW203]" in err and "Traceback" not in err
    assert not out.exists()
    program = directory / "ledger" / "release.num"
    program.write_text(program.read_text().replace("remaining to", "remaining  to"))
    code = main(["report", str(directory), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "error[PW413]" in err and "Traceback" not in err
    assert not out.exists()
    code = main(["report", str(directory), "--agreement", "m1"])
    assert code == 2 and "error[PW001]" in capsys.readouterr().err


# The agreement page ------------------------------------------------------------------------------


@pytest.fixture(params=BACKENDS)
def marketplace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with marketplace_store(request.param, tmp_path) as url:
        yield url


def test_the_agreement_page_marks_its_path_and_shows_events_balances_and_matched_postings(marketplace: str) -> None:
    with open_store(marketplace) as store, open_ledger(None, marketplace) as ledger:
        html = render_agreement_page(store, "m1", ledger)
        assert render_agreement_page(store, "m1", ledger) == html, "the same store gives the same page"
    page = parse(html)
    assert "ok" in page.find(lambda n: n.tag == "body")[0].classes
    assert text_of(by_id(page, "state")) == "released (final)"
    on_path = {n.attrs["data-transition"] for n in with_class(by_id(page, "ag-svg"), "cx-path", "g")}
    assert on_path == {"fund", "deliver", "release"}
    assert [n.attrs["data-transition"] for n in with_attr(by_id(page, "events"), "data-event")] == [
        "fund", "deliver", "release"]  # fmt: skip
    balances = {n.attrs["data-account"]: [text_of(td) for td in n.children] for n in with_attr(page, "data-account")}
    assert balances["escrow"][2:] == ["0.00 EUR", "0.00 EUR"]
    assert balances["seller"][1:3] == ["sellers:bob:payable", "58.41 EUR"]
    rows = {n.attrs["data-reference"]: n.attrs for n in with_attr(page, "data-reference")}
    assert {r: (a["data-status"], a["data-matched"], a["data-now"]) for r, a in rows.items()} == {
        "m1/1/0": ("delivered", "yes", "equal"), "m1/3/0": ("delivered", "yes", "equal")}  # fmt: skip
    assert by_id(page, "chain").attrs["data-verifies"] == "true"
    assert "that the policy matches the contract or intent it was written from" in text_of(by_id(page, "limits"))


def test_a_quarantined_delivery_is_shown_with_both_sides_and_the_page_asks_for_attention(marketplace: str) -> None:
    with open_store(marketplace) as store:
        page = parse(render_agreement_page(store, "q1"))  # no ledger given: the worker's record only
    assert "attention" in page.find(lambda n: n.tag == "body")[0].classes
    row = with_attr(page, "data-reference", "q1/1/0")[0]
    assert (row.attrs["data-status"], row.attrs["data-matched"]) == ("quarantined", "no")
    assert "data-now" not in row.attrs
    cells = [text_of(td) for td in row.children]
    assert cells[3] == "world → escrow:q1 64.90 EUR" and cells[4] == "world → escrow:q1 64.91 EUR"
    assert "PW560: posting 0: amount is 6491 in the ledger, 6490 expected at commit" in cells[5]


def test_report_writes_the_agreement_page_and_refuses_an_unknown_agreement(
    marketplace: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "m1.html"
    assert main(["report", "--store", marketplace, "--agreement", "m1", "--out", str(out)]) == 0
    with open_store(marketplace) as store, open_ledger(None, marketplace) as ledger:
        assert out.read_text("utf-8") == render_agreement_page(store, "m1", ledger)  # the sibling ledger by default
    capsys.readouterr()
    assert main(["report", "--store", marketplace, "--agreement", "nope"]) == 1
    err = capsys.readouterr().err
    assert "error[PW501]" in err and "Traceback" not in err


def test_the_refund_page_shows_each_effect_call_with_its_lifecycle_and_its_evidence(tmp_path: Path) -> None:
    with refund_store_ran(tmp_path) as url, open_store(url) as store:
        page = parse(render_agreement_page(store, "r1"))
    effects = {n.attrs["data-effect"]: n for n in with_attr(page, "data-effect")}
    assert {k: n.attrs["data-phase"] for k, n in effects.items()} == {
        "r1/1/e0": "acknowledged", "r1/2/e0": "reconciled_recovered"}  # fmt: skip
    refund = effects["r1/2/e0"]
    assert [n.attrs["data-kind"] for n in with_attr(refund, "data-kind")] == ["dispatched", "uncertain", "lookup"]
    assert "authorised by rita holding refund_approver" in text_of(refund)
    claim = text_of(with_class(page, "claim", "ul")[0])
    assert "r1/2 issue by support_agent:sam" in claim and "64.90 EUR" in claim
    limits = text_of(by_id(page, "limits"))
    assert "that the customer received the funds of `r1/2/e0`".replace("`", "") in limits
    row = with_attr(page, "data-reference", "r1/2/0")[0]
    assert (row.attrs["data-status"], row.attrs["data-matched"]) == ("pending", "not-yet")


def test_a_stored_bundle_renders_by_manifest_hash_as_its_directory_does(marketplace: str) -> None:
    from pactwright.errors import StoreError
    from pactwright.service.review import render_stored_bundle

    with open_store(marketplace) as store:
        stored = store.load_active("marketplace.milestone")
        assert render_stored_bundle(store, stored.manifest_hash) == render_bundle_files(stored.files)
        with pytest.raises(StoreError) as refused:
            render_stored_bundle(store, "sha256:" + "0" * 64)
    assert refused.value.code == "PW710"


@pytest.mark.parametrize("name", GOLDEN)
def test_every_golden_bundle_renders_unverified_with_every_clause(name: str) -> None:
    """The golden bundles carry no report: every language construct renders, and no verdict is claimed."""
    import json

    directory = GOLDEN_BUNDLES / name
    page = parse(render_bundle_page(directory))
    assert text_of(by_id(page, "verdict")) == "UNVERIFIED"
    assert not with_attr(page, "data-verdict", "violated") and not with_attr(page, "data-verdict", "holds-to-bound")
    trace = json.loads((directory / "trace.json").read_bytes())
    shown = {c.attrs["data-clause"] for c in with_class(page, "clause", "article")}
    assert shown == {c["clause"] for c in trace["clauses"]} | ({""} if trace["unlabelled"] else set())
