"""Semantic Versioning 2.0.0 precedence, for the rollback check.

Text comparison gets `1.10.0 < 1.9.0` and `1.0.0-rc.1 > 1.0.0` wrong; a
rollback guard that compares strings lets an attacker "upgrade" to an older
policy. Build metadata (`+...`) does not take part in precedence, so two
versions that differ only there are equal, and activation treats them like
any other equal pair.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?",
    re.ASCII,  # `\d` must not match other scripts' digits
)
# Identifiers longer than this are refused rather than compared: no policy
# version needs them, and a 10,000-digit number is a denial-of-service toy.
_MAX_LENGTH = 128


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...]

    def precedence(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        """A sort key whose order is SemVer precedence."""
        # A release sorts after all of its pre-releases; numeric identifiers
        # sort numerically and before alphanumeric ones (SemVer 2.0.0 §11).
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)


def parse_version(text: str) -> Version | None:
    """The version, or None when `text` is not SemVer 2.0.0."""
    if len(text) > _MAX_LENGTH:
        return None
    match = _SEMVER.fullmatch(text)
    if match is None:
        return None
    major, minor, patch, pre, _build = match.groups()
    return Version(int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ())


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 by precedence; both must be valid SemVer."""
    va, vb = parse_version(a), parse_version(b)
    if va is None or vb is None:
        raise ValueError(f"not semver: `{a if va is None else b}`")
    ka, kb = va.precedence(), vb.precedence()
    return (ka > kb) - (ka < kb)
