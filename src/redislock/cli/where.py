# SPDX-License-Identifier: MIT
"""Where Redis is: the ``--url`` flag, the environment, the configuration files, or the
embedded server; and ``redislock config``, which says which one is in effect and why.

Precedence, highest first, for each setting:

1. the flag (``--url``, ``--prefix``, ``--require-url``, ``--ttl``, ``--wait``, ``--grace``);
2. the environment: ``REDIS_URL``, ``REDISLOCK_PREFIX``, ``REDISLOCK_REQUIRE_URL`` (``1``,
   ``true``, ``yes``, ``on`` or ``0``, ``false``, ``no``, ``off``);
3. the user file, ``$XDG_CONFIG_HOME/redislock/config.toml`` (``~/.config`` when
   ``XDG_CONFIG_HOME`` is unset or not absolute);
4. the system file, ``/etc/redislock/config.toml`` (``$REDISLOCK_SYSTEM_CONFIG`` names
   another path: for tests and packagers);
5. the built-in defaults; for the URL, the embedded server of this user on this machine,
   announced by one line on stderr (``-q`` silences it) and refused by ``--require-url``.

A configuration file (TOML, read with :mod:`tomllib`)::

    url = "redis://:secret@redis.internal:6379/0"   # a redis://, rediss:// or unix:// URL
    prefix = "redislock:"                            # the key prefix
    require_url = true                               # never fall back to the embedded server

    [defaults]                                       # for run, once and elect
    ttl = 30      # lease, seconds
    wait = 60     # wait at most this many seconds for the lock (absent: wait forever)
    grace = 10    # seconds between SIGTERM and SIGKILL when the lease is lost

A file that is not valid TOML, has an unknown key, or a value of the wrong type or range
is an error naming the file and the key: exit 78 (EX_CONFIG). A bad
``REDISLOCK_REQUIRE_URL`` is a usage error (exit 64). Passwords in URLs are never printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import redis
import redis.connection

from redislock import server
from redislock._core import validate
from redislock._core.keys import DEFAULT_PREFIX
from redislock.cli._common import CliError, mask_url, redact
from redislock.errors import LockConfigError

if TYPE_CHECKING:
    from redislock.cli._args import Context, Subcommands

__all__ = [
    "ENV_PREFIX",
    "ENV_REQUIRE_URL",
    "ENV_SYSTEM_CONFIG",
    "EXIT_CONFIG",
    "SYSTEM_CONFIG",
    "ConfigFile",
    "Located",
    "Setting",
    "Settings",
    "add_parser",
    "config_command",
    "configured_help",
    "connect",
    "fill_defaults",
    "load_files",
    "locate",
    "resolve",
    "run_config",
    "system_config_path",
    "user_config_path",
]

#: Exit status for a bad configuration file (EX_CONFIG).
EXIT_CONFIG = 78
#: Environment variable naming the system configuration file instead of
#: ``/etc/redislock/config.toml`` (for tests and packagers).
ENV_SYSTEM_CONFIG = "REDISLOCK_SYSTEM_CONFIG"
#: Environment variable refusing the embedded fallback when ``1`` (or true/yes/on).
ENV_REQUIRE_URL = "REDISLOCK_REQUIRE_URL"
#: Environment variable giving the key prefix.
ENV_PREFIX = "REDISLOCK_PREFIX"
SYSTEM_CONFIG = Path("/etc/redislock/config.toml")

#: The built-in values of the ``[defaults]`` table, in seconds (``wait``: ``None``, forever).
BUILTIN_DEFAULTS: dict[str, float | None] = {"ttl": 30.0, "wait": None, "grace": 10.0}
_TOP_KEYS = ("url", "prefix", "require_url", "defaults")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _cli_error(message: str, status: int) -> Exception:

    return CliError(message, status)


def _mask(text: str) -> str:

    return mask_url(text)


def user_config_path() -> Path:
    """``$XDG_CONFIG_HOME/redislock/config.toml``, or ``~/.config/redislock/config.toml``."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".config"
    return base / "redislock" / "config.toml"


def system_config_path() -> Path:
    """``$REDISLOCK_SYSTEM_CONFIG``, or ``/etc/redislock/config.toml``."""
    override = os.environ.get(ENV_SYSTEM_CONFIG)
    return Path(override) if override else SYSTEM_CONFIG


@dataclass(frozen=True)
class ConfigFile:
    """One configuration file: ``role`` is ``"user"`` or ``"system"``; ``values`` holds the
    checked keys (``url``, ``prefix``, ``require_url``, ``ttl``, ``wait``, ``grace``)."""

    role: str
    path: Path
    found: bool
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.role} file {self.path}"


def _bad(path: Path, key: str, why: str) -> Exception:
    return _cli_error(f"config file {path}: key {key!r}: {why}", EXIT_CONFIG)


def _seconds(path: Path, key: str, value: Any, *, positive: bool, forever: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(path, key, f"must be a number of seconds, got {type(value).__name__}")
    number = float(value)
    if forever and number == math.inf:
        return number
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        bound = f"{'>' if positive else '>='} 0{' (or inf: no limit)' if forever else ''}"
        raise _bad(path, key, f"must be a finite number of seconds {bound}")
    return number


def _check_url(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(path, key, "must be a non-empty string (a redis://, rediss:// or unix:// URL)")
    try:
        redis.connection.parse_url(value)  # type: ignore[no-untyped-call]
    except ValueError as exc:
        raise _bad(path, key, redact(f"not a Redis URL: {exc}", value)) from None
    return value


def _check(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _TOP_KEYS:
            raise _bad(path, key, f"unknown key (known: {', '.join(_TOP_KEYS)})")
        if key == "url":
            values["url"] = _check_url(path, key, value)
        elif key == "prefix":
            try:
                values["prefix"] = validate.check_prefix(value)
            except LockConfigError as exc:
                raise _bad(path, key, str(exc)) from None
        elif key == "require_url":
            if not isinstance(value, bool):
                raise _bad(path, key, "must be true or false")
            values["require_url"] = value
        else:
            if not isinstance(value, dict):
                raise _bad(path, key, "must be a table: [defaults]")
            for name, seconds in value.items():
                dotted = f"defaults.{name}"
                if name not in BUILTIN_DEFAULTS:
                    known = ", ".join(BUILTIN_DEFAULTS)
                    raise _bad(path, dotted, f"unknown key (known: {known})")
                values[name] = _seconds(
                    path, dotted, seconds, positive=name == "ttl", forever=name == "wait"
                )
    return values


def _load(role: str, path: Path) -> ConfigFile:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ConfigFile(role, path, found=False)
    except IsADirectoryError:
        raise _cli_error(f"config file {path}: is a directory", EXIT_CONFIG) from None
    except OSError as exc:
        raise _cli_error(f"config file {path}: cannot read: {exc.strerror}", EXIT_CONFIG) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _cli_error(
            f"config file {path}: not valid TOML: {_mask(str(exc))}", EXIT_CONFIG
        ) from None
    return ConfigFile(role, path, found=True, values=_check(path, data))


def load_files() -> list[ConfigFile]:
    """The user file, then the system file (each possibly not found).

    Raises:
        CliError: a file exists but cannot be read, is not valid TOML, or holds an unknown
            key or a bad value (status 78).
    """
    return [_load("user", user_config_path()), _load("system", system_config_path())]


@dataclass(frozen=True)
class Setting:
    """A value and where it came from (``"flag --url"``, ``"env REDIS_URL"``,
    ``"user file PATH"``, ``"system file PATH"``, ``"default"``)."""

    value: Any
    source: str


@dataclass(frozen=True)
class Settings:
    """Every setting in effect. ``url.value`` is ``None`` when the embedded server is used."""

    url: Setting
    prefix: Setting
    require_url: Setting
    defaults: dict[str, Setting]
    files: list[ConfigFile]


def _from_files(files: list[ConfigFile], key: str, default: Any) -> Setting:
    for f in files:
        if key in f.values:
            return Setting(f.values[key], f.label)
    return Setting(default, "default")


def _env_bool(name: str) -> bool | None:
    text = os.environ.get(name)
    if text is None:
        return None
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise _cli_error(f"${name} must be 1 or 0 (true/false, yes/no, on/off): {text!r}", 64)


def resolve(
    url: str | None = None,
    *,
    prefix: str | None = None,
    require_url: bool = False,
    files: list[ConfigFile] | None = None,
) -> Settings:
    """Every setting and its source, by the module's precedence (flag arguments first).

    Raises:
        CliError: a bad configuration file (status 78) or a bad ``$REDISLOCK_REQUIRE_URL``
            (status 64).
    """
    files = load_files() if files is None else files
    if url:
        url_setting = Setting(url, "flag --url")
    elif os.environ.get("REDIS_URL"):
        url_setting = Setting(os.environ["REDIS_URL"], "env REDIS_URL")
    else:
        url_setting = _from_files(files, "url", None)
    if prefix is not None:
        prefix_setting = Setting(prefix, "flag --prefix")
    elif os.environ.get(ENV_PREFIX):
        prefix_setting = Setting(os.environ[ENV_PREFIX], f"env {ENV_PREFIX}")
    else:
        prefix_setting = _from_files(files, "prefix", DEFAULT_PREFIX)
    env_require = _env_bool(ENV_REQUIRE_URL)
    if require_url:
        require_setting = Setting(True, "flag --require-url")
    elif env_require is not None:
        require_setting = Setting(env_require, f"env {ENV_REQUIRE_URL}")
    else:
        require_setting = _from_files(files, "require_url", False)
    defaults = {k: _from_files(files, k, v) for k, v in BUILTIN_DEFAULTS.items()}
    return Settings(url_setting, prefix_setting, require_setting, defaults, files)


def _refusal(settings: Settings) -> str:
    paths = " or ".join(str(f.path) for f in settings.files)
    return (
        f"no Redis URL (no --url, no $REDIS_URL, no url in {paths}), and "
        f"{settings.require_url.source} refuses the embedded server, which would exclude "
        "only processes of this user on this machine"
    )


def locate(
    url: str | None = None,
    *,
    require_url: bool = False,
    quiet: bool = False,
    files: list[ConfigFile] | None = None,
) -> str:
    """The URL to use: ``url``, ``$REDIS_URL``, a configuration file's, or the embedded
    server's (started if needed, announced on stderr unless ``quiet``); ``files``: the
    configuration files if already read (:func:`load_files`).

    Raises:
        CliError: no URL anywhere and the fallback is refused (status 69); the embedded
            server could not start (69); a bad configuration file (78).
    """
    settings = resolve(url, require_url=require_url, files=files)
    if settings.url.value is not None:
        return str(settings.url.value)
    if settings.require_url.value:
        raise _cli_error(_refusal(settings), 69)
    try:
        found = server.ensure_embedded()
    except server.ServerError as exc:
        raise _cli_error(str(exc), 69) from exc
    if not quiet:
        print(
            f"redislock: no --url, $REDIS_URL or config file url: using the embedded "
            f"redis-server at {found}, which excludes only processes of this user on this "
            "machine (-q silences this line)",
            file=sys.stderr,
            flush=True,
        )
    return found


class Located(TypedDict, total=False):
    """:func:`locate`'s keywords, which :func:`connect` passes on."""

    require_url: bool
    quiet: bool
    files: list[ConfigFile] | None


def connect(url: str | None = None, **where: Unpack[Located]) -> Any:
    """A client (``redis.Redis``) for the URL :func:`locate` finds (``where``: its
    keywords, ``require_url``, ``quiet``, ``files``).

    Raises:
        CliError: see :func:`locate`; a malformed URL (status 64).
    """
    found = locate(url, **where)
    try:
        client: redis.Redis = redis.Redis.from_url(
            found, socket_timeout=10.0, socket_connect_timeout=5.0
        )
    except ValueError as exc:
        raise _cli_error(redact(f"bad Redis URL {found!r}: {exc}", found), 64) from None
    return client


def configured_help(files: list[ConfigFile], name: str) -> str:
    """``"; here 120 s (user file PATH)"``: a help suffix for a default (``ttl``, ``wait``,
    ``grace``) that a file in ``files`` sets, or ``""``."""
    setting = _from_files(files, name, None)
    if setting.value is None:
        return ""
    value = float(setting.value)
    shown = "forever" if math.isinf(value) else f"{value:g} s"
    return f"; here {shown} ({setting.source})".replace("%", "%%")  # help is %-formatted


def fill_defaults(args: argparse.Namespace, settings: Settings) -> None:
    """Set ``args.ttl``, ``args.wait`` and ``args.grace`` (where the subcommand has them and
    no flag gave them) from the configuration files, else the built-in defaults; a ``wait``
    of ``inf`` (``-w forever``, or ``wait = inf`` in a file) becomes ``None``: no limit."""
    for name, setting in settings.defaults.items():
        if hasattr(args, name) and getattr(args, name) is None:
            setattr(args, name, setting.value)
    wait = getattr(args, "wait", None)
    if wait is not None and math.isinf(wait):
        args.wait = None


def _show(setting: Setting, value: str | float | bool | None) -> dict[str, Any]:
    """A setting as ``config`` reports it: its value typed for JSON (a string, a number, a
    boolean, or null) and its source."""
    return {"value": value, "source": setting.source}


def _text(value: str | float | bool | None, name: str) -> str:
    """A typed value of :func:`_show` as ``config``'s text output prints it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float | int):
        return f"{value:g}"
    if value is None:
        return "forever" if name == "wait" else "-"
    return value or "-"


def add_parser(subs: Subcommands) -> None:
    """Add ``redislock config`` to the command line."""
    p = subs.add(
        "config",
        run_config,
        help="show which Redis URL and prefix are in effect, and where each came from",
        description="Prints each setting in effect (url, prefix, require_url, and the "
        "defaults ttl, wait, grace) and its source: flag, environment, user file, system "
        "file, or default/embedded. Passwords are masked. Exits 69 when no URL is "
        "configured and the embedded fallback is refused.",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")


def run_config(ctx: Context) -> int:
    """Run ``redislock config`` (see :func:`config_command`).

    Raises:
        CliError: see :func:`config_command`.
    """
    assert ctx.settings is not None  # added with settings=True
    return config_command(ctx.settings, as_json_output=ctx.args.json)


def config_command(settings: Settings, *, as_json_output: bool) -> int:
    """``redislock config``: print each setting in effect and where it came from, URL
    passwords masked. Exit 69 when no URL is configured and the fallback is refused.

    Raises:
        CliError: the embedded server's runtime directory is unsafe (status 69).
    """

    refused = settings.url.value is None and bool(settings.require_url.value)
    if settings.url.value is not None:
        url = _show(settings.url, redact(str(settings.url.value), str(settings.url.value)))
    elif refused:
        url = {"value": None, "source": "refused: " + settings.require_url.source}
    else:
        try:
            embedded = server.embedded_url()
        except server.ServerError as exc:
            raise _cli_error(str(exc), 69) from exc
        url = {
            "value": embedded,
            "source": "embedded server: excludes only processes of this user on this machine",
        }
    report: dict[str, Any] = {
        "url": url,
        "prefix": _show(settings.prefix, str(settings.prefix.value)),
        "require_url": _show(settings.require_url, bool(settings.require_url.value)),
    }
    for name, setting in settings.defaults.items():  # seconds; wait null: no limit
        forever = setting.value is None or math.isinf(setting.value)
        report[name] = _show(setting, None if forever else setting.value)
    files = [{"role": f.role, "path": str(f.path), "found": f.found} for f in settings.files]
    if as_json_output:
        print(json.dumps({**report, "files": files}, indent=2))
    else:
        for key, item in report.items():
            print(f"{key:<12} {_text(item['value'], key):<40} ({item['source']})")
        for f in settings.files:
            state = "read" if f.found else "not found"
            print(f"{f.role + ' file':<12} {f.path} ({state})")
    old = _old_embedded_socket()
    if old is not None:
        print(
            f"redislock: {old} is the socket of an embedded server in its old place, no longer "
            f"used; stop it with `REDISLOCK_RUNTIME_DIR={old.parent} redislock server stop`",
            file=sys.stderr,
        )
    if refused:
        print(f"redislock: {_refusal(settings)}", file=sys.stderr)
        return 69
    return 0


def _old_embedded_socket() -> Path | None:
    """``$XDG_RUNTIME_DIR/redislock/redis.sock`` if it exists and is not the one in use:
    where the embedded server lived before it moved to ``/tmp/redislock-<uid>``."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if not xdg or not os.path.isabs(xdg):
        return None
    sock = Path(xdg) / "redislock" / "redis.sock"
    if not sock.exists():
        return None
    try:
        in_use = (server.runtime_dir() / "redis.sock").resolve()
    except server.ServerError:
        return sock
    return None if sock.resolve() == in_use else sock
