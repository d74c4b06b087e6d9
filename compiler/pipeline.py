"""The front end as an ordered pipeline: bytes -> text -> tree -> checks -> candidate.

Each stage is a pure function; the first stage that produces blockers ends
the run with its diagnostics, and a policy with any blocker has no candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pactwright.candidate import Candidate
from pactwright.compiler.checks import run_checks
from pactwright.compiler.normalize import SourceMap, normalize
from pactwright.compiler.parser import ParseFailure, parse_policy
from pactwright.compiler.symbols import build_symbols
from pactwright.diagnostics import Diagnostic, Severity, Span

MAX_POLICY_BYTES = 4 * 1024 * 1024  # a human-written policy; anything larger is refused


@dataclass
class CheckResult:
    """The outcome of checking one policy: a candidate, or blockers; warnings either way."""

    diagnostics: list[Diagnostic]
    candidate: Candidate | None = None
    source_map: SourceMap = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.candidate is not None and not any(d.is_blocker for d in self.diagnostics)

    @property
    def blockers(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_blocker]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_blocker]


def _at_start(code: str, message: str, hint: str, line: int = 1, column: int = 1) -> CheckResult:
    span = Span(line=line, column=column, end_line=line, end_column=column + 1)
    return CheckResult([Diagnostic(code=code, severity=Severity.ERROR, message=message, span=span, hint=hint)])


def decode_policy(data: bytes) -> str | CheckResult:
    """Policy bytes as text, or a result holding why they are not a policy."""
    if len(data) > MAX_POLICY_BYTES:
        return _at_start(
            "PW114",
            f"policy is {len(data)} bytes; the limit is {MAX_POLICY_BYTES}",
            "split the policy; policies are written and reviewed by people",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return _at_start("PW110", f"not valid utf-8 (byte {exc.start})", "save the policy as UTF-8 text", line, column)
    if "\x00" in text:
        index = text.index("\x00")
        line = text.count("\n", 0, index) + 1
        column = index - (text.rfind("\n", 0, index) + 1) + 1
        return _at_start("PW110", "binary data (a NUL byte) in the policy", "policies are text files", line, column)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


def check_text(text: str) -> CheckResult:
    """Parse and check policy text; the candidate is present only without blockers."""
    try:
        policy = parse_policy(text)
    except ParseFailure as failure:
        return CheckResult(failure.diagnostics)
    sym = build_symbols(policy)
    ctx, diagnostics = run_checks(sym)
    if any(d.is_blocker for d in diagnostics):
        return CheckResult(diagnostics)
    candidate, source_map = normalize(ctx)
    return CheckResult(diagnostics, candidate, source_map)


def check_bytes(data: bytes) -> CheckResult:
    """`check_text` for raw file contents: invalid UTF-8 and binary are diagnostics."""
    decoded = decode_policy(data)
    if isinstance(decoded, CheckResult):
        return decoded
    return check_text(decoded)
