# SPDX-License-Identifier: MIT
"""The ``redislock`` command: run a command under a lock (a Lock, a read or write hold of a
ReadWriteLock, a FairLock, or a Semaphore permit), inspect, list, force-release (every
kind), the lottery demo, and the embedded server.

This module holds :func:`main`, the top parser (:func:`build_parsers`), the cut of CMD off
the command line (:func:`split_command`) and what every subcommand shares (:func:`connect`,
from ``where``, which finds Redis: flag, environment, configuration files, embedded server;
:class:`CliError`, the exit statuses). Each subcommand lives in its own module (``run``,
``once``, ``elect``, ``inspecting``, ``listing``, ``top``, ``force_release``, ``demo``,
``torture``, ``where``'s ``config``, ``server_cmd``), which owns its parser and its run:
``add_parser(subs)`` adds the subcommand to the table (:class:`_args.Subcommands`) with
its ``run(ctx)``, which :func:`main` calls as ``args.func``; ``_args`` has what their
parsers share, ``render`` shows a :class:`~redislock.inspection.LockInfo`.

Exit status (also in the README):
    0     success (``run``, ``once``: CMD's own status is passed through; ``once``: also
          when the period's run was already done)
    64    bad usage or invalid argument (EX_USAGE); ``run``: NAME is in use by another kind
          of lock; ``release --force``: the key under NAME is not a redislock lock
    69    Redis unreachable (also when ``run`` cannot release after CMD), or no redis-server
          for the embedded server, or no URL configured and ``--require-url`` (or
          ``REDISLOCK_REQUIRE_URL=1``, or ``require_url = true``) refuses the embedded
          server (EX_UNAVAILABLE)
    1     another failure of Redis or of the library (the message names it); ``demo``: no
          worker drew
    3     ``server status``: the embedded server is not running
    75    lock busy with ``-n/--nonblock``, or the wait timed out, or a ``--fair`` queue is
          full (EX_TEMPFAIL; ``-E/--conflict-exit-code N`` makes it N)
    79    ``run``: the lease was lost while CMD ran; CMD's process group was stopped
          (``elect``: leadership was lost)
    126   ``run``: CMD could not be executed;  127: CMD not found
    78    a configuration file is not valid TOML or has a bad key or value (EX_CONFIG)
    128+N ``run``: CMD was killed by signal N
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import textwrap
import warnings
from collections.abc import Sequence

import redis

from redislock._core import validate
from redislock._version import __version__
from redislock.cli import _args, where
from redislock.cli._common import EXIT_BUSY as EXIT_BUSY
from redislock.cli._common import EXIT_CODES as EXIT_CODES
from redislock.cli._common import EXIT_LOST as EXIT_LOST
from redislock.cli._common import EXIT_UNAVAILABLE as EXIT_UNAVAILABLE
from redislock.cli._common import EXIT_USAGE as EXIT_USAGE
from redislock.cli._common import LONG_LEASE as LONG_LEASE
from redislock.cli._common import CliError as CliError
from redislock.cli._common import LostReasons
from redislock.cli._common import lost_reason as lost_reason
from redislock.cli._common import mask_url as mask_url
from redislock.cli._common import redact as redact
from redislock.cli.render import KIND_LABELS as KIND_LABELS
from redislock.cli.where import connect as connect
from redislock.errors import LockConfigError, LongLeaseWarning, RedisLockError

__all__ = [
    "EXIT_BUSY",
    "EXIT_LOST",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "CliError",
    "connect",
    "main",
]


def build_parsers(files: list[where.ConfigFile] | None = None) -> _args.Subcommands:
    """The command line's parsers: the top one and each subcommand's, built by the
    subcommand modules' ``add_parser`` in the order ``--help`` lists them; ``files``: the
    configuration files whose ``[defaults]`` the help of ``--ttl``, ``--wait`` and
    ``--grace`` shows."""
    from redislock.cli import (
        demo,
        elect,
        force_release,
        inspecting,
        listing,
        once,
        run,
        server_cmd,
        top,
        torture,
    )

    p = _args.Parser(
        prog="redislock",
        description=textwrap.fill(
            "Distributed locks on Redis. With no --url, REDIS_URL or url in a configuration "
            "file (`redislock config` shows which), an embedded redis-server on a private "
            "unix socket is started (or reused) for this user.",
            78,
        ),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_args.common(sub=False)],
    )
    python = ".".join(map(str, sys.version_info[:3]))
    version = f"redislock {__version__} (redis-py {redis.__version__}, Python {python})"
    p.add_argument("--version", action="version", version=version)
    subs = _args.Subcommands(p, files)
    for add_parser in (
        run.add_parser,
        once.add_parser,
        elect.add_parser,
        inspecting.add_parser,
        listing.add_parser,
        top.add_parser,
        force_release.add_parser,
        demo.add_parser,
        torture.add_parser,
        where.add_parser,  # config
        server_cmd.add_parser,
    ):
        add_parser(subs)
    return subs


def split_command(subs: _args.Subcommands, words: list[str]) -> tuple[list[str], list[str]]:
    """``words`` cut into redislock's own and CMD's, as flock, etcdctl and consul do: for
    run, once and elect CMD starts at the first word after NAME that is not an option (or
    after a ``--``); options after CMD are CMD's."""
    i, current, positionals = 0, subs.top, 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return words[:i], words[i + 1 :]
        if word.startswith("-") and word != "-":
            i += 2 if current.takes_value(word) else 1
            continue
        if current is subs.top:  # the subcommand
            found = subs.commands.get(word)
            if found is None or not found.cmd:
                break
            current = found.parser
        else:
            positionals += 1
            if positionals == 2:  # NAME was the first; CMD starts here
                return words[:i], words[i:]
        i += 1
    if "--" in words:  # any other subcommand: everything after "--" is left over
        cut = words.index("--")
        return words[:cut], words[cut + 1 :]
    return words, []


def parse(subs: _args.Subcommands, words: list[str]) -> argparse.Namespace:
    """``words`` parsed as ``redislock`` parses them: CMD cut off first (``args.cmd``,
    see :func:`split_command`), then argparse; a usage error exits 64 (SystemExit)."""
    own, cmd = split_command(subs, words)
    args = subs.top.parse_args(own)
    args.cmd = cmd
    return args


def _quiet_library_logs() -> None:
    log = logging.getLogger("redislock")
    if not any(isinstance(h, LostReasons) for h in log.handlers):
        log.addHandler(LostReasons(logging.WARNING))
        log.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    words = list(sys.argv[1:] if argv is None else argv)
    try:  # the files' defaults shown in --help; a bad file is reported after parsing
        files: list[where.ConfigFile] | None = where.load_files()
    except CliError:
        files = None
    subs = build_parsers(files)
    if not words:  # like git: the help, and not a success
        subs.top.print_help(sys.stdout)
        return EXIT_USAGE
    args = parse(subs, words)
    at = ""  # " at URL (from SOURCE)" in a connection error: what a cron run really used
    try:  # also to know which password to hide in messages
        setting = where.resolve(args.url, files=files).url
        url = setting.value
        if url:
            at = f" at {mask_url(url)} (from {setting.source})"
    except CliError:
        url = args.url or os.environ.get("REDIS_URL")
    _quiet_library_logs()

    def say(message: str) -> None:  # never a password, whatever the message quotes
        print(f"redislock: {redact(message, url)}", file=sys.stderr)

    try:
        with warnings.catch_warnings():  # --ttl's own warning names the flag: not twice
            warnings.simplefilter("ignore", LongLeaseWarning)
            status = _dispatch(args, subs, files)
    except KeyboardInterrupt:  # Ctrl-C while waiting for the lock: no traceback
        status = 128 + signal.SIGINT
    except CliError as exc:
        say(str(exc))
        return exc.status
    except LockConfigError as exc:
        say(str(exc))
        return EXIT_USAGE
    except redis.exceptions.AuthenticationError as exc:  # a ConnectionError to redis-py
        say(f"Redis{at} refused the username or password: {exc}")
        return EXIT_UNAVAILABLE
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        say(f"cannot reach Redis{at}: {exc}")
        return EXIT_UNAVAILABLE
    except (redis.exceptions.RedisError, RedisLockError) as exc:
        say(f"{type(exc).__name__}: {exc}")
        return 1
    if argv is None and status == 128 + signal.SIGINT:
        # Die of SIGINT too, so that a calling shell stops its loop as it would for the
        # command itself (an exit status of 130 does not do that).
        sys.stdout.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return status


def _dispatch(
    args: argparse.Namespace,
    subs: _args.Subcommands,
    files: list[where.ConfigFile] | None = None,
) -> int:
    """Run the parsed command (its ``run``, ``args.func``); ``files``: the configuration
    files read once by :func:`main` (``None``: read them here, which reports a bad one)."""
    command = subs.commands[args.command]
    ctx = _args.Context(args, command.parser, files)
    if command.settings:
        ctx.settings = where.resolve(
            args.url, prefix=args.prefix, require_url=args.require_url, files=files
        )
        args.prefix = validate.check_prefix(ctx.settings.prefix.value)
        where.fill_defaults(args, ctx.settings)
    status: int = args.func(ctx)
    return status
