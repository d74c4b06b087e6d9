"""`pactwright verify BUNDLE_OR_POLICY`: explore, prove, and report."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pactwright.errors import UsageError


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="BUNDLE_OR_POLICY")
    add_bound_options(parser)
    parser.add_argument("--format", choices=("text", "json", "junit"), default="text")
    parser.add_argument("--report-dir", metavar="DIR", help="also write report.json, report.md and report.html here")


def add_bound_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--faults", type=int, default=1, metavar="N", help="fault budget per run (default 1)")
    parser.add_argument("--agreements", type=int, default=1, metavar="N", help="concurrent agreements (default 1)")
    parser.add_argument("--max-states", type=int, default=2_000_000, metavar="N")
    parser.add_argument("--max-depth", type=int, default=64, metavar="N")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 whenever a bound stopped exploration early, even if proofs or --allow-incomplete pass the run",
    )
    parser.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="accept a run a bound stopped before it decided every invariant: verdict pass, recorded in the report",
    )
    parser.add_argument("--no-mutants", action="store_true", help="skip mutation (vacuity) analysis")
    parser.add_argument("--no-proofs", action="store_true", help="skip z3 amount proofs and k-induction")
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="processes for mutation analysis (default: the number of cores; 1 runs in process); same report for any N",
    )


def options_from(args: argparse.Namespace) -> Any:
    from pactwright.errors import UsageError
    from pactwright.verifier.explorer import Bounds
    from pactwright.verifier.verify import TerminalProgress, VerifyOptions

    for name in ("faults", "agreements", "max_states", "max_depth", "jobs"):
        value = getattr(args, name)
        if value < (0 if name == "faults" else 1):
            raise UsageError(f"`--{name.replace('_', '-')}` must be at least {0 if name == 'faults' else 1}")
    show = sys.stderr.isatty() and not os.environ.get("CI")
    return VerifyOptions(
        bounds=Bounds(args.agreements, args.faults, args.max_depth, args.max_states),
        mutants=not args.no_mutants,
        proofs=not args.no_proofs,
        progress=TerminalProgress() if show else None,
        allow_incomplete=args.allow_incomplete,
        jobs=args.jobs,
    )


def load_target(target: str) -> dict[str, bytes]:
    """Bundle files, from a bundle directory or by compiling a policy in memory."""
    from pactwright.cli._inputs import read_policy
    from pactwright.errors import UsageError

    path = Path(target)
    if path.is_dir():
        files: dict[str, bytes] = {}
        for item in sorted(path.rglob("*")):
            if item.is_file():
                files[item.relative_to(path).as_posix()] = item.read_bytes()
        if "model.json" not in files:
            raise UsageError(f"`{target}` is not a bundle (no model.json)")
        check_manifest(files, target)
        return files
    from pactwright.compiler.bundle import compile_candidate

    result = read_policy(target)
    return compile_candidate(result.candidate, result.source_map, target)


def check_manifest(files: dict[str, bytes], target: str) -> None:
    """A bundle is verified only if its files are the ones its manifest lists.

    Verifying a hand-edited `model.json` would produce a report about a model
    nobody compiled; refuse instead (full activation checks are `activate`'s).
    """
    from pactwright.canonical import hash_bytes, load_json
    from pactwright.errors import PactwrightError, VerifyError
    from pactwright.manifest import MANIFEST_PATH

    if MANIFEST_PATH not in files:
        raise VerifyError(f"`{target}` has no manifest.json", code="PW306")
    try:
        manifest = load_json(files[MANIFEST_PATH], require_canonical=True)
        listed = {a["path"]: a for a in manifest["artifacts"]}
    except (PactwrightError, KeyError, TypeError) as exc:
        raise VerifyError(f"`{target}/manifest.json` is not a valid manifest: {exc}", code="PW306") from None
    for path, entry in sorted(listed.items()):
        data = files.get(path)
        if data is None:
            raise VerifyError(f"`{path}` is listed in the manifest but missing", code="PW306")
        if hash_bytes(data) != entry["sha256"] or len(data) != entry["size"]:
            raise VerifyError(
                f"`{path}` does not match the manifest",
                code="PW306",
                expected=f"{entry['sha256']} size {entry['size']}",
                found=f"{hash_bytes(data)} size {len(data)}",
            )


def exit_code(report: dict[str, Any], strict: bool) -> int:
    """0 for `pass`; 1 for `fail` and `incomplete`, and under `--strict` for any search a bound stopped."""
    if report["verdict"] != "pass":
        return 1
    if strict and not report["exploration"]["exhausted"]:
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    import time

    from pactwright.verifier.render_junit import render_junit
    from pactwright.verifier.render_text import render_summary
    from pactwright.verifier.verify import verify_files

    files = load_target(args.target)
    options = options_from(args)
    if args.report_dir:
        check_report_dir(Path(args.report_dir))
    started = time.perf_counter()
    report = verify_files(files, options)
    elapsed = time.perf_counter() - started
    if options.progress is not None:
        sys.stderr.write("\n")
    written = write_reports(report, Path(args.report_dir)) if args.report_dir else None
    scale = json.loads(files["model.json"])["currency"]["scale"]
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    elif args.format == "junit":
        sys.stdout.write(render_junit(report))
    else:
        sys.stdout.write(render_summary(report, scale, str(written) if written else None))
        states = report["exploration"]["states"]
        sys.stdout.write(
            f"time: {elapsed:.2f} s ({states / max(elapsed, 1e-9):,.0f} states/s including proofs and mutants)\n"
        )
    return exit_code(report, args.strict)


def _report_dir_error(directory: Path, why: str) -> UsageError:
    from pactwright.errors import UsageError

    return UsageError(
        f"cannot write reports to `{directory}`: {why}",
        code="PW307",
        hint="pass `--report-dir` a directory, or a path where one can be created",
    )


def check_report_dir(directory: Path) -> None:
    """Refuse `--report-dir` before verifying (PW307) when it cannot become a directory of reports.

    Checked first so that a long verification is not run only to fail at the
    end, and nothing is created: the closest existing ancestor must be a
    writable directory.
    """
    if directory.exists():
        if not directory.is_dir():
            raise _report_dir_error(directory, "it exists and is not a directory")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise _report_dir_error(directory, "the directory is not writable")
        return
    for ancestor in directory.absolute().parents:
        if ancestor.exists():
            if not ancestor.is_dir():
                raise _report_dir_error(directory, f"`{ancestor}` is not a directory")
            if not os.access(ancestor, os.W_OK | os.X_OK):
                raise _report_dir_error(directory, f"`{ancestor}` is not writable")
            return


def write_reports(report: dict[str, Any], directory: Path) -> Path:
    """report.json, report.md and report.html in `directory`, each replaced in one rename; PW307 on failure."""
    from pactwright._files import write_atomic
    from pactwright.errors import UsageError
    from pactwright.verifier.render import report_files

    check_report_dir(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in report_files(report).items():
            write_atomic(directory / name, data)
    except OSError as exc:
        raise _report_dir_error(directory, str(exc.strerror or exc)) from None
    except UsageError as exc:
        raise _report_dir_error(directory, exc.message) from None
    return directory / "report.html"
