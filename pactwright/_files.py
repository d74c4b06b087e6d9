"""Small file-system helpers shared by the commands that write signed documents.

A trust file, an approval or a signatures file that is half written is worse
than none: a reader (activation, a second signer) could act on a truncated
document. Every such write goes to a temporary file in the same directory and
is renamed over the target, so a reader sees the old bytes or the new ones.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from pactwright.errors import UsageError


def write_atomic(path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644) -> None:
    """Replace `path` with `data` in one rename; a failure leaves the old file untouched."""
    target = Path(path)
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise UsageError(f"cannot write `{target}`: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise UsageError(f"cannot write `{target}`: {exc.strerror or exc}") from None


def read_input(path: str | os.PathLike[str]) -> bytes:
    """The bytes of an input file, or a usage error (exit 2) naming it."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read `{path}`: {exc.strerror or exc}") from None
