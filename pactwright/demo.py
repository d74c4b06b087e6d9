"""`python -m pactwright.demo` (what `make demo` runs): the pipeline so far, step by step.

The demo is an ordered tuple of small steps (`STEPS`) sharing one `Demo`
context, so later stages (compile, verify, approve, activate) are one new
function each, appended to the tuple. Every step prints what it did and what
it shows; a step that finds something wrong raises `DemoFailure`, and the
demo exits 1 instead of pretending. Everything it writes goes to a temporary
directory that is removed at the end, except the bundles, which go to
`build/` (ignored by git) so their reports can be opened afterwards.
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pactwright import __version__

# The three reference policies of the shared spec (policies/ holds more).
REFERENCE_POLICIES = ("marketplace_milestone.pact", "support_refund.pact", "unsafe_chargeback.pact")

# The blocker from the spec's EXAMPLES.md: an R4 effect called without approval.
BAD_POLICY_NAME = "refund_without_approval.pact"
_APPROVAL_LINE = "  approval by refund_approver not requester\n"


class DemoFailure(Exception):
    """A step saw something other than what the demo promises to show."""


@dataclass
class Demo:
    """What the steps share: where policies are, a scratch directory, and results."""

    policies: Path
    workdir: Path
    build: Path
    hashes: dict[str, str] = field(default_factory=dict)
    bundles: dict[str, Path] = field(default_factory=dict)
    store: Path = Path()
    trust: Path = Path()
    out: Callable[[str], None] = print

    def policy(self, name: str) -> Path:
        return self.policies / name


Step = Callable[[Demo], None]


def check_reference_policies(demo: Demo) -> None:
    """Check the three reference policies; each passes and gets a candidate hash."""
    from pactwright.cli.cmd_check import check_file

    width = max(len(f"policies/{name}") for name in REFERENCE_POLICIES)
    for name in REFERENCE_POLICIES:
        report, _ = check_file(str(demo.policy(name)))
        shown = f"policies/{name}"
        if not report.ok or report.candidate_hash is None:
            blockers = ", ".join(sorted({d.code for d in report.diagnostics if d.is_blocker})) or report.unreadable
            raise DemoFailure(f"{shown} should pass `check` but did not ({blockers})")
        warnings = [d.code for d in report.diagnostics if not d.is_blocker]
        note = f"  ({len(warnings)} warning(s): {', '.join(warnings)})" if warnings else ""
        demo.out(f"  {shown:<{width}}  ok  {report.candidate_hash}{note}")
        demo.hashes[name] = report.candidate_hash
    demo.out("")
    demo.out("  unsafe_chargeback.pact passes `check` on purpose: it is well formed; the unsafe")
    demo.out("  part (a chargeback from an escrow the release already emptied) is for the verifier.")


def emit_candidate(demo: Demo) -> None:
    """Write one candidate's canonical bytes and show that the hash is theirs."""
    from pactwright.cli.cmd_check import check_file

    name = REFERENCE_POLICIES[0]
    _, data = check_file(str(demo.policy(name)))
    if data is None:
        raise DemoFailure(f"policies/{name} produced no candidate")
    target = demo.workdir / "candidate.json"
    target.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != demo.hashes.get(name):
        raise DemoFailure(f"sha256 of the written candidate is {digest}, `check` said {demo.hashes.get(name)}")
    demo.out(f"  pactwright check policies/{name} --emit-candidate candidate.json")
    demo.out(f"  wrote {len(data)} bytes of RFC 8785 JSON; sha256 of the file = {digest}")
    demo.out("  that is the hash a reviewer approves.")


def layout_does_not_change_the_hash(demo: Demo) -> None:
    """Comments and blank lines do not change the candidate; a clause label does."""
    from pactwright.compiler.pipeline import check_text

    name = REFERENCE_POLICIES[0]
    text = demo.policy(name).read_text("utf-8")
    stripped = "\n".join(line.split("#", 1)[0].rstrip() for line in text.splitlines() if line.split("#", 1)[0].strip())
    relabelled = text.replace('clause "4.1"', 'clause "4.1a"', 1)
    same = check_text(stripped)
    other = check_text(relabelled)
    if same.candidate is None or other.candidate is None:
        raise DemoFailure("a variant of the reference policy stopped passing `check`")
    if same.candidate.hash() != demo.hashes[name]:
        raise DemoFailure("removing comments and blank lines changed the candidate hash")
    if other.candidate.hash() == demo.hashes[name]:
        raise DemoFailure("changing a clause label did not change the candidate hash")
    demo.out(f"  without comments and blank lines: {same.candidate.hash()}  (same)")
    demo.out(f'  with clause "4.1" relabelled "4.1a": {other.candidate.hash()}  (different)')


def refuse_a_blocker(demo: Demo) -> None:
    """A policy with a blocker is refused with a located diagnostic and no candidate."""
    from pactwright.cli._render import FileReport, render_text
    from pactwright.compiler.pipeline import check_bytes

    source = demo.policy("support_refund.pact").read_text("utf-8")
    if _APPROVAL_LINE not in source:
        raise DemoFailure("support_refund.pact no longer has the approval line this step removes")
    bad = demo.workdir / BAD_POLICY_NAME
    bad.write_text(source.replace(_APPROVAL_LINE, "", 1), "utf-8")
    demo.out(f"  wrote {bad.name}: support_refund.pact without `approval by refund_approver not requester`")
    demo.out(f"  pactwright check {bad.name}")
    demo.out("")
    data = bad.read_bytes()
    result = check_bytes(data)
    if result.ok or result.candidate is not None:
        raise DemoFailure(f"{bad.name} was accepted; it calls an R4 effect without an approval")
    report = FileReport(bad.name, result.diagnostics, source=data.decode("utf-8"))
    for line in render_text(report).splitlines():
        demo.out(f"    {line}")
    demo.out("")
    codes = ", ".join(d.code for d in result.blockers)
    demo.out(f"  refused ({codes}): no candidate, so nothing can be compiled or approved; exit code 1")


def _verify_options() -> Any:
    from pactwright.verifier.explorer import Bounds
    from pactwright.verifier.verify import VerifyOptions

    return VerifyOptions(bounds=Bounds())


def build_reference_bundles(demo: Demo) -> None:
    """Compile and verify the two safe reference policies into build/<name>/."""
    from pactwright.cli._build import build_bundle

    for name in REFERENCE_POLICIES[:2]:
        target = demo.build / Path(name).stem
        built = build_bundle(str(demo.policy(name)), str(target), _verify_options())
        report = built.report
        if report["verdict"] != "pass":
            raise DemoFailure(f"{name} should verify but its report says {report['verdict']}")
        verdicts: dict[str, int] = {}
        for invariant in report["invariants"]:
            verdicts[invariant["verdict"]] = verdicts.get(invariant["verdict"], 0) + 1
        summary = ", ".join(f"{count} {verdict}" for verdict, count in sorted(verdicts.items()))
        exploration = report["exploration"]
        demo.out(f"  pactwright build policies/{name} -o {_shown(target)}")
        demo.out(
            f"    {len(built.files)} files, manifest {built.manifest_hash[:23]}…; "
            f"explored {exploration['states']:,} states ({'exhausted' if exploration['exhausted'] else 'bounded'}); "
            f"invariants: {summary}"
        )
        uncaught = [m for m in report["mutants"] if m["status"] == "uncaught"]
        if uncaught:
            demo.out(f"    {len(uncaught)} mutant(s) no invariant catches, e.g. {uncaught[0]['description']}")
        demo.out(f"    report: {_shown(target / 'report.html')}")
        demo.bundles[name] = target


# What the verifier must find in unsafe_chargeback.pact: the runtime refuses the chargeback at
# commit (escrow is already empty), and the agreement is left in `released` with money it can never move.
UNSAFE_FINDINGS = {
    "funds_available": ["fund", "deliver", "release", "refused chargeback"],
    "funds_not_stuck": ["fund", "deliver", "release"],
}


def refuse_the_unsafe_policy(demo: Demo) -> None:
    """The verifier refuses unsafe_chargeback.pact: the chargeback is refused at commit and money is stranded.

    Each finding comes with a replayed counterexample; the refused command
    never commits, so the policy's own invariants are not what fails.
    """
    from pactwright.cli._build import build_bundle
    from pactwright.verifier.render_text import render_summary

    name = REFERENCE_POLICIES[2]
    target = demo.build / Path(name).stem
    built = build_bundle(str(demo.policy(name)), str(target), _verify_options())
    report = built.report
    found: dict[str, list[str]] = {}
    for invariant in report["invariants"]:
        if invariant["verdict"] == "violated":
            cx = report["counterexamples"][invariant["counterexample"]]
            events = [str(e.get("command")) for e in cx["events"]] if cx["replayed"] else ["(not replayed)"]
            found[invariant["name"]] = events
    if report["verdict"] != "fail" or found != UNSAFE_FINDINGS:
        raise DemoFailure(f"{name} should be refused with {UNSAFE_FINDINGS}; got verdict {report['verdict']}, {found}")
    demo.out(f"  pactwright build policies/{name} -o {_shown(target)}")
    demo.out("")
    for line in render_summary(report, built.scale, _shown(target / "report.html")).splitlines():
        demo.out(f"    {line}")
    demo.out("")
    demo.out("  exit code 1: `sign` will refuse this bundle because its report fails")


def _cli(demo: Demo, *args: str, expect: int = 0, show: bool = True) -> str:
    """Run one `pactwright` command as a user would, and show what it printed."""
    import subprocess

    shown = " ".join(_shown(Path(a)) if "/" in a else a for a in args)
    demo.out(f"  $ pactwright {shown}")
    done = subprocess.run(
        [sys.executable, "-m", "pactwright.cli.main", *args], capture_output=True, text=True, check=False
    )
    output = (done.stdout + done.stderr).rstrip()
    if show and output:
        for line in output.splitlines():
            demo.out(f"    {line}")
    if done.returncode != expect:
        raise DemoFailure(f"`pactwright {shown}` exited {done.returncode}, expected {expect}:\n{output}")
    return output


def approve_sign_activate(demo: Demo) -> None:
    """Demo keys approve, sign and activate the reference bundles into an SQLite store."""
    keys = demo.workdir / "keys"
    keys.mkdir()
    trust = demo.workdir / "trust.json"
    store = demo.build / "demo-store.sqlite"
    for leftover in (store, store.with_name(store.name + "-wal"), store.with_name(store.name + "-shm")):
        leftover.unlink(missing_ok=True)
    demo.store = store
    demo.trust = trust
    _cli(demo, "keygen", "--out", str(keys / "alice"))
    _cli(demo, "keygen", "--out", str(keys / "ci"))
    _cli(demo, "trust", "add", str(keys / "alice.pub"), "--role", "approver", "--file", str(trust), show=False)
    _cli(demo, "trust", "add", str(keys / "ci.pub"), "--role", "signer", "--file", str(trust), show=False)
    for name, bundle in demo.bundles.items():
        demo.out("")
        _cli(demo, "approve", str(bundle), "--key", str(keys / "alice.key"), "--approver", "alice")
        _cli(demo, "sign", str(bundle), "--key", str(keys / "ci.key"), "--trust", str(trust))
        _cli(demo, "activate", str(bundle), "--trust", str(trust), "--store", str(store))
        demo.out(f"  {name}: active in {_shown(store)}")


def refuse_a_tampered_bundle(demo: Demo) -> None:
    """One changed byte in a signed bundle: activation refuses and the store is unchanged."""
    import shutil

    source = demo.bundles[REFERENCE_POLICIES[0]]
    tampered = demo.workdir / "tampered"
    shutil.copytree(source, tampered)
    program = tampered / "ledger" / "release.num"
    data = bytearray(program.read_bytes())
    index = data.index(b"10%")
    data[index : index + 3] = b"90%"
    program.write_bytes(bytes(data))
    demo.out("  changed `10% to @platform:fees` into `90% to @platform:fees` in ledger/release.num")
    before = demo.store.read_bytes()
    _cli(demo, "activate", str(tampered), "--trust", str(demo.trust), "--store", str(demo.store), expect=1)
    if demo.store.read_bytes() != before:
        raise DemoFailure("the refused activation changed the store file")
    demo.out("  the store file is byte-for-byte what it was")


def run_an_agreement(demo: Demo) -> None:
    """The runtime on the activated milestone: one agreement's happy path, a terminal race
    between two processes, the refusal and the single settlement, delivery to the ledger
    (a database of its own), and the evidence."""
    import json
    import subprocess

    store = str(demo.store)
    clock = demo.workdir / "clock"
    day = 86_400
    start = 1_780_000_000  # trusted time comes from the runtime's clock; the demo moves a test clock
    clock.write_text(str(start))
    common = ("--store", store, "--clock-file", str(clock))
    parties = ("--party", "buyer=alice", "--party", "seller=bob", "--party", "arbiter=carol")
    _cli(demo, "open", "marketplace.milestone", "--param", "price=64.90", *parties, "--id", "m1", *common)
    _cli(demo, "submit", "m1", "fund", "--as", "buyer:alice", "--key", "fund-1", *common)
    _cli(demo, "submit", "m1", "deliver", "--as", "seller:bob", "--key", "deliver-1", *common)
    demo.out("  a retry of the same command with the same key returns the original event, nothing new:")
    _cli(demo, "submit", "m1", "deliver", "--as", "seller:bob", "--key", "deliver-1", *common)
    clock.write_text(str(start + 15 * day))
    demo.out("  15 days later: the buyer's release and the scheduler's auto_release race, in two processes")
    commands = [
        ("release", "buyer:alice", "race-release"),
        ("auto_release", "scheduler:scheduler", "race-auto"),
    ]
    racers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pactwright.cli.main",
                "submit",
                "m1",
                name,
                "--as",
                actor,
                "--key",
                key,
                "--expect-version",
                "2",
                *common,
                "--format",
                "json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, actor, key in commands
    ]
    outcomes = [(racer.wait(), *racer.communicate()) for racer in racers]
    won = [name for (name, _, _), (code, _, _) in zip(commands, outcomes, strict=True) if code == 0]
    lost = [err.strip() for (code, _, err) in outcomes if code != 0]
    if len(won) != 1 or len(lost) != 1:
        raise DemoFailure(f"the race should commit exactly once; committed: {won}, refused: {lost}")
    demo.out(f"    committed: {won[0]}")
    demo.out(f"    refused:   {lost[0].splitlines()[0]}")
    _cli(demo, "worker", "--store", store, "--drain", "--clock-file", str(clock))
    shown = _cli(demo, "show", "m1", "--store", store, "--format", "json", show=False)
    view = json.loads(shown)
    balances = view.get("balances", {})
    demo.out(f"  m1 is {view.get('state')} at version {view.get('version')}; balances {balances}")
    demo.out(f"  the ledger holds {view.get('ledger_balances')}")
    if balances.get("escrow") != "0" or view.get("ledger_balances", {}).get("escrow") != "0":
        raise DemoFailure("escrow should be empty in the store and in the ledger after one settlement")
    _cli(demo, "evidence", "m1", "--store", store)
    _cli(demo, "evidence", "verify", "m1", "--store", store)


def _refund_step(demo: Demo) -> None:
    """The support refund against the provider simulator (pactwright/_demo_refund.py)."""
    from pactwright._demo_refund import refund_with_approval

    refund_with_approval(demo)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


STEPS: tuple[tuple[str, Step], ...] = (
    ("check the reference policies", check_reference_policies),
    ("emit a canonical candidate", emit_candidate),
    ("the hash follows meaning, not layout", layout_does_not_change_the_hash),
    ("a policy with a blocker is refused", refuse_a_blocker),
    ("build and verify the reference policies", build_reference_bundles),
    ("the verifier refuses the unsafe policy", refuse_the_unsafe_policy),
    ("approve, sign and activate", approve_sign_activate),
    ("a tampered bundle is refused at activation", refuse_a_tampered_bundle),
    ("run an agreement: commands, a terminal race, the ledger, evidence", run_an_agreement),
    ("a refund: preview, approval, a lost response, reconciliation, the evidence claim", _refund_step),
)


def find_policies() -> Path:
    """`policies/` under the working directory, else beside the source tree."""
    for base in (Path.cwd(), Path(__file__).resolve().parents[1]):
        candidate = base / "policies"
        if all((candidate / name).is_file() for name in REFERENCE_POLICIES):
            return candidate
    raise DemoFailure("cannot find policies/ with the reference policies; run the demo from the repository root")


def run(
    steps: tuple[tuple[str, Step], ...] = STEPS, out: Callable[[str], None] = print, build_dir: Path | None = None
) -> int:
    """Run every step in order; 0 when all showed what they promise, 1 otherwise."""
    out(f"pactwright {__version__} demo")
    try:
        policies = find_policies()
    except DemoFailure as exc:
        out(f"demo failed: {exc}")
        return 1
    with tempfile.TemporaryDirectory(prefix="pactwright-demo-") as scratch:
        demo = Demo(policies=policies, workdir=Path(scratch), build=build_dir or Path.cwd() / "build", out=out)
        for number, (title, step) in enumerate(steps, start=1):
            out("")
            out(f"[{number}/{len(steps)}] {title}")
            try:
                step(demo)
            except DemoFailure as exc:
                out(f"demo failed at step {number}: {exc}")
                return 1
    out("")
    out("done. bundles and reports are in build/, the activated store in build/demo-store.sqlite.")
    return 0


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
