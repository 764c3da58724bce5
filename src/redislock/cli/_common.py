# SPDX-License-Identifier: MIT
"""What every ``redislock`` subcommand shares and nothing else: the exit statuses,
:class:`CliError`, the masking of secrets in what is printed, and the lease-loss reasons the
library logged. Its own module so the subcommands need not import the package (whose
:func:`~redislock.cli.main` imports them)."""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import urllib.parse
from typing import ClassVar

from redislock._core import validate

__all__ = [
    "EXIT_BUSY",
    "EXIT_CODES",
    "EXIT_LOST",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "LONG_LEASE",
    "CliError",
    "LostReasons",
    "lost_reason",
    "mask_url",
    "redact",
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


class LostReasons(logging.Handler):
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
    return LostReasons.reasons.get(name)
