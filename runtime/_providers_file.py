"""Where a declared egress really goes, and the credentials it may carry.

A policy declares destinations (`egress POST "https://api.payments.example.com"`);
a deployment routes each one to the endpoint actually called, and optionally to
a credential slot, in a providers file. Credentials live apart from routes: in
the environment (`PACTWRIGHT_SECRET_<SLOT>`) or a secrets file only its owner
can read. A secret value is held inside `_Secret`, whose repr never shows it,
so neither an error nor a debug print can carry it.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pactwright.errors import UsageError
from pactwright.runtime.effect_adapter import EgressError

ENV_PREFIX = "PACTWRIGHT_SECRET_"
_SLOT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_MAX_FILE_BYTES = 1 << 20


class ProviderConfigError(UsageError):
    """A providers or secrets file that cannot be used (PW623-PW625); exit code 2 like any bad input file."""

    code = "PW623"


@dataclass(frozen=True)
class Route:
    """A declared destination, the endpoint that serves it and its credential slot (if any)."""

    destination: str
    endpoint: str
    credential: str | None = None


@dataclass(frozen=True)
class Providers:
    """Routes by declared destination URL (exactly as the policy spells it)."""

    routes: Mapping[str, Route] = field(default_factory=dict)

    def route(self, url: str) -> Route:
        """The route for a declared URL, or PW621: an unrouted destination is never guessed."""
        found = self.routes.get(url)
        if found is None:
            raise EgressError(
                f"declared destination `{url}` has no route in the providers file",
                code="PW621",
                hint=f'add `[destination."{url}"]` with an `endpoint` to the providers file',
            )
        return found

    @classmethod
    def from_mapping(cls, data: Mapping[str, object], source: str = "providers") -> Providers:
        """Validate a parsed providers document (the TOML's tables) into routes."""
        unknown = sorted(set(data) - {"destination"})
        if unknown:
            raise _bad(source, f'unknown top-level key `{unknown[0]}` (only `[destination."URL"]` tables)')
        tables = data.get("destination", {})
        if not isinstance(tables, Mapping):
            raise _bad(source, "`destination` must be a table of tables")
        routes: dict[str, Route] = {}
        for destination, table in tables.items():
            _check_url(source, destination, f"destination `{destination}`")
            if not isinstance(table, Mapping):
                raise _bad(source, f"destination `{destination}` must be a table")
            extra = sorted(set(table) - {"endpoint", "credential"})
            if extra:
                raise _bad(source, f"destination `{destination}` has unknown key `{extra[0]}`")
            endpoint = table.get("endpoint")
            if not isinstance(endpoint, str):
                raise _bad(source, f'destination `{destination}` needs `endpoint = "http://..."`')
            _check_url(source, endpoint, f"endpoint of `{destination}`")
            credential = table.get("credential")
            if credential is not None and (not isinstance(credential, str) or not _SLOT.fullmatch(credential)):
                raise _bad(
                    source, f"destination `{destination}` has a bad credential slot name (letters, digits, _ . -)"
                )
            routes[destination] = Route(destination, endpoint, credential)
        return cls(routes)


def _bad(source: str, message: str, code: str = "PW623") -> ProviderConfigError:
    return ProviderConfigError(f"{source}: {message}", code=code, file=source)


def _check_url(source: str, url: str, what: str) -> None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        raise _bad(source, f"{what} is not a URL") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise _bad(source, f"{what} must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise _bad(source, f"{what} must not carry credentials in the URL; use a credential slot")
    if parts.fragment:
        raise _bad(source, f"{what} must not have a #fragment")


def _read_toml(path: Path, code: str) -> tuple[dict[str, object], os.stat_result]:
    source = str(path)
    try:
        with path.open("rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise _bad(source, "not a regular file", code)
            data = handle.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise _bad(source, f"cannot read: {exc.strerror or exc}", code) from None
    if len(data) > _MAX_FILE_BYTES:
        raise _bad(source, "larger than 1 MiB", code)
    try:
        return tomllib.loads(data.decode("utf-8")), info
    except UnicodeDecodeError:
        raise _bad(source, "not UTF-8 text", code) from None
    except tomllib.TOMLDecodeError as exc:
        raise _bad(source, f"not TOML: {exc}", code) from None


def load_providers(path: str | Path) -> Providers:
    """Read a providers file (TOML); PW623 for anything unreadable or malformed."""
    document, _ = _read_toml(Path(path), "PW623")
    return Providers.from_mapping(document, str(path))


def env_name(slot: str) -> str:
    """The environment variable that holds a slot: `PACTWRIGHT_SECRET_` + upper case, non-alphanumerics as `_`."""
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", slot).upper()


class _Secret:
    """A credential value that does not print itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


def _check_value(value: str, where: str) -> _Secret:
    if not value or any(ch in value for ch in "\r\n\x00") or not value.isprintable():
        raise ProviderConfigError(f"credential in {where} is empty or holds control characters", code="PW625")
    return _Secret(value)


class Credentials:
    """Credential slots resolved from the environment first, then from a secrets file.

    The values are never part of this object's repr, and `secrets_in_use`
    lets an adapter scrub any text it returns, whatever a provider echoes.
    """

    def __init__(self, values: Mapping[str, str] | None = None, *, environ: Mapping[str, str] | None = None) -> None:
        self._file = {slot: _check_value(value, f"slot `{slot}`") for slot, value in (values or {}).items()}
        self._environ = os.environ if environ is None else environ

    @classmethod
    def load(cls, secrets_file: str | Path | None = None, *, environ: Mapping[str, str] | None = None) -> Credentials:
        """Credentials from the environment and, when given, a secrets file (TOML `slot = "value"`).

        The file must be readable by its owner only (PW624); it must hold only
        string values under valid slot names (PW625).
        """
        if secrets_file is None:
            return cls(environ=environ)
        path = Path(secrets_file)
        document, info = _read_toml(path, "PW625")
        if os.name == "posix" and info.st_mode & 0o077:
            raise ProviderConfigError(
                f"secrets file `{path}` is readable or writable by group or others"
                f" (mode {stat.filemode(info.st_mode)})",
                code="PW624",
                file=str(path),
                hint=f"chmod 600 {path}",
            )
        values: dict[str, str] = {}
        for slot, value in document.items():
            if not _SLOT.fullmatch(slot) or not isinstance(value, str):
                raise _bad(str(path), f'entry `{slot}` must be `slot = "value"` (letters, digits, _ . -)', "PW625")
            values[slot] = value
        return cls(values, environ=environ)

    def get(self, slot: str) -> _Secret:
        """The slot's value (wrapped), or PW622 naming where it was looked for, never a value."""
        from_env = self._environ.get(env_name(slot))
        if from_env:
            return _check_value(from_env, f"`{env_name(slot)}`")
        if slot in self._file:
            return self._file[slot]
        raise EgressError(
            f"credential slot `{slot}` is not set",
            code="PW622",
            hint=f'set `{env_name(slot)}` or add `{slot} = "..."` to the secrets file',
        )

    def secrets_in_use(self) -> tuple[str, ...]:
        """Every value this object could send: what an adapter must scrub from the text it returns."""
        values = [secret.reveal() for secret in self._file.values()]
        values += [value for name, value in self._environ.items() if name.startswith(ENV_PREFIX) and value]
        return tuple(values)

    def __repr__(self) -> str:
        return f"Credentials(file_slots={sorted(self._file)})"
