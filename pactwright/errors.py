"""The error hierarchy: one root, one subclass per room, stable codes.

Codes are part of the public contract (docs/errors.md); tests assert codes,
never message wording. Messages are lowercase, one line, with user values in
backticks. A refusal carries the file and field it concerns and, where there
are two values (expected and found), both of them.
"""

from __future__ import annotations

from typing import ClassVar


class PactwrightError(Exception):
    """Root of every error pactwright raises on purpose.

    Anything that escapes the CLI and is not a `PactwrightError` is a bug and
    is reported as an internal error (exit 3).
    """

    code: ClassVar[str] = "PW000"
    exit_code: ClassVar[int] = 1

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        file: str | None = None,
        field: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            # An instance may refine its class's code (PW754 within LedgerError).
            self.__dict__["code"] = code
        self.file = file
        self.field = field
        self.expected = expected
        self.found = found
        self.hint = hint

    def to_json(self) -> dict[str, str]:
        """The error as a flat JSON object for `--format json` output."""
        out = {"code": self.code, "message": self.message}
        for key in ("file", "field", "expected", "found", "hint"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class UsageError(PactwrightError):
    """Bad command-line usage or an unreadable input file (exit 2)."""

    code = "PW001"
    exit_code = 2


class CanonicalError(PactwrightError):
    """A document that is not acceptable canonical JSON (floats, duplicate keys...)."""

    code = "PW010"


class MoneyError(PactwrightError):
    """A money, percent or duration value that cannot be represented exactly."""

    code = "PW020"


class CheckError(PactwrightError):
    """A policy with blockers (PW1xx); the diagnostics carry the detail."""

    code = "PW100"


class CompileError(PactwrightError):
    """Artifact emission failed (PW2xx)."""

    code = "PW200"


class VerifyError(PactwrightError):
    """The verifier could not run or found an inconsistency in itself (PW3xx).

    PW39x are the verifier's own bugs (a counterexample that does not
    replay): they exit 3 like any internal error, never 1 like a finding.
    """

    code = "PW300"

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return 3 if self.code.startswith("PW39") else 1


class ActivationError(PactwrightError):
    """Approve, sign or activate refused (PW4xx)."""

    code = "PW400"


class CommandError(PactwrightError):
    """A runtime command was refused (PW5xx)."""

    code = "PW500"


class EffectError(PactwrightError):
    """An external effect or its reconciliation failed (PW6xx)."""

    code = "PW600"


class StoreError(PactwrightError):
    """The store refused or found tampering (PW7xx)."""

    code = "PW700"


class LedgerError(PactwrightError):
    """A ledger program could not run: syntax, variables, funds (PW7xx)."""

    code = "PW750"
