# SPDX-License-Identifier: MIT
"""The guard of ``redislock run``: kills CMD's process group if ``redislock`` dies first.

Run as a script by path (it imports nothing from redislock, so it starts in a few ms),
in a session of its own, with its stdin the read end of a pipe whose only write end
``redislock run`` holds. ``redislock`` writes CMD's process group id (one line) once CMD
exists, and ``done`` (one line) once CMD has exited. If the pipe ends without ``done``,
``redislock`` died, by any signal SIGKILL included (the kernel closes its descriptors):
the guard then SIGKILLs the group at once, well before the lease could pass to another
holder, so CMD never outlives the lock that guards it.

Known limit: a process that left CMD's group (``setsid``, a daemon) is not reached.
"""

import contextlib
import os
import signal
import sys


def main() -> int:
    # Terminal and job-control signals are for redislock and CMD; the guard only follows
    # the pipe (and dies only with SIGKILL).
    for sig in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGTSTP", "SIGTTIN", "SIGTTOU"):
        signal.signal(getattr(signal, sig), signal.SIG_IGN)
    data = b""
    while chunk := os.read(0, 256):
        data += chunk
    lines = data.split(b"\n")
    if b"done" in lines or not lines[0].strip().isdigit():
        return 0
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(int(lines[0]), signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
