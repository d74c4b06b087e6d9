"""The one error activation raises: a refusal with its code, file, field and both values.

An operator reading a refusal at deploy time needs to know where (file and
field), what (the code and a one-line message) and, where two values
disagree, both of them with labels that say which is which ("manifest" vs
"on disk"). The CLI renders these; `--format json` carries the same fields.
"""

from __future__ import annotations

from pactwright.bundle_reader import show
from pactwright.errors import ActivationError

__all__ = ["Refusal", "show"]


class Refusal(ActivationError):
    """Activation refused: nothing was written, and this says exactly why."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        file: str | None = None,
        field: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        labels: tuple[str, str] = ("expected", "found"),
        hint: str | None = None,
    ) -> None:
        super().__init__(message, code=code, file=file, field=field, expected=expected, found=found, hint=hint)
        self.labels = labels
        # Filled in once the manifest has been read, so the CLI can name the
        # pact and version it refused (`refused to activate ID VERSION: ...`).
        self.pact: tuple[str, str] | None = None

    def detail_lines(self) -> list[str]:
        """`  manifest: sha256:...` / `  on disk:  sha256:...`, aligned, when there are two values."""
        pairs = [(label, value) for label, value in zip(self.labels, (self.expected, self.found), strict=True) if value]
        width = max((len(label) for label, _ in pairs), default=0) + 1
        return [f"  {(label + ':').ljust(width)} {value}" for label, value in pairs]

    def to_json(self) -> dict[str, str]:
        out = super().to_json()
        if self.pact is not None:
            out["pact_id"], out["pact_version"] = self.pact
        return out
