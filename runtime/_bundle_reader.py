"""Activation's view of the kernel's bundle reader: the same walk, activation's codes.

Reading a directory safely (lstat first, limits before any read, no
symlink followed, a file that changes while read refused) is
`pactwright.bundle_reader.read_tree`, which `sign` uses too. This module
only maps its tree rules to PW420-PW423 and PW433 (an empty directory), and
keeps pass 2 (`_read`) a module attribute so fault-injection tests can
change a file between sizing and reading.
"""

from __future__ import annotations

import os

from pactwright.bundle_reader import BundleRuleError, Entry, Limits, read_entry, read_tree
from pactwright.runtime._checks_files import as_refusal

__all__ = ["Limits", "read_bundle"]

_read = read_entry


def read_bundle(root: str | os.PathLike[str], limits: Limits | None = None) -> dict[str, bytes]:
    """Every regular file under `root`, by POSIX relative path, or a refusal (PW420-PW423, PW433).

    `root` itself is opened like any directory the operator names (it may be
    a symlink to a release directory); nothing inside it may be.
    """

    def read(entry: Entry) -> bytes:
        return _read(entry)  # looked up at call time, so a replaced `_read` is the one used

    try:
        return read_tree(root, limits, read=read)
    except BundleRuleError as exc:
        raise as_refusal(exc) from None
