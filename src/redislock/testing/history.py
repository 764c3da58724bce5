# SPDX-License-Identifier: MIT
"""Append-only JSON Lines records and the per-worker operation history.

Every record of a torture run (history events, oracle writes, nemesis log) is one JSON object
per line, written with **one** ``os.write`` on a file descriptor opened with ``O_APPEND``:

* a process killed with SIGKILL never leaves half a line behind (the kernel appends the whole
  buffer of a write to a regular file or none of it, barring a full disk);
* several processes may append to the same file without interleaving inside a line;
* nothing is buffered in user space, so what a process logged before it died is on disk (in
  the page cache) when the runner reads it, and a writer inherited through ``fork`` keeps
  working in the child.

Readers (:func:`read_jsonl`) still skip a torn last line, so a log cut short by a full disk is
readable.

A history event (one per line, see ``docs/torture.md``)::

    {"t": float,       # time.monotonic() seconds (system-wide on Linux)
     "w": int,         # worker id
     "pid": int,       # os.getpid() of the writer
     "hold": str,      # hold id f"{w}.{n}", one per new-hold attempt
     "op": "acquire" | "reenter" | "release" | "extend" | "lost",
     "ph": "invoke" | "ok" | "fail" | "unknown" | "info",
     "name": str,      # lock name
     "mode": "x" | "s" | "p",  # exclusive / shared (read side) / semaphore permit
     "fence": int | None,      # the fencing token, on the ok of an acquire
     "err": str | None}        # "ExceptionType: message" on fail / unknown

An operation is an ``invoke`` event followed by exactly one completion (``ok``, ``fail`` or
``unknown``) with the same ``(w, hold, op)``, or by none if the process was killed meanwhile.
``unknown`` means the effect may or may not have happened (timeout, connection error). The
op ``lost`` has the single phase ``info``: the library told the worker it lost that hold.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from redislock._lifecycle import Closeable

__all__ = [
    "MODES",
    "OPS",
    "PHASES",
    "History",
    "JsonlWriter",
    "read_histories",
    "read_jsonl",
]

#: Operations a history event may name.
OPS: Final = frozenset({"acquire", "reenter", "release", "release_inner", "extend", "lost"})
#: Phases of a history event (``info`` only for op ``lost``).
PHASES: Final = frozenset({"invoke", "ok", "fail", "unknown", "info"})
#: Hold modes: ``x`` exclusive, ``s`` shared (read side), ``p`` semaphore permit.
MODES: Final = frozenset({"x", "s", "p"})

_COMPLETIONS: Final = frozenset({"ok", "fail", "unknown"})


class JsonlWriter(Closeable):
    """Append JSON objects to ``path``, one line per :meth:`write`, one ``os.write`` per line.

    The file is opened ``O_WRONLY | O_APPEND | O_CREAT`` (mode 0o644) at construction. Safe to
    share between processes (each line lands whole) and across ``fork``; not buffered.

    Raises:
        OSError: the file cannot be opened (at construction) or written.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append ``record`` as one line of compact JSON.

        Raises:
            ValueError: the writer is closed.
            TypeError: ``record`` is not JSON-serialisable.
            OSError: the write failed (disk full, ...).
        """
        fd = self._fd
        if fd is None:
            raise ValueError(f"JsonlWriter({str(self.path)!r}) is closed")
        data = (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()
        written = os.write(fd, data)
        # A regular file takes the whole buffer; keep going if a short write happens anyway
        # (the line may then interleave with another writer's, readers skip what they cannot
        # parse at the end).
        while written < len(data):
            data = data[written:]
            written = os.write(fd, data)

    def close(self) -> None:
        """Close the file descriptor (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._fd is None

    def __repr__(self) -> str:
        state = "closed" if self._fd is None else "open"
        return f"JsonlWriter({str(self.path)!r}, {state})"


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every JSON object in the JSON Lines file ``path``, in file order.

    A torn last line (not valid JSON, with or without a final newline) is skipped: that is what
    a writer cut short (full disk, short write) leaves behind. Blank lines are skipped.

    Raises:
        OSError: the file cannot be read (FileNotFoundError if it does not exist).
        ValueError: a line other than the last is not a JSON object (the file is corrupt).
    """
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    # The piece after the last newline is b"" for a complete file, else a torn line.
    complete, tail = lines[:-1], lines[-1]
    out: list[dict[str, Any]] = []
    for number, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError as exc:
            if number == len(complete) and not tail:
                break  # the last line is torn even though it ends in a newline
            raise ValueError(f"{path}: line {number} is not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: line {number} is not a JSON object")
        out.append(obj)
    if tail.strip():
        # No final newline: a torn line, unless it is a whole object (a file written by hand;
        # a cut JSON object never parses as one).
        try:
            obj = json.loads(tail)
        except ValueError:
            return out
        if isinstance(obj, dict):
            out.append(obj)
    return out


def read_histories(
    directory: str | os.PathLike[str], pattern: str = "history-*.jsonl"
) -> list[dict[str, Any]]:
    """The events of every history file in ``directory`` matching ``pattern``, sorted by ``t``.

    Files are read with :func:`read_jsonl` (torn last lines skipped). Events with equal ``t``
    keep their file order (files are taken in name order).

    Raises:
        OSError, ValueError: as :func:`read_jsonl`.
    """
    events: list[dict[str, Any]] = []
    for path in sorted(Path(directory).glob(pattern)):
        events.extend(read_jsonl(path))
    events.sort(key=lambda e: float(e["t"]))
    return events


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _err_text(err: str | BaseException | None) -> str | None:
    if err is None or isinstance(err, str):
        return err
    return f"{type(err).__name__}: {err}"


class History(Closeable):
    """One worker's operation history, appended to the JSON Lines file ``path``.

    Each worker process writes its own file (``history-<w>.jsonl`` by convention, which is what
    :func:`read_histories` reads). Every event is stamped ``t = time.monotonic()`` and
    ``pid = os.getpid()`` when it is written, so an object inherited through ``fork`` logs the
    child's pid; hold ids (:meth:`new_hold`) come from a per-object counter, so a parent and
    child that both call it must use different worker ids.

    ``err`` arguments take either a string or the exception itself (logged as
    ``"ExceptionType: message"``).

    Raises:
        ValueError: an unknown op / phase / mode (all methods), or ``worker`` < 0.
        OSError: the file cannot be opened or written.
    """

    def __init__(self, path: str | os.PathLike[str], worker: int) -> None:
        if not _is_count(worker):
            raise ValueError(f"worker must be an int >= 0, not {worker!r}")
        self.worker = worker
        self._writer = JsonlWriter(path)
        self._next = 0

    @property
    def path(self) -> Path:
        """The history file."""
        return self._writer.path

    def new_hold(self) -> str:
        """A fresh hold id ``f"{worker}.{n}"`` (n = 0, 1, 2, ...): one per new-hold attempt."""
        hold = f"{self.worker}.{self._next}"
        self._next += 1
        return hold

    def invoke(self, op: str, hold: str, name: str, mode: str) -> None:
        """Log that ``op`` on ``hold`` starts (phase ``invoke``); ``op`` is not ``lost``."""
        if op == "lost":
            raise ValueError("op 'lost' has no invoke; use History.lost()")
        self._event(op, "invoke", hold, name, mode, None, None)

    def complete(
        self,
        op: str,
        hold: str,
        name: str,
        mode: str,
        ph: str,
        *,
        fence: int | None = None,
        err: str | BaseException | None = None,
    ) -> None:
        """Log the completion of ``op`` on ``hold``: ``ph`` is ``ok``, ``fail`` or ``unknown``.

        ``fence`` is the fencing token on the ``ok`` of an ``acquire``; ``err`` describes the
        error on ``fail`` / ``unknown``.
        """
        if ph not in _COMPLETIONS:
            raise ValueError(f"completion phase must be ok, fail or unknown, not {ph!r}")
        if op == "lost":
            raise ValueError("op 'lost' has no completion; use History.lost()")
        self._event(op, ph, hold, name, mode, fence, _err_text(err))

    def lost(self, hold: str, name: str, mode: str, err: str | BaseException | None = None) -> None:
        """Log a loss notification for ``hold`` (op ``lost``, phase ``info``)."""
        self._event("lost", "info", hold, name, mode, None, _err_text(err))

    def _event(
        self,
        op: str,
        ph: str,
        hold: str,
        name: str,
        mode: str,
        fence: int | None,
        err: str | None,
    ) -> None:
        if op not in OPS:
            raise ValueError(f"unknown op {op!r} (one of {sorted(OPS)})")
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of {sorted(MODES)})")
        if fence is not None and not _is_count(fence):
            raise ValueError(f"fence must be an int >= 0 or None, not {fence!r}")
        self._writer.write(
            {
                "t": time.monotonic(),
                "w": self.worker,
                "pid": os.getpid(),
                "hold": hold,
                "op": op,
                "ph": ph,
                "name": name,
                "mode": mode,
                "fence": fence,
                "err": err,
            }
        )

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._writer.close()

    def __repr__(self) -> str:
        return f"History({str(self.path)!r}, worker={self.worker})"
