# SPDX-License-Identifier: MIT
"""The ``redislock`` command: run a command under a lock (a Lock, a read or write hold of a
ReadWriteLock, a FairLock, or a Semaphore permit), inspect, list, force-release (every
kind), the lottery demo, and the embedded server.

This module holds :func:`main`, the argument parser and what every subcommand shares
(:func:`connect`, from ``where``, which finds Redis: flag, environment, configuration files,
embedded server; :class:`CliError`, the exit statuses); each subcommand lives in its own
module (``run``, ``once``, ``inspecting``, ``listing``, ``top``, ``force_release``, ``demo``,
``torture``, ``server_cmd``, ``where``'s ``config``; ``render`` shows a
:class:`~redislock.inspection.LockInfo`), imported when it runs.

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
import contextlib
import logging
import math
import os
import re
import signal
import sys
import textwrap
import urllib.parse
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, NoReturn

import redis
import redis.cluster

from redislock._core import validate
from redislock._core.hold import MAX_PERMITS
from redislock._core.keys import DEFAULT_PREFIX
from redislock._version import __version__
from redislock.cli.render import KIND_LABELS as KIND_LABELS
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

EXIT_USAGE = 64
EXIT_UNAVAILABLE = 69
EXIT_BUSY = 75
EXIT_LOST = 79


class CliError(Exception):
    """A failure to report on stderr with an exit status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


_USERINFO = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/@:\s]*):(?P<secret>[^@/\s]*)@", re.I)
_QUERY_SECRET = re.compile(r"(?P<head>[?&][a-z_]*password=)(?P<secret>[^&#\s]*)", re.I)


def mask_url(text: str) -> str:
    """``text`` with the password of every Redis URL in it replaced by ``***``
    (``redis://user:PASSWORD@host``, ``...?password=PASSWORD``)."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:***@", text)
    return _QUERY_SECRET.sub(lambda m: f"{m['head']}***", text)


def redact(text: str, url: str | None) -> str:
    """``text`` safe to print: URLs masked (:func:`mask_url`), and the passwords of ``url``
    removed wherever they appear (a parser's message may quote a piece of the URL)."""
    text = mask_url(text)
    if url:
        secrets = [m["secret"] for m in _USERINFO.finditer(url)]
        secrets += [m["secret"] for m in _QUERY_SECRET.finditer(url)]
        for secret in sorted(filter(None, secrets), key=len, reverse=True):
            text = text.replace(secret, "***")
            text = text.replace(urllib.parse.unquote(secret), "***")
    return text


from redislock.cli import where  # noqa: E402  (after CliError, redact: where.py uses them)
from redislock.cli.where import connect as connect  # noqa: E402


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0: {text!r}")
    return value


_FOREVER = ("forever", "inf", "infinity")


def _wait_seconds(text: str) -> float:
    """``-w``'s value: seconds, or ``forever`` (``inf``): no limit, e.g. over a config file's
    ``wait``."""
    if text.strip().lower() in _FOREVER:
        return math.inf
    return _seconds(text)


def _permits(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of permits: {text!r}") from None
    if not 1 <= value <= MAX_PERMITS:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_PERMITS}: {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error exits 64 (EX_USAGE) as documented, not 2."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


EXIT_CODES = """\
exit status:
  0       success; run, once, elect: CMD's own status is passed through
          (once: also 0 when the period's run was already done)
  1       another failure of Redis or of the library (the message names it)
  3       server status: the embedded server is not running
  64      bad usage or an invalid argument (EX_USAGE); also a bare `redislock`;
          run: NAME is in use by another kind of lock; release --force: the
          key under NAME is not a redislock lock (not touched)
  69      Redis unreachable or refusing the credentials, or no redis-server for
          the embedded server, or no URL with --require-url (EX_UNAVAILABLE)
  75      busy with -n, or the wait timed out, or a --fair queue is full
          (EX_TEMPFAIL); -E/--conflict-exit-code N makes it N
  78      a configuration file is not valid TOML or has a bad key or value
          (EX_CONFIG)
  79      run, once: the lease was lost while CMD ran (CMD's process group was
          stopped); elect: leadership was lost
  126     CMD could not be executed
  127     CMD not found
  128+N   CMD was killed by signal N (130: Ctrl-C)
"""

LONG_LEASE = validate.LONG_LEASE
"""A ``--ttl`` above this many seconds gets a warning on stderr (milliseconds meant?)."""

_WITH_CMD = ("run", "once", "elect")


def _common(sub: bool) -> _Parser:
    """The options every subcommand takes, before or after its name. The subcommands'
    copies default to "not given" (SUPPRESS), so that one before the subcommand counts."""

    def default(value: object) -> object:
        return argparse.SUPPRESS if sub else value

    c = _Parser(add_help=False)
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


def _hold_options(p: argparse.ArgumentParser, *, lease: str, nowait_alias: bool) -> None:
    """What run, once and elect share: waiting, the busy status, -c, the lease, grace."""
    wait = p.add_mutually_exclusive_group()
    wait.add_argument(
        "-w",
        "--wait",
        type=_wait_seconds,
        metavar="S",
        help="wait at most S seconds ('forever': no limit, the default)",
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
    p.add_argument("--ttl", type=_seconds, default=30.0, help=lease)
    p.add_argument(
        "--grace",
        type=_seconds,
        default=10.0,
        help="seconds between SIGTERM and SIGKILL when the lease is lost (default 10)",
    )


def _exit_code(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an exit status: {text!r}") from None
    if not 0 <= value <= 255:
        raise argparse.ArgumentTypeError(f"must be between 0 and 255: {text!r}")
    return value


_LEASE_HELP = "lease in seconds, renewed every third of it while CMD runs (default 30)"
_CMD_TAIL = (
    "CMD is the first word after NAME that is not an option (options after it are CMD's); "
    "'--' before CMD works too. -c 'shell command' runs through /bin/sh -c instead. "
)


def _para(text: str) -> str:
    """``text`` wrapped for a raw help epilog, followed by the exit statuses."""
    return textwrap.fill(text, 78) + "\n\n" + EXIT_CODES


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="redislock",
        description=textwrap.fill(
            "Distributed locks on Redis. With no --url, REDIS_URL or url in a configuration "
            "file (`redislock config` shows which), an embedded redis-server on a private "
            "unix socket is started (or reused) for this user.",
            78,
        ),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[_common(sub=False)],
    )
    python = ".".join(map(str, sys.version_info[:3]))
    version = f"redislock {__version__} (redis-py {redis.__version__}, Python {python})"
    p.add_argument("--version", action="version", version=version)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = [_common(sub=True)]

    def subparser(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if "description" in kwargs:
            kwargs["description"] = textwrap.fill(kwargs["description"], 78)
        sp: argparse.ArgumentParser = sub.add_parser(
            name,
            parents=common,
            formatter_class=argparse.RawDescriptionHelpFormatter,
            **kwargs,
        )
        return sp

    run = subparser(
        "run",
        help="run a command while holding a lock",
        usage="redislock run [options] NAME [--] CMD [ARGS...]\n"
        "       redislock run [options] NAME -c 'SHELL COMMAND'",
        allow_abbrev=False,
        epilog=_para(
            _CMD_TAIL + "Without --read, --write, --fair or --permits it holds a plain "
            "Lock. CMD gets the fencing token of its hold in $REDISLOCK_FENCING_TOKEN."
        ),
    )
    run.add_argument("name", help="lock name")
    kind = run.add_mutually_exclusive_group()
    kind.add_argument(
        "--read",
        dest="kind",
        action="store_const",
        const="read",
        help="take a read hold of ReadWriteLock(NAME): shared with other readers",
    )
    kind.add_argument(
        "--write",
        dest="kind",
        action="store_const",
        const="write",
        help="take the write hold of ReadWriteLock(NAME): exclusive",
    )
    kind.add_argument(
        "--fair",
        dest="kind",
        action="store_const",
        const="fair",
        help="take FairLock(NAME): granted in arrival order",
    )
    kind.add_argument(
        "--permits",
        type=_permits,
        metavar="N",
        help="take one permit of Semaphore(NAME, permits=N) (a count stored in Redis by "
        "set_permits wins)",
    )
    _hold_options(run, lease=_LEASE_HELP, nowait_alias=True)

    once = subparser(
        "once",
        help="run a command exactly once per period among many processes",
        usage="redislock once [options] NAME --period S [--] CMD [ARGS...]",
        allow_abbrev=False,
        description="Runs CMD if no run of NAME succeeded yet in this period, holding "
        "Lock(NAME) while it runs (as `run` does). Another process of the same period "
        "waits for the lock, finds the record and exits 0 without running CMD, saying on "
        "stderr who ran it (not with -q). Only a CMD that exits 0 counts: after a failure "
        "the next attempt runs it.",
        epilog=_para(
            _CMD_TAIL + "CMD gets the fencing token of its hold in $REDISLOCK_FENCING_TOKEN."
        ),
    )
    once.add_argument("name", help="job name (also the lock's)")
    once.add_argument(
        "--period",
        type=_seconds,
        required=True,
        metavar="S",
        help="period in seconds, aligned on UTC multiples since the Unix epoch "
        "(86400: a UTC day); with --key, how long its record lives",
    )
    once.add_argument("--key", metavar="K", help="an explicit period key (e.g. 2026-11-23) instead")
    _hold_options(once, lease=_LEASE_HELP, nowait_alias=False)

    elect = subparser(
        "elect",
        help="run a command only while this process leads an election",
        usage="redislock elect [options] NAME [--] CMD [ARGS...]",
        allow_abbrev=False,
        description="Campaign for leadership of Election(NAME) (waiting in line), run CMD "
        "while leading, with the term in $REDISLOCK_FENCING_TOKEN; stop CMD if leadership "
        "is lost, or once renewals failed until a quarter of the lease is left, before "
        "another contender can lead (exit 79); resign when CMD exits or redislock is "
        "signalled, so the next contender leads at once.",
        epilog=_para(_CMD_TAIL),
    )
    elect.add_argument("name", help="election name")
    elect.add_argument("--identity", help="advertised identity (default <host>:<pid>)")
    _hold_options(
        elect,
        lease="leadership lease in seconds, renewed every third of it; a dead leader is "
        "replaced within it (default 30)",
        nowait_alias=False,
    )

    ins = subparser("inspect", help="show who holds a lock (any kind), and who waits")
    ins.add_argument("name")
    ins.add_argument("--json", action="store_true", help="machine-readable output")

    ls = subparser("list", help="list held locks of every kind (SCAN, never KEYS)")
    ls.add_argument(
        "--starts-with",
        dest="name_prefix",
        default="",
        metavar="TEXT",
        help="only lock names starting with TEXT (literally; --prefix is the key prefix)",
    )
    ls.add_argument("--json", action="store_true", help="machine-readable output")

    top = subparser(
        "top",
        help="a live view of the locks under the prefix: holders, leases, waiters",
        description="Refreshes every --interval seconds (Ctrl-C ends it) from SCAN plus "
        "inspect: each held or awaited lock's kind, holders (host, pid), how long held, "
        "the lease left, waiters and fencing counter. --once prints one table, --json one "
        "snapshot as JSON. Hold times compare this machine's clock with the holder's.",
    )
    top.add_argument(
        "--match", default="*", metavar="GLOB", help="lock names matching GLOB (default *)"
    )
    top.add_argument(
        "--interval", type=_seconds, default=1.0, help="seconds between refreshes (default 1)"
    )
    top.add_argument("--once", action="store_true", help="one snapshot, then exit")
    top.add_argument("--json", action="store_true", help="one snapshot as JSON, then exit")
    top.add_argument("--count", type=int, metavar="N", help="exit after N refreshes")
    top.add_argument(
        "--cluster",
        action="store_true",
        help="the URL is a node of a Redis Cluster: scan every primary",
    )

    rel = subparser(
        "release",
        help="delete a lock whoever holds it (needs --force)",
        description="Operator override for any kind: a Lock is deleted and one waiter woken; "
        "a FairLock is deleted and granted to its next queued waiter; an RLock, "
        "ReadWriteLock or Semaphore loses every hold and all its waiters are woken. "
        "The old holders find their lease gone at their next renewal. A key under NAME "
        "that redislock did not write (another Redis type, a value or hash fields of "
        "another format) is not touched: exit 64.",
        epilog=EXIT_CODES,
    )
    rel.add_argument("name")
    rel.add_argument("--force", action="store_true", help="yes, really")

    demo = subparser("demo", help="the lottery: N processes race, exactly one draws")
    demo.add_argument("--workers", type=int, default=5, help="processes (default 5)")

    from redislock.cli import torture

    torture.add_parser(sub, parents=common)

    cfg = subparser(
        "config",
        help="show which Redis URL and prefix are in effect, and where each came from",
        description="Prints each setting in effect (url, prefix, require_url, and the "
        "defaults ttl, wait, grace) and its source: flag, environment, user file, system "
        "file, or default/embedded. Passwords are masked. Exits 69 when no URL is "
        "configured and the embedded fallback is refused.",
    )
    cfg.add_argument("--json", action="store_true", help="machine-readable output")

    srv = subparser(
        "server",
        help="the embedded redis-server",
        description="status: whether the embedded server of this user runs, and where; "
        "start: start it unless it runs; stop: stop it (its append-only file keeps the "
        "fencing counters).",
        epilog=_para(
            "status exits 3 when the embedded server is not running (as `systemctl status` "
            "does for a stopped unit), 0 when it runs; start and stop exit 0, or 69 when "
            "the server cannot be started or stopped."
        ),
    )
    srv.add_argument("action", choices=["status", "stop", "start"])
    srv.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def _takes_value(parser: argparse.ArgumentParser, word: str) -> bool:
    """Whether option ``word`` (as typed) consumes the next word as its value."""
    if word.startswith("--"):
        action = parser._option_string_actions.get(word)
        return "=" not in word and action is not None and action.nargs != 0
    for i in range(1, len(word)):  # -nq, -w5, -nw 5: a cluster of short options
        action = parser._option_string_actions.get("-" + word[i])
        if action is None:
            return False
        if action.nargs != 0:
            return i == len(word) - 1  # a value attached (-w5) or the next word (-w)
    return False


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser | None = action.choices.get(name)
            return found
    return None


def _split_command(
    parser: argparse.ArgumentParser, words: list[str]
) -> tuple[list[str], list[str]]:
    """``words`` cut into redislock's own and CMD's, as flock, etcdctl and consul do: for
    run, once and elect CMD starts at the first word after NAME that is not an option (or
    after a ``--``); options after CMD are CMD's."""
    i, current, positionals = 0, parser, 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return words[:i], words[i + 1 :]
        if word.startswith("-") and word != "-":
            i += 2 if _takes_value(current, word) else 1
            continue
        if current is parser:  # the subcommand
            if word not in _WITH_CMD:
                break
            found = _subparser(parser, word)
            if found is None:
                break
            current = found
        else:
            positionals += 1
            if positionals == 2:  # NAME was the first; CMD starts here
                return words[:i], words[i:]
        i += 1
    if "--" in words:  # any other subcommand: everything after "--" is left over
        cut = words.index("--")
        return words[:cut], words[cut + 1 :]
    return words, []


class _LostReasons(logging.Handler):
    """The library's log records, for the CLI: a lease-loss warning is kept for ``run``'s
    one message (and not printed a second time), the others are printed as our lines."""

    reasons: ClassVar[dict[str, str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "lease of lock %r lost: %s" and isinstance(record.args, tuple):
            name, reason = record.args
            self.reasons[str(name)] = str(reason)
            return
        with contextlib.suppress(Exception):
            print(f"redislock: {record.getMessage()}", file=sys.stderr)


def lost_reason(name: str) -> str | None:
    """Why the library says the lease of ``name`` was lost (None: it said nothing)."""
    return _LostReasons.reasons.get(name)


def _quiet_library_logs() -> None:
    log = logging.getLogger("redislock")
    if not any(isinstance(h, _LostReasons) for h in log.handlers):
        log.addHandler(_LostReasons(logging.WARNING))
        log.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = _parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if not words:  # like git: the help, and not a success
        parser.print_help(sys.stdout)
        return EXIT_USAGE
    words, cmd = _split_command(parser, words)
    try:  # the files' defaults shown in --help; a bad file is reported after parsing
        files: list[where.ConfigFile] | None = where.load_files()
    except CliError:
        files = None
    where.defer_defaults(parser, files)
    args = parser.parse_args(words)
    args.cmd = cmd
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
            status = _dispatch(args, parser, files)
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


def _command_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """CMD of run, once or elect: its words, or /bin/sh -c with ``-c``."""
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


def _dispatch(
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    files: list[where.ConfigFile] | None = None,
) -> int:
    """Run the parsed command; ``files``: the configuration files read once by :func:`main`
    (``None``: read them here, which reports a bad one)."""
    if args.command == "server":
        from redislock.cli.server_cmd import server_command

        return server_command(args.action, as_json_output=args.json)
    settings = where.resolve(
        args.url, prefix=args.prefix, require_url=args.require_url, files=files
    )
    args.prefix = validate.check_prefix(settings.prefix.value)
    where.fill_defaults(args, settings)
    if args.command == "config":
        return where.config_command(settings, as_json_output=args.json)

    def client() -> redis.Redis:
        made: redis.Redis = connect(
            args.url, require_url=args.require_url, quiet=args.quiet, files=files
        )
        return made

    own = _subparser(parser, args.command) or parser  # its usage line in an error
    cmd: list[str] = []
    hold: dict[str, Any] = {}
    if args.command in _WITH_CMD:
        cmd = _command_of(args, own)
        _check_lease(args)
        hold = {
            "ttl": args.ttl,
            "wait": args.wait,
            "grace": args.grace,
            "prefix": args.prefix,
            "conflict_status": args.conflict_exit_code,
            "quiet": args.quiet,
        }
    if args.command == "run":
        from redislock.cli.run import run_command

        return run_command(
            client(),
            args.name,
            cmd,
            kind="permit" if args.permits is not None else args.kind or "lock",
            permits=args.permits,
            **hold,
        )
    if args.command == "once":
        from redislock.cli.once import once_command

        return once_command(client(), args.name, cmd, period=args.period, key=args.key, **hold)
    if args.command == "elect":
        from redislock.cli.run import run_command

        return run_command(client(), args.name, cmd, kind="elect", identity=args.identity, **hold)
    if args.command == "inspect":
        from redislock.cli.inspecting import inspect_command

        return inspect_command(client(), args.name, args.prefix, as_json_output=args.json)
    if args.command == "list":
        from redislock.cli.listing import list_command

        return list_command(client(), args.name_prefix, args.prefix, as_json_output=args.json)
    if args.command == "top":
        from redislock.cli.top import top_command

        if args.count is not None and args.count < 1:
            own.error("--count must be at least 1")
        if args.interval <= 0:
            own.error("--interval must be > 0 seconds")
        single = client()
        top_client: redis.Redis | redis.cluster.RedisCluster = single
        if args.cluster:
            # a seed node, with the URL's settings (credentials, TLS, timeouts)
            seed = dict(single.connection_pool.connection_kwargs)
            seed.pop("db", None)
            top_client = redis.cluster.RedisCluster(**seed)
        return top_command(
            top_client,
            args.prefix,
            match=args.match,
            interval=args.interval,
            once=args.once,
            as_json_output=args.json,
            count=args.count,
        )
    if args.command == "release":
        from redislock.cli.force_release import force_release_command

        if not args.force:
            raise CliError(
                "release deletes the lock whoever holds it; add --force to do it", EXIT_USAGE
            )
        return force_release_command(client(), args.name, args.prefix)
    if args.command == "demo":
        from redislock.cli.demo import run_demo

        if args.workers < 1:
            own.error("--workers must be at least 1")
        # Starts the embedded server once, before the workers race.
        found = where.locate(args.url, require_url=args.require_url, quiet=args.quiet, files=files)
        return run_demo(found, workers=args.workers)
    if args.command == "torture":
        from redislock.cli.torture import torture_command

        try:
            # Only an explicit --url: without one the run starts servers of its own.
            return torture_command(args, args.url)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    raise AssertionError(f"unknown command {args.command!r}")
