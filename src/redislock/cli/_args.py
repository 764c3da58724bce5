# SPDX-License-Identifier: MIT
"""What the subcommands' parsers share: the parser class, the table the top parser is built
from, the options of ``run``, ``once`` and ``elect``, and the :class:`Context` each
subcommand's ``run`` gets.

A subcommand module has ``add_parser(subs: Subcommands) -> None``, which calls
:meth:`Subcommands.add` with its ``run(ctx: Context) -> int`` and adds its options to the
parser it gets back. Only argparse's public API is used: the parser records each option it
is given (:attr:`Parser.options`), so that ``CMD`` can be cut off the command line
(:func:`redislock.cli.split_command`) without argparse's internals.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypeVar, overload

import redis

from redislock._core.hold import MAX_PERMITS
from redislock._core.keys import DEFAULT_PREFIX
from redislock.cli import where
from redislock.cli._common import EXIT_BUSY, EXIT_CODES, EXIT_USAGE, LONG_LEASE, CliError

__all__ = [
    "CMD_TAIL",
    "LEASE_HELP",
    "Context",
    "Exclusive",
    "Parser",
    "Subcommand",
    "Subcommands",
    "command_of",
    "common",
    "epilog",
    "hold_options",
    "hold_settings",
    "permits",
    "seconds",
]

_N = TypeVar("_N")
_Num = TypeVar("_Num", int, float)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits 64 (EX_USAGE) as documented, not 2; an argument
    it does not recognise is reported with its own usage line (a subcommand's, not the top
    parser's); and it records the options it is given (:attr:`options`, its parents' too).
    Add mutually exclusive options through :meth:`exclusive`, so that they are recorded."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: dict[str, argparse.Action] = {}
        """Each option string (``-w``, ``--wait``) and its action."""
        super().__init__(*args, **kwargs)
        for parent in kwargs.get("parents", ()):
            if isinstance(parent, Parser):
                self.options.update(parent.options)

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*name_or_flags, **kwargs)
        self.options.update(dict.fromkeys(action.option_strings, action))
        return action

    def exclusive(self) -> Exclusive:
        """A mutually exclusive group of options (recorded in :attr:`options`)."""
        return Exclusive(self)

    def takes_value(self, word: str) -> bool:
        """Whether option ``word`` (as typed) consumes the next word as its value."""
        if word.startswith("--"):
            action = self.options.get(word)
            return "=" not in word and action is not None and action.nargs != 0
        for i in range(1, len(word)):  # -nq, -w5, -nw 5: a cluster of short options
            action = self.options.get("-" + word[i])
            if action is None:
                return False
            if action.nargs != 0:
                return i == len(word) - 1  # a value attached (-w5) or the next word (-w)
        return False

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")

    @overload
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: None = None
    ) -> tuple[argparse.Namespace, list[str]]: ...
    @overload
    def parse_known_args(
        self, args: Iterable[str] | None, namespace: _N
    ) -> tuple[_N, list[str]]: ...
    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...
    def parse_known_args(
        self, args: Iterable[str] | None = None, namespace: Any = None
    ) -> tuple[Any, list[str]]:
        """As argparse's, but an argument left over is a usage error of this parser: a
        subcommand's parser (which argparse hands the words after the subcommand's name)
        reports it with the subcommand's usage line, as ``parse_args`` would."""
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


class Exclusive:
    """A mutually exclusive group of a :class:`Parser`'s options, recorded by the parser."""

    def __init__(self, parser: Parser) -> None:
        self.parser = parser
        self.group = parser.add_mutually_exclusive_group()

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action:
        action = self.group.add_argument(*name_or_flags, **kwargs)
        self.parser.options.update(dict.fromkeys(action.option_strings, action))
        return action


@dataclass
class Context:
    """What a subcommand's ``run`` gets: the parsed arguments (``prefix`` checked, ``ttl``,
    ``wait`` and ``grace`` filled from the configuration files or the built-in defaults),
    the subcommand's own parser (for a usage error with its usage line), the configuration
    files read by ``main`` (``None``: read them again, which reports a bad one) and the
    settings in effect (``None`` for a subcommand added with ``settings=False``)."""

    args: argparse.Namespace
    parser: Parser
    files: list[where.ConfigFile] | None
    settings: where.Settings | None = None

    def client(self) -> redis.Redis:
        """A client for the Redis that ``--url``, the environment, the files or the
        embedded server give (:func:`redislock.cli.where.connect`).

        Raises:
            CliError: no URL and the embedded server refused or failed (69); a bad URL (64)
                or configuration file (78).
        """
        made: redis.Redis = where.connect(
            self.args.url,
            require_url=self.args.require_url,
            quiet=self.args.quiet,
            files=self.files,
        )
        return made

    def locate(self) -> str:
        """The URL :meth:`client` would connect to (the embedded server started if needed).

        Raises:
            CliError: as :meth:`client`.
        """
        return where.locate(
            self.args.url,
            require_url=self.args.require_url,
            quiet=self.args.quiet,
            files=self.files,
        )


@dataclass(frozen=True)
class Subcommand:
    """One row of the table: its parser (whose ``func`` default is the subcommand's
    ``run``), its one-line help, whether ``CMD`` follows NAME (``cmd``) and whether it
    needs the settings resolved first."""

    name: str
    parser: Parser
    help: str
    cmd: bool
    settings: bool


def common(sub: bool) -> Parser:
    """The options every subcommand takes, before or after its name. The subcommands'
    copies default to "not given" (SUPPRESS), so that one before the subcommand counts."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if sub else value

    c = Parser(add_help=False)
    c.add_argument(
        "--url",
        default=default(None),
        help="Redis URL (redis://, rediss://, unix://); default $REDIS_URL, then url in "
        "$XDG_CONFIG_HOME/redislock/config.toml (~/.config/... without it), then in "
        "/etc/redislock/config.toml",
    )
    c.add_argument(
        "--prefix",
        default=default(None),  # None: REDISLOCK_PREFIX, the config files, then the default
        help=f"key prefix of the locks (default {DEFAULT_PREFIX})",
    )
    c.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=default(False),
        help="no output of ours when busy, timed out or already done (failures still print)",
    )
    c.add_argument(
        "--require-url",
        action="store_true",
        default=default(False),
        help="refuse the embedded server: exit 69 without --url, REDIS_URL or a config file",
    )
    return c


@dataclass
class Subcommands:
    """The top parser and its subcommands, in the order they were added (``--help``'s)."""

    top: Parser
    files: list[where.ConfigFile] | None = None
    """The configuration files whose ``[defaults]`` the help of ``--ttl``, ``--wait`` and
    ``--grace`` shows."""
    commands: dict[str, Subcommand] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.parents = [common(sub=True)]
        self.choices = self.top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        self,
        name: str,
        run: Callable[[Context], int],
        *,
        help: str,  # noqa: A002  (argparse's name)
        cmd: bool = False,
        settings: bool = True,
        **kwargs: Any,
    ) -> Parser:
        """Add subcommand ``name``, run by ``run``; ``cmd``: CMD follows NAME (its words are
        cut off before parsing); ``settings``: resolve the URL, prefix and defaults before
        ``run`` (``False``: ``server``, which must work whatever the files say). The other
        keywords go to argparse's ``add_parser``; the description is wrapped at 78 columns
        and shown as is, unless ``formatter_class`` is given."""
        if "formatter_class" not in kwargs:
            kwargs["formatter_class"] = argparse.RawDescriptionHelpFormatter
            if "description" in kwargs:
                kwargs["description"] = textwrap.fill(kwargs["description"], 78)
        parser = self.choices.add_parser(name, help=help, parents=self.parents, **kwargs)
        parser.set_defaults(func=run)
        self.commands[name] = Subcommand(name, parser, help, cmd, settings)
        return parser


def _parsed(text: str, kind: Callable[[str], _Num], what: str) -> _Num:
    """``kind(text)``; an option's type error ``not <what>`` if it is not one."""
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def _whole(text: str, what: str, low: int, high: int) -> int:
    """A whole number from ``low`` to ``high`` (``what``: what it is not, if it is no int)."""
    value = _parsed(text, int, what)
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"must be between {low} and {high}: {text!r}")
    return value


def seconds(text: str) -> float:
    """A number of seconds >= 0 (an option's type)."""
    value = _parsed(text, float, "a number of seconds")
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0: {text!r}")
    return value


_FOREVER = ("forever", "inf", "infinity")


def _wait_seconds(text: str) -> float:
    """``-w``'s value: seconds, or ``forever`` (``inf``): no limit, e.g. over a config file's
    ``wait``."""
    if text.strip().lower() in _FOREVER:
        return math.inf
    return seconds(text)


def permits(text: str) -> int:
    """A number of permits, 1 to ``MAX_PERMITS`` (an option's type)."""
    return _whole(text, "a whole number of permits", 1, MAX_PERMITS)


def _exit_code(text: str) -> int:
    return _whole(text, "an exit status", 0, 255)


LEASE_HELP = "lease in seconds, renewed every third of it while CMD runs (default 30)"
CMD_TAIL = (
    "CMD is the first word after NAME that is not an option (options after it are CMD's); "
    "'--' before CMD works too. -c 'shell command' runs through /bin/sh -c instead. "
)


def epilog(text: str) -> str:
    """``text`` wrapped for a raw help epilog, followed by the exit statuses."""
    return textwrap.fill(text, 78) + "\n\n" + EXIT_CODES


def hold_options(
    p: Parser, files: list[where.ConfigFile] | None, *, lease: str, nowait_alias: bool
) -> None:
    """What run, once and elect share: waiting, the busy status, -c, the lease, grace.
    ``--ttl``, ``--wait`` and ``--grace`` default to ``None`` (not given), so that
    :func:`redislock.cli.where.fill_defaults` can tell a flag from a configured or built-in
    default; when a file in ``files`` sets one, its help says so (value and file)."""

    def configured(name: str) -> str:
        return where.configured_help(files, name) if files else ""

    wait = p.exclusive()
    wait.add_argument(
        "-w",
        "--wait",
        type=_wait_seconds,
        metavar="S",
        help="wait at most S seconds ('forever': no limit, the default)" + configured("wait"),
    )
    names = ["-n", "--nonblock", "--no-wait"] if nowait_alias else ["-n", "--nonblock"]
    wait.add_argument(
        *names,
        dest="wait",
        action="store_const",
        const=0.0,
        help="one try: exit 75 (or -E's N) at once if busy (= --wait 0)",
    )
    p.add_argument(
        "-E",
        "--conflict-exit-code",
        type=_exit_code,
        default=EXIT_BUSY,
        metavar="N",
        help=f"exit status when busy or the wait timed out (default {EXIT_BUSY})",
    )
    p.add_argument(
        "-c",
        dest="shell",
        metavar="'SHELL COMMAND'",
        help="run this via /bin/sh -c instead of CMD",
    )
    p.add_argument("--ttl", type=seconds, default=None, help=lease + configured("ttl"))
    p.add_argument(
        "--grace",
        type=seconds,
        default=None,
        help="seconds between SIGTERM and SIGKILL when the lease is lost (default 10)"
        + configured("grace"),
    )


def command_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """CMD of run, once or elect: its words, or /bin/sh -c with ``-c``; a usage error of
    ``parser`` when neither or both are given."""
    if args.shell is not None:
        if args.cmd:
            parser.error(f"give CMD or -c 'shell command', not both (CMD: {args.cmd[0]!r})")
        return ["/bin/sh", "-c", args.shell]
    if not args.cmd:
        parser.error(
            f"{args.command} needs a command after NAME (or after --), or -c 'shell command': "
            f"redislock {args.command} NAME [--] CMD [ARGS...]"
        )
    cmd: list[str] = args.cmd
    return cmd


def _check_lease(args: argparse.Namespace) -> None:
    """``--ttl`` in words a user can act on: > 0, and a warning past an hour."""
    if args.ttl <= 0:
        raise CliError(f"--ttl must be > 0 seconds, got {args.ttl:g}", EXIT_USAGE)
    if args.ttl > LONG_LEASE and not args.quiet:
        print(
            f"redislock: warning: --ttl {args.ttl:g} is {args.ttl / 60:.0f} minutes; did you "
            "mean milliseconds? seconds are expected",
            file=sys.stderr,
        )


def hold_settings(ctx: Context) -> tuple[list[str], dict[str, Any]]:
    """CMD of run, once or elect, and the keywords of their hold (ttl, wait, grace, prefix,
    the busy status, quiet), after the usage checks (before any I/O).

    Raises:
        CliError: ``--ttl`` is 0 (status 64).
    """
    args = ctx.args
    cmd = command_of(args, ctx.parser)
    _check_lease(args)
    return cmd, {
        "ttl": args.ttl,
        "wait": args.wait,
        "grace": args.grace,
        "prefix": args.prefix,
        "conflict_status": args.conflict_exit_code,
        "quiet": args.quiet,
    }
