"""Diagnostics: what a check found, where, and what to do about it.

A diagnostic is data, not an exception: a policy can have many, the CLI
renders them as text, JSON or SARIF, and a policy with any blocker yields no
candidate. Spans are 1-based; `end_column` is exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class Severity(StrEnum):
    """Blockers stop the pipeline; warnings are reported and carried along."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """A source range; a zero-width span marks a point (end of file, say).

    A plain dataclass: a large policy has one per token, and pydantic's
    construction cost would dominate parsing.
    """

    line: int
    column: int
    end_line: int
    end_column: int

    def to_json(self) -> dict[str, int]:
        return {
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
        }


class Diagnostic(BaseModel):
    """One finding with a stable code, a one-line message, a span and a hint."""

    model_config = ConfigDict(frozen=True)

    code: str
    severity: Severity
    message: str
    span: Span
    hint: str | None = None
    label: str | None = None  # short text printed under the caret

    @property
    def is_blocker(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple[int, int, str, str]:
        return (self.span.line, self.span.column, self.code, self.message)
