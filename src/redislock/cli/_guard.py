# SPDX-License-Identifier: MIT
"""The guard of ``redislock run``: stops CMD's process group when ``redislock`` dies, or
stops being heard from, before the lease could pass to another holder.

Run as a script by path (it imports nothing from redislock, so it starts in a few ms),
in a session of its own, with its stdin the read end of a pipe whose only write end
``redislock run`` holds. ``redislock`` writes, one per line:

* CMD's process group id, once CMD exists;
* ``until <term_at> <kill_at>``: monotonic times (``CLOCK_MONOTONIC``, which every process
  of the machine shares) by which CMD must be stopped unless a newer line moves them: the
  local lease estimate's end, less a margin (``kill_at``) and less the grace period too
  (``term_at``). ``redislock`` writes a new one after each renewal that moved the estimate;
* ``done``, once CMD has exited.

If the pipe ends without ``done``, ``redislock`` died, by any signal SIGKILL included (the
kernel closes its descriptors): the guard SIGKILLs the group at once. If ``term_at`` passes
with no newer line - ``redislock`` is stopped (SIGSTOP), starved of CPU, or hung, and so are
its renewals, which another host's waiters will not wait for - the guard SIGTERMs the group,
and SIGKILLs it at ``kill_at``: CMD never outlives the lock that guards it, whether its
supervisor died or merely stopped (the pause Kleppmann's fencing argument is about). It
then exits with :data:`FIRED` (3), which ``redislock run`` reports as a loss.

Known limit: a process that left CMD's group (``setsid``, a daemon) is not reached.
"""

import contextlib
import os
import select
import signal
import sys
import time

FIRED = 3
"""Exit status: the guard stopped CMD at a deadline (``redislock`` was not heard from)."""


def _kill(group: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, sig)


def main() -> int:
    # Terminal and job-control signals are for redislock and CMD; the guard only follows
    # the pipe and its deadlines (and dies only with SIGKILL).
    for sig in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTSTP", "SIGTTIN", "SIGTTOU"):
        signal.signal(getattr(signal, sig), signal.SIG_IGN)
    group = 0
    term_at = kill_at = float("inf")
    termed = killed = False
    pending = b""
    while True:
        deadline = kill_at if termed else term_at
        known = group != 0 and not killed and deadline != float("inf")
        wait = max(0.0, deadline - time.monotonic()) if known else None
        ready, _, _ = select.select([0], [], [], wait)
        if not ready:  # a deadline passed with no newer line
            if group and not termed:
                _kill(group, signal.SIGTERM)
                termed = True
            elif group and not killed:
                _kill(group, signal.SIGKILL)
                killed = True
            continue
        chunk = os.read(0, 4096)
        if not chunk:  # redislock is gone without saying done
            if group and not killed:
                _kill(group, signal.SIGKILL)
            return FIRED if termed else 0
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            words = line.split()
            if words == [b"done"]:
                return FIRED if termed else 0
            if len(words) == 1 and words[0].isdigit():
                group = int(words[0])
            elif len(words) == 3 and words[0] == b"until" and not termed:
                term_at, kill_at = float(words[1]), float(words[2])


if __name__ == "__main__":
    sys.exit(main())
