"""The `pactwright` entry point: parse arguments, call the library, map errors to exits.

Exit codes: 0 ok, 1 findings (blockers, violations, refusals, differences),
2 usage or environment errors, 3 internal error. Command modules are
imported only when their command runs, so start-up stays fast and the
runtime's commands never import the compiler.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import traceback
from collections.abc import Sequence

from pactwright import __version__
from pactwright.errors import PactwrightError

# command name -> (module under pactwright.cli, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "check": ("cmd_check", "check policies; print blockers or the candidate hash"),
    "fmt": ("cmd_fmt", "format policies canonically"),
    "compile": ("cmd_compile", "compile a policy into a byte-stable bundle"),
    "explain": ("cmd_explain", "trace a clause to the artifacts that implement it"),
    "diff": ("cmd_diff", "semantic diff of two policies or bundles"),
    "ledger": ("cmd_ledger", "run a ledger program (Numscript subset)"),
    "build": ("cmd_build", "check, compile and verify a policy into a bundle with its report"),
    "verify": ("cmd_verify", "explore a policy with the runtime and an adversarial environment"),
    "activate": ("cmd_activate", "verify a signed bundle and make it the active version in the store"),
    "bundle": ("cmd_bundle", "inspect a bundle: what it is, who approved and signed it, whether it would activate"),
    "store": ("cmd_store", "re-verify every bundle the store holds; exit 1 on tampering"),
    "keygen": ("cmd_keygen", "create an ed25519 key pair for approving or signing"),
    "trust": ("cmd_trust", "edit trust.json: the keys that may approve or sign, and the threshold"),
    "approve": ("cmd_approve", "approve one candidate hash with your key"),
    "sign": ("cmd_sign", "sign a verified, approved bundle"),
    "open": ("cmd_open", "open an agreement on the active version of a pact"),
    "submit": ("cmd_submit", "run one command on an agreement, exactly once per idempotency key"),
    "approvals": ("cmd_approvals", "list, show, grant or reject commands parked until an approver decides"),
    "parties": ("cmd_parties", "register parties' roles and approval keys in the store; list them"),
    "show": ("cmd_show", "show an agreement: state, version, balances, pending outbox, last events"),
    "worker": ("cmd_worker", "deliver the outbox to the ledger, at least once, in commit order"),
    "outbox": ("cmd_outbox", "list outbox entries: pending, delivered, quarantined with both sides"),
    "scheduler": ("cmd_scheduler", "submit due deadline transitions as the pact's clock role, once per deadline"),
    "effects": ("cmd_effects", "list effect calls; reconcile or abandon the ones parked with an unknown outcome"),
    "evidence": ("cmd_evidence", "print an agreement's evidence (claim, support, limits) or verify its hash chain"),
    "gate": ("cmd_gate", "run scenario files against a real runtime and simulator; exit 1 on unsafe evidence"),
    "provider-sim": ("cmd_provider_sim", "run the provider simulator: a payment provider on loopback with faults"),
    "serve": ("cmd_serve", "serve the runtime over HTTP: agreements, commands, approvals, effects, evidence"),
    "report": ("cmd_report", "write the review page of a bundle or an agreement as one HTML file"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error[PW001]: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="pactwright", description="Policies a machine can prove and a human can trace.")
    parser.add_argument("--version", action="version", version=f"pactwright {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        command = importlib.import_module(f"pactwright.cli.{module}")
        command.register(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def _tolerant_output() -> None:
    """Print what a message quotes even where the terminal's encoding cannot: a name given as bytes that are
    not UTF-8 (a lone surrogate once decoded) is shown escaped, not turned into an encoding error."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never let a traceback reach the user."""
    _tolerant_output()
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        command = importlib.import_module(f"pactwright.cli.{COMMANDS[args.command][0]}")
        code: int = command.run(args)
        return code
    except PactwrightError as exc:
        sys.stderr.write(f"error[{exc.code}]: {exc.message}\n")
        if exc.expected is not None:
            sys.stderr.write(f"  expected: {exc.expected}\n")
        if exc.found is not None:
            sys.stderr.write(f"  found:    {exc.found}\n")
        if exc.hint:
            sys.stderr.write(f"help: {exc.hint}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    except Exception:  # noqa: BLE001 - the top-level bug catcher
        detail = traceback.format_exc(limit=-3)
        sys.stderr.write(
            "internal error: this is a bug in pactwright, not in your input.\n"
            f"pactwright {__version__}, python {sys.version.split()[0]}\n"
            "please report it with the command you ran and this excerpt:\n"
            f"{detail}"
        )
        return 3


def entry() -> None:
    raise SystemExit(main())


if __name__ == "__main__":
    entry()
