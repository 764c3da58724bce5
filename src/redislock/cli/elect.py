# SPDX-License-Identifier: MIT
"""``redislock elect NAME -- CMD``: run a command only while this process leads an election
(``run``'s supervision, :func:`redislock.cli.run.run_command`, holding an ``Election``)."""

from __future__ import annotations

from redislock.cli import _args
from redislock.cli.run import run_command

__all__ = ["add_parser", "run"]


def add_parser(subs: _args.Subcommands) -> None:
    """Add ``redislock elect`` to the command line."""
    p = subs.add(
        "elect",
        run,
        cmd=True,
        help="run a command only while this process leads an election",
        usage="redislock elect [options] NAME [--] CMD [ARGS...]",
        allow_abbrev=False,
        description="Campaign for leadership of Election(NAME) (waiting in line), run CMD "
        "while leading, with the term in $REDISLOCK_FENCING_TOKEN; stop CMD if leadership "
        "is lost, or once renewals failed until a quarter of the lease is left, before "
        "another contender can lead (exit 79); resign when CMD exits or redislock is "
        "signalled, so the next contender leads at once.",
        epilog=_args.epilog(_args.CMD_TAIL),
    )
    p.add_argument("name", help="election name")
    p.add_argument("--identity", help="advertised identity (default <host>:<pid>)")
    _args.hold_options(
        p,
        subs.files,
        lease="leadership lease in seconds, renewed every third of it; a dead leader is "
        "replaced within it (default 30)",
        nowait_alias=False,
    )


def run(ctx: _args.Context) -> int:
    """Run ``redislock elect`` (see :func:`redislock.cli.run.run_command`).

    Raises:
        CliError: a usage error found before any I/O (64), or Redis not found (69).
    """
    args = ctx.args
    cmd, hold = _args.hold_settings(ctx)
    return run_command(ctx.client(), args.name, cmd, kind="elect", identity=args.identity, **hold)
