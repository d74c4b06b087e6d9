"""Ed25519 key files: created so the private half is never exposed, loaded strictly.

`NAME.key` is PKCS#8 PEM and `NAME.pub` SubjectPublicKeyInfo PEM
(docs/signing.md). The private file is created with `O_CREAT|O_EXCL` and mode
0600 in the same system call, so it is never world-readable, not even for
the moment between creating and chmod-ing it, and an existing file (or a
symlink planted where it would go) is never overwritten or followed.
Loading refuses anything that is not an unencrypted ed25519 key, so a signer
cannot sign with an RSA key whose ids the trust file would never match.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from pactwright._files import read_input
from pactwright.errors import UsageError
from pactwright.signing import key_id, raw_public_key, weak_public_key

PRIVATE_SUFFIX = ".key"
PUBLIC_SUFFIX = ".pub"
PRIVATE_MODE = 0o600
PUBLIC_MODE = 0o644
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class KeyFiles:
    """What `keygen` wrote: the key id and the two paths."""

    keyid: str
    private_path: Path
    public_path: Path


def _exists(path: Path) -> UsageError:
    return UsageError(
        f"`{path}` already exists; refusing to overwrite a key file",
        code="PW401",
        file=str(path),
        hint="choose another `--out` name, or move the old key away first",
    )


def _create(path: Path, data: bytes, mode: int, *, exact: bool) -> None:
    """Create `path` exclusively with `mode` (exactly `mode` if `exact`, else narrowed by the umask)."""
    try:
        fd = os.open(path, _CREATE, mode)
    except FileExistsError:
        raise _exists(path) from None
    except OSError as exc:
        raise UsageError(f"cannot create `{path}`: {exc.strerror or exc}") from None
    try:
        if exact:
            # The umask can only have narrowed `mode` (0600 to 0400, say); restore it exactly.
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise UsageError(f"cannot write `{path}`: {exc.strerror or exc}") from None


def generate_key_files(name: str | os.PathLike[str]) -> KeyFiles:
    """Write a fresh ed25519 pair to `NAME.key` (0600) and `NAME.pub`; never overwrites."""
    base = os.fspath(name)
    private_path, public_path = Path(base + PRIVATE_SUFFIX), Path(base + PUBLIC_SUFFIX)
    for path in (private_path, public_path):
        if os.path.lexists(path):
            raise _exists(path)
    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _create(private_path, private_pem, PRIVATE_MODE, exact=True)
    try:
        _create(public_path, public_pem, PUBLIC_MODE, exact=False)
    except UsageError:
        # Half a pair is useless and would block the next attempt: remove our private file.
        with contextlib.suppress(OSError):
            os.unlink(private_path)
        raise
    return KeyFiles(key_id(private.public_key()), private_path, public_path)


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """An unencrypted PKCS#8 PEM ed25519 private key, or PW402 (exit 2)."""
    data = read_input(path)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise UsageError(
            f"`{path}` is an encrypted private key; pactwright reads unencrypted ed25519 keys",
            code="PW402",
            file=str(path),
            hint="create a key with `pactwright keygen --out NAME`",
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise UsageError(
            f"`{path}` is not a PEM private key",
            code="PW402",
            file=str(path),
            hint="pass the `.key` file that `pactwright keygen` wrote",
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"`{path}` is not an ed25519 key", code="PW402", file=str(path))
    return key


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """A SubjectPublicKeyInfo PEM ed25519 public key, or PW402 (exit 2)."""
    data = read_input(path)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, UnsupportedAlgorithm):
        raise UsageError(
            f"`{path}` is not a PEM public key",
            code="PW402",
            file=str(path),
            hint="pass the `.pub` file that `pactwright keygen` wrote, never the `.key`",
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"`{path}` is not an ed25519 key", code="PW402", file=str(path))
    if weak_public_key(raw_public_key(key)):
        raise UsageError(
            f"`{path}` is an ed25519 point of small order (or a non-canonical encoding): anyone could sign for it",
            code="PW402",
            file=str(path),
            hint="create a real key with `pactwright keygen --out NAME`",
        )
    return key


def too_open(path: str | os.PathLike[str]) -> bool:
    """Whether a private key file is readable or writable by group or others."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IRWXG | stat.S_IRWXO))
