"""Read a bundle directory into `{relative path: bytes}` without trusting the directory.

This is the one reader `sign` and `activate` share (docs/threat-model.md);
each maps the `Rule` a refusal carries to its own stable code. It is the
only place that touches the file system for a bundle, and it refuses
before reading anything whole:

1. walk the tree with `lstat` only, through directory file descriptors
   opened with `O_NOFOLLOW` (so a parent swapped for a symlink mid-walk is
   not followed): refuse symbolic links, anything that is not a regular
   file or directory, files over the per-file limit, too many files or
   directories, too deep a tree or too many bytes in total, and empty
   directories (an unlisted entry); a directory listing is abandoned as soon
   as it holds more entries than the limits allow, so a directory of
   millions of names is refused without listing it;
2. only then open each file with `O_NOFOLLOW | O_NONBLOCK`, check with
   `fstat` that it is still the same regular file, and read at most the
   size `lstat` reported plus one byte; a file that changed (or vanished) in
   between is refused, never half-read.

Names are returned exactly as the directory holds them (POSIX separators,
no normalization), so the closed-world check sees a `Model.json` or a
full-width `ｍodel.json` as the different name it is.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from pactwright.errors import ActivationError, UsageError

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CHUNK = 1 << 20


class Rule(StrEnum):
    """One bundle rule; `sign` and `activate` each map it to a stable code of their own."""

    SYMLINK = "tree.symlink"
    NOT_REGULAR = "tree.not-regular"  # a pipe, socket or device, or a file that changed while read
    FILE_TOO_LARGE = "tree.file-too-large"
    TREE_LIMIT = "tree.limit"  # total bytes, file or directory count, depth
    MANIFEST_MISSING = "manifest.missing"
    MANIFEST_NOT_CANONICAL = "manifest.not-canonical"
    MANIFEST_FORMAT = "manifest.format"
    MANIFEST_PATH = "manifest.path"
    MANIFEST_MALFORMED = "manifest.malformed"
    LOOK_ALIKE = "closed-world.look-alike"
    RENAMED = "closed-world.renamed"
    MISSING = "closed-world.missing"
    UNLISTED = "closed-world.unlisted"  # also an empty directory
    ARTIFACT_MISMATCH = "artifact.mismatch"
    DOCUMENT_NOT_CANONICAL = "document.not-canonical"
    CANDIDATE_PACT = "candidate.pact"
    REPORT_MISSING = "report.missing"
    REPORT_MALFORMED = "report.malformed"
    REPORT_HASH = "report.hash"
    REPORT_CANDIDATE = "report.candidate"
    REPORT_ARTIFACTS = "report.artifacts"
    REPORT_VERDICT = "report.verdict"
    REPORT_INCOMPLETE = "report.incomplete"


class BundleRuleError(ActivationError):
    """A bundle broke `rule`; the caller re-raises it under its own code (`sign`: PW41x, `activate`: PW42x-PW46x).

    It is an `ActivationError` so that, should a caller ever forget to map
    it, the user still gets a clear refusal rather than a traceback.
    """

    def __init__(
        self,
        rule: Rule,
        message: str,
        *,
        file: str | None = None,
        field: str | None = None,
        expected: str | None = None,
        found: str | None = None,
        labels: tuple[str, str] = ("expected", "found"),
        hint: str | None = None,
    ) -> None:
        super().__init__(message, file=file, field=field, expected=expected, found=found, hint=hint)
        self.rule = rule
        self.labels = labels


def show(text: str, limit: int = 200) -> str:
    """A user-supplied value safe to print inside backticks.

    Non-ASCII and control characters are escaped, so a look-alike name
    (`ｍodel.json`, `Model.json`) is visibly different from the real one and
    no file name can move the cursor or fake a second line of output.
    """
    out = "".join(c if c.isascii() and c.isprintable() else f"\\u{ord(c):04x}" for c in text[:limit])
    return out + ("…" if len(text) > limit else "")


@dataclass(frozen=True)
class Limits:
    """What a bundle may weigh before it is read.

    The defaults are far above a compiled policy (the reference bundle is
    ~120 KB in 14 files) and far below what would hurt a deploy host.
    """

    max_file_bytes: int = 16 * 1024 * 1024
    max_total_bytes: int = 64 * 1024 * 1024
    max_files: int = 10_000
    max_depth: int = 8
    # Each directory holds an open descriptor until every file is read; this
    # stays far below any process's descriptor limit (256 on macOS).
    max_directories: int = 64


@dataclass(frozen=True)
class Entry:
    """A regular file pass 1 sized: where it is and which inode it was."""

    path: str
    name: str
    dir_fd: int
    size: int
    dev: int
    ino: int


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _symlink(path: str) -> BundleRuleError:
    return BundleRuleError(
        Rule.SYMLINK,
        f"`{show(path)}` is a symbolic link; a bundle holds only regular files",
        file=path,
        hint="copy the bundle with its files dereferenced, or rebuild it",
    )


def _changed(path: str) -> BundleRuleError:
    return BundleRuleError(Rule.NOT_REGULAR, f"`{show(path)}` changed while the bundle was being read", file=path)


class _Walk:
    """Pass 1: stat every entry, open directories, read nothing."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.entries: list[Entry] = []
        self.dir_fds: list[int] = []
        self.total = 0
        self.listed = 0  # directory entries seen so far, of any kind

    def _names(self, dir_fd: int, prefix: str) -> list[str]:
        """A directory's names, sorted; refused once more entries than the limits allow were seen."""
        limits = self.limits
        most = limits.max_files + limits.max_directories
        names = []
        with os.scandir(dir_fd) as listing:
            for entry in listing:
                self.listed += 1
                if self.listed > most:
                    where = prefix.rstrip("/") or "."
                    raise BundleRuleError(
                        Rule.TREE_LIMIT,
                        f"the bundle holds more than {most} entries (seen in `{show(where)}`)",
                        file=where,
                        expected=f"at most {limits.max_files} files and {limits.max_directories} directories",
                        found=f"more than {most} entries",
                        labels=("limit", "on disk"),
                    )
                names.append(entry.name)
        return sorted(names)

    def directory(self, dir_fd: int, prefix: str, depth: int) -> int:
        """Walk one directory; returns how many regular files it holds, recursively."""
        found = 0
        for name in self._names(dir_fd, prefix):
            path = prefix + name
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                raise _changed(path) from None
            if stat.S_ISLNK(st.st_mode):
                raise _symlink(path)
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 > self.limits.max_depth:
                    raise BundleRuleError(
                        Rule.TREE_LIMIT,
                        f"`{show(path)}` is nested deeper than {self.limits.max_depth} directories",
                        file=path,
                    )
                child = self._open_dir(name, dir_fd, path, st)
                inside = self.directory(child, path + "/", depth + 1)
                if inside == 0:
                    raise BundleRuleError(
                        Rule.UNLISTED,
                        f"`{show(path)}/` holds no files; a bundle has no directories but those of listed files",
                        file=path,
                    )
                found += inside
                continue
            if not stat.S_ISREG(st.st_mode):
                raise BundleRuleError(
                    Rule.NOT_REGULAR, f"`{show(path)}` is {_kind(st.st_mode)}, not a regular file", file=path
                )
            self._file(path, name, dir_fd, st)
            found += 1
        return found

    def _open_dir(self, name: str, dir_fd: int, path: str, st: os.stat_result) -> int:
        if len(self.dir_fds) > self.limits.max_directories:  # the root's descriptor is one of them
            raise BundleRuleError(
                Rule.TREE_LIMIT,
                f"the bundle holds more than {self.limits.max_directories} directories",
                file=path,
                hint="a compiled bundle has a handful of directories; this one is not what `pactwright build` wrote",
            )
        try:
            fd = os.open(name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=dir_fd)
        except OSError as exc:
            raise _os_refusal(exc, path) from None
        self.dir_fds.append(fd)
        after = os.fstat(fd)
        if (after.st_dev, after.st_ino) != (st.st_dev, st.st_ino):
            raise _changed(path)
        return fd

    def _file(self, path: str, name: str, dir_fd: int, st: os.stat_result) -> None:
        limits = self.limits
        if st.st_size > limits.max_file_bytes:
            raise BundleRuleError(
                Rule.FILE_TOO_LARGE,
                f"`{show(path)}` is {st.st_size} bytes, over the per-file limit",
                file=path,
                expected=f"at most {limits.max_file_bytes} bytes",
                found=f"{st.st_size} bytes",
                labels=("limit", "on disk"),
                hint="raise `--max-file-bytes` only if this bundle is really this large",
            )
        if len(self.entries) >= limits.max_files:
            raise BundleRuleError(Rule.TREE_LIMIT, f"the bundle holds more than {limits.max_files} files", file=path)
        self.total += st.st_size
        if self.total > limits.max_total_bytes:
            raise BundleRuleError(
                Rule.TREE_LIMIT,
                f"the bundle is over the total size limit when `{show(path)}` is counted",
                file=path,
                expected=f"at most {limits.max_total_bytes} bytes",
                found=f"at least {self.total} bytes",
                labels=("limit", "on disk"),
                hint="raise `--max-total-bytes` only if this bundle is really this large",
            )
        self.entries.append(Entry(path, name, dir_fd, st.st_size, st.st_dev, st.st_ino))


def _os_refusal(exc: OSError, path: str) -> BundleRuleError | UsageError:
    if exc.errno == errno.ELOOP:
        return _symlink(path)
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        # Sized in pass 1, gone (or its directory replaced by a file) by now: a bundle being changed.
        return _changed(path)
    return UsageError(f"cannot read `{show(path)}` in the bundle: {exc.strerror or exc}")


def read_entry(entry: Entry) -> bytes:
    """Pass 2: read one file that pass 1 sized, refusing if it changed since."""
    try:
        fd = os.open(entry.name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=entry.dir_fd)
    except OSError as exc:
        raise _os_refusal(exc, entry.path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (entry.dev, entry.ino):
            raise _changed(entry.path)
        chunks: list[bytes] = []
        remaining = entry.size + 1  # one byte more reveals a file that grew
        while remaining > 0:
            chunk = os.read(fd, min(_CHUNK, remaining))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) != entry.size:
        raise _changed(entry.path)
    return data


def read_tree(
    root: str | os.PathLike[str],
    limits: Limits | None = None,
    *,
    read: Callable[[Entry], bytes] = read_entry,
) -> dict[str, bytes]:
    """Every regular file under `root`, by POSIX relative path, or a `BundleRuleError` (tree rules).

    `root` itself is opened like any directory the operator names (it may be
    a symlink to a release directory); nothing inside it may be. `read` is
    pass 2 for one entry; a caller may wrap it (the fault-injection tests do)
    but every entry still goes through it after every size is known.
    """
    limits = limits or Limits()
    try:
        root_fd = os.open(root, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
    except OSError as exc:
        raise UsageError(f"cannot read bundle `{os.fsdecode(root)}`: {exc.strerror or exc}") from None
    walk = _Walk(limits)
    walk.dir_fds.append(root_fd)
    try:
        try:
            walk.directory(root_fd, "", 0)
        except OSError as exc:
            raise UsageError(f"cannot read bundle `{os.fsdecode(root)}`: {exc.strerror or exc}") from None
        return {entry.path: read(entry) for entry in walk.entries}
    finally:
        for fd in walk.dir_fds:
            os.close(fd)
