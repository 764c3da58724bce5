# SPDX-License-Identifier: MIT
"""The operations a lock flow asks its driver to perform, and reply decoding helpers.

A *flow* is a generator that yields operations and receives their replies; it holds the
whole algorithm of one lock method (what to send, what the reply means, whether to wait
and try again). The sync and asyncio shells each have a few-line *driver* that performs
the operations with their client, so every algorithm exists exactly once.
(The pattern is httpx's ``Auth.auth_flow``.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeAlias, TypeVar

from redislock._clients import NO_PERMISSION_ERRORS, RESPONSE_ERRORS, errors_of
from redislock._core import kinds
from redislock._core.scripts import SCRIPTS, Script
from redislock.errors import KindConflictError, NoPermissionError, UnexpectedReplyError

__all__ = [
    "Acked",
    "Batch",
    "Call",
    "Commands",
    "Eval",
    "FanOut",
    "Flow",
    "Keep",
    "NodeLateError",
    "Op",
    "Probe",
    "Replicated",
    "Sleep",
    "Wait",
    "acked",
    "as_int",
    "as_str",
    "encoded",
    "error_flow",
    "no_permission",
    "queue_replicated",
    "script_error",
    "unwrap",
]

T = TypeVar("T")


class Eval(NamedTuple):
    """Run a Lua script: EVALSHA, then EVAL if the server answers NOSCRIPT."""

    script: Script
    keys: tuple[str, ...]
    args: tuple[str | int | bytes, ...]
    encoded: tuple[bytes, ...] = ()
    """Optional: EVALSHA's ``sha, numkeys, *keys`` already encoded (:func:`encoded`), built
    once by a core that sends the same keys many times, so that a single call does not
    encode them again; () when not given. Only the single-client drivers use it."""


def encoded(script: Script, keys: tuple[str, ...]) -> tuple[bytes, ...]:
    """EVALSHA's ``sha, numkeys, *keys`` for ``script`` and ``keys``, as UTF-8 bytes (what
    redis-py would send for them), for :attr:`Eval.encoded`."""
    return (script.sha.encode(), b"%d" % len(keys), *map(str.encode, keys))


class Wait(NamedTuple):
    """Wait for a wake-up on the process's shared wake-up channel (no pooled connection;
    see :mod:`redislock._core.wake`).

    The reply is the payload of a message on ``channel`` whose part before the first ``|``
    is ``match`` (any message if ``match`` is None; a plain ``*`` matches every ``match``)
    published after the flow's PREVIOUS operation was sent; None after ``timeout`` seconds
    (always > 0), or at once when a wake-up may have been missed (the subscription is only
    just live, or its connection failed): the flow then checks again.
    """

    channel: str
    match: str | None
    timeout: float
    keep: Keep | None = None
    """A queued waiter's lease, renewed by the process while this Wait blocks (see
    :class:`Keep`); None: nothing to renew."""


@dataclass(eq=False, slots=True)
class Keep:
    """A queued waiter's lease (Lock's and FairLock's queue, ``fair_acquire.lua``), kept
    alive by its process while the waiter blocks in a :class:`Wait`.

    The process renews the leases of all its waiters on one client together, one
    ``waiter_keep.lua`` call per :data:`redislock._core.wake.KEEP_BATCH` waiters (per hash
    slot on a Cluster), every :attr:`every` seconds: waiting costs no try of
    ``fair_acquire.lua``. A waiter that the call finds granted, first in line on a free
    lock, or no longer queued is woken with ``<tag>|<fence>`` (its grant) or ``<tag>|0``
    (try again now), as a message on its channel would wake it; see
    :mod:`redislock._core.wake`.
    """

    keys: tuple[str, str, str, str]
    """The lock key, queue, waiter leases and waiter info (``fair_acquire.lua``'s KEYS 1, 3, 4,
    5)."""
    token: str
    waiter_ms: int
    """The waiter lease, milliseconds."""
    every: float
    """Seconds between renewals (a third of the waiter lease)."""
    tag: str
    """What a grant to this waiter is tagged with (:meth:`FairKeys.tag`)."""
    checked: float
    """Monotonic time at which the waiter was last known to be queued, not granted: the send
    time of its last try, or of the last renewal that found it queued. A grant it gets was
    written after that (the lease estimate starts there)."""
    due: float = 0.0
    """Monotonic time of its next renewal (set by the process)."""


class Call(NamedTuple):
    """A plain Redis command, e.g. ``("EXISTS", key)``; the first key decides cluster routing."""

    args: tuple[str | int, ...]


class FanOut(NamedTuple):
    """Send ``ops[i]`` to master ``i`` of a quorum client, all at once (None: skip that
    master), and wait at most ``timeout`` seconds. The reply is a list with, per master,
    its reply, the exception it raised, or a :class:`NodeLateError` (no answer in time).
    Only a quorum client (a Redlock's masters) performs it."""

    ops: tuple[Eval | Call | None, ...]
    timeout: float
    decided: Callable[[Sequence[object]], bool] | None = None
    """Given the replies (or exceptions) received so far, whether the round's outcome is
    known: the round may then end before ``timeout`` and the masters still busy count as
    late (None: wait for every master, up to ``timeout``)."""
    cleanup: bool = False
    """The operations undo earlier ones (releases): a master still busy with an earlier
    command runs them after it, even once the round is over."""


class Probe(NamedTuple):
    """What the client's server has natively: the reply is the client's cached
    :class:`~redislock._core.features.Features` (``INFO server`` is sent once per client,
    the first time a flow asks; see :mod:`redislock._core.features`)."""


class Commands(NamedTuple):
    """Plain Redis commands sent together in one pipelined round trip (no transaction;
    every key in one hash slot). The reply is the list of their replies, an error reply in
    its place as the exception the client made of it (a failed connection raises)."""

    calls: tuple[tuple[tuple[str | int | bytes, ...], dict[str, bool]], ...]
    """Each command's arguments and its parsing options for the client (``{"get": True}``
    for ``SET ... GET``, whose reply is then the old value rather than a bool)."""


class Sleep(NamedTuple):
    """Pause the flow for ``seconds`` (Redlock's random delay between two tries)."""

    seconds: float


class NodeLateError(Exception):
    """A master did not answer a :class:`FanOut` within its timeout."""


class Replicated(NamedTuple):
    """Run the script ``op`` and, on the SAME connection (one pipeline, no transaction),
    ``WAIT replicas timeout_ms`` (left out when ``replicas`` is 0) and ``INFO server`` (when
    ``run_id``). The reply is an :class:`Acked`.

    WAIT counts the replicas that acknowledged every write made so far *by the connection
    it runs on*: sent on another connection it would return at once and prove nothing.
    NOSCRIPT is handled as for :class:`Eval` (the pipeline is sent again with EVAL).
    """

    op: Eval
    replicas: int
    timeout_ms: int
    run_id: bool


class Acked(NamedTuple):
    """The reply of a :class:`Replicated` operation."""

    reply: Any
    """The script's reply."""
    acknowledged: int
    """Replicas that acknowledged the write within the limit (WAIT's reply; 0 if not asked)."""
    run_id: str
    """The answering server's ``run_id`` (``INFO server``); "" if not asked or not given."""


Op: TypeAlias = Eval | Wait | Call | FanOut | Sleep | Replicated | Probe | Commands
Flow: TypeAlias = Generator[Op, Any, T]


def as_str(value: object) -> str:
    """A reply element as ``str``, whatever the client's ``decode_responses``."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, str):
        return value
    raise UnexpectedReplyError(f"expected a string reply, got {value!r}")


def as_int(value: object) -> int:
    """A reply element as ``int`` (Lua numbers arrive as integers)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, bytes | str):
        try:
            return int(value)
        except ValueError:
            pass
    raise UnexpectedReplyError(f"expected an integer reply, got {value!r}")


_WRAPPED = (
    ("-READONLY", "ReadOnlyError"),
    ("-OOM", "OutOfMemoryError"),
)

_SCRIPT_REFUSED = "user executing the script can't"
"""What Redis says when an ACL refuses a command inside a script (6.2 and 7.x): it names no
command. redislock's own scripts name it instead (``NOPERM redislock: <COMMAND> ...``)."""

_STATE_MARK = "redislock - "
"""How redislock's scripts begin an error about what they found in Redis (a value they did
not write, a malformed waiter record): raised as :class:`UnexpectedReplyError`."""

_OURS = re.compile(r"redislock: ([A-Z][A-Z_|]*) ")
_REDIS_NAMES = re.compile(r"'([A-Za-z][A-Za-z_|]*)' command")


def no_permission(text: str) -> NoPermissionError:
    """The typed error of an ACL refusal whose message is ``text``, naming the command when
    the message does: a redislock script's ``NOPERM redislock: <COMMAND> ...``, or Redis's
    own ``... no permissions to run the '<command>' command``."""
    text = text.strip()
    if text.startswith("NOPERM "):
        text = text[len("NOPERM ") :]
    found = _OURS.search(text) or _REDIS_NAMES.search(text)
    return NoPermissionError(text, found[1].upper() if found else None)


def script_error(exc: Exception) -> Exception | None:
    """The typed error inside a command's failure, or None if there is none.

    An ACL refusal becomes :class:`redislock.errors.NoPermissionError` (a redis-py
    ``NoPermissionError`` too) naming the refused command when Redis or the script says which;
    a script's own error about a value it did not write (``redislock - <key> holds ...``)
    :class:`redislock.errors.UnexpectedReplyError`.
    Redis reports a command refused inside a script as ``Error running script ...:
    -READONLY You can't write against a read only replica``; redis-py then raises a plain
    ``ResponseError``. Unwrapped, it is the ``ReadOnlyError`` (or ``OutOfMemoryError``) that
    callers and redis-py's Sentinel failover handling expect (valkey-py's class for an error
    of a valkey-py client).
    """
    if isinstance(exc, NoPermissionError | KindConflictError):
        return None  # typed already
    text = str(exc)
    if isinstance(exc, NO_PERMISSION_ERRORS):
        return no_permission(text)
    if type(exc) not in RESPONSE_ERRORS:
        return None
    at = text.find("-NOPERM")
    if at >= 0:
        return no_permission(text[at + 1 :])
    if _SCRIPT_REFUSED in text:
        return NoPermissionError(
            f"{text} (a command inside the script; this Redis did not say which)", None
        )
    at = text.find(_STATE_MARK)
    if at >= 0:  # a value our scripts did not write, named by the script
        return UnexpectedReplyError(text[at + len(_STATE_MARK) :].strip())
    for marker, cls in _WRAPPED:
        at = text.find(marker)
        if at >= 0:
            wrapped: Exception = getattr(errors_of(exc), cls)(text[at + len(marker) :].strip())
            return wrapped
    return None


# For the error of a name shared by two kinds, from the kinds table: the kinds each script
# serves, the kinds that keep a string or a hash at the lock key, and a hold's kind by mode.
_WANTED = {name: kinds.conflict_wanted(name) for name in SCRIPTS}
_FOUND = {
    key_type: f"{kinds_there} (a {key_type} at the lock key)"
    for key_type in dict.fromkeys(stored.key_type for stored in kinds.STORED)
    if (kinds_there := kinds.conflict_found(key_type)) is not None
}
_HOLD_MODES = kinds.hold_mode_found()
_NAMED_KEY = re.compile(r"\(redislock key: (.*)\)\s*$")
_WRONGTYPE_6_2 = re.compile(
    r"Error running script \(call to f_[0-9a-f]+\): @user_script:\d+: WRONGTYPE "
)


def error_flow(exc: Exception, op: Op) -> Flow[BaseException]:
    """The error to raise for ``exc``, which ``op`` failed with: as :func:`script_error`,
    and a ``WRONGTYPE`` from a script becomes :class:`KindConflictError` naming both kinds.

    The drivers run this flow on the failure path only (one ``TYPE``, and for a hash one
    ``HRANDFIELD``, of the lock key); it never raises, and returns ``exc`` itself when there
    is nothing to add.
    """
    typed = script_error(exc)
    if typed is not None:
        return typed
    text = str(exc)
    # Redis 7+: "WRONGTYPE ... script: ..."; 6.2: "Error running script (call to f_...):
    # @user_script:345: WRONGTYPE ..."
    wrong = text.startswith("WRONGTYPE") or _WRONGTYPE_6_2.match(text) is not None
    if not isinstance(op, Eval | Replicated) or not wrong:
        return exc
    ev = op.op if isinstance(op, Replicated) else op
    named = _NAMED_KEY.search(text)
    key = named[1] if named else (ev.keys[0] if ev.keys else "")
    if not key:
        return exc
    wanted = _WANTED.get(ev.script.name) or kinds.conflict_wanted(ev.script.name)
    found = "another kind of lock (its keys under this name have other Redis types)"
    try:
        key_type = as_str((yield Call(("TYPE", key))))
        if key_type in _FOUND:
            found = _FOUND[key_type]
        elif key_type != "none":
            found = f"a Redis {key_type}, not written by redislock"
        if key_type == "hash":  # a hold hash: its holds' mode tells the kind
            sample = yield Call(("HRANDFIELD", key, 1, "WITHVALUES"))
            for item in _flat(sample):
                mode = as_str(item)[:2]
                if len(mode) == 2 and mode[1] == "|" and mode[0] in _HOLD_MODES:
                    found = _HOLD_MODES[mode[0]]
                    break
    except Exception:  # the probe is a courtesy: without it the message is more general
        pass
    name = None
    if key.endswith("}") and "{" in key:
        name = key[key.index("{") + 1 : -1]
    return KindConflictError(name, key, wanted, found)


def _flat(reply: object) -> list[object]:
    """The scalar items of a reply (a RESP3 reply nests pairs)."""
    if isinstance(reply, list | tuple):
        return [x for item in reply for x in _flat(item)]
    return [reply]


def _typed(reply: object) -> object:
    """A reply as the drivers hand it to a flow: a failure as the typed error inside it (see
    :func:`script_error`)."""
    if isinstance(reply, RESPONSE_ERRORS):
        return script_error(reply) or reply
    return reply


def _queue_eval(pipe: Any, op: Eval, *, load: bool = False) -> None:
    n = len(op.keys)
    if load:
        pipe.eval(op.script.source, n, *op.keys, *op.args)
    else:
        pipe.evalsha(op.script.sha, n, *op.keys, *op.args)


def _queue_tail(pipe: Any, replicas: int, timeout_ms: int, run_id: bool) -> None:
    if replicas > 0:
        pipe.execute_command("WAIT", replicas, timeout_ms)
    if run_id:
        pipe.execute_command("INFO", "server")


def _run_id(info: object) -> str:
    """``run_id`` from an ``INFO server`` reply (parsed to a dict by redis-py, or raw)."""
    if isinstance(info, dict):
        found = info.get("run_id", info.get(b"run_id"))
        if isinstance(found, bytes | str):
            return as_str(found)
        return "" if found is None else str(found)  # all digits: parse_info made an int
    if isinstance(info, bytes | str):
        for line in as_str(info).splitlines():
            if line.startswith("run_id:"):
                return line[len("run_id:") :].strip()
    return ""


def _decode_tail(replicas: int, run_id: bool, tail: list[object]) -> tuple[int, str] | Exception:
    """WAIT's and INFO's replies (as queued by :func:`_queue_tail`), or the first error."""
    acks, rid, at = 0, "", 0
    if replicas > 0:
        reply = _typed(tail[at])
        at += 1
        if isinstance(reply, Exception):
            return reply
        acks = as_int(reply)
    if run_id:
        reply = _typed(tail[at])
        if isinstance(reply, RESPONSE_ERRORS):  # INFO refused (ACL): run_id unknown
            reply = None
        elif isinstance(reply, Exception):
            return reply
        rid = _run_id(reply)
    return acks, rid


def unwrap(reply: Any) -> tuple[Any, Acked | None]:
    """A script's reply and, if it was sent as :class:`Replicated`, its :class:`Acked`."""
    if isinstance(reply, Acked):
        return reply.reply, reply
    return reply, None


def queue_replicated(pipe: Any, op: Replicated, *, load: bool = False) -> None:
    """Queue ``op``'s commands on a redis-py pipeline (sync or asyncio; no I/O): the script
    (EVALSHA, or EVAL with ``load``), then WAIT and INFO as asked."""
    _queue_eval(pipe, op.op, load=load)
    _queue_tail(pipe, op.replicas, op.timeout_ms, op.run_id)


def acked(op: Replicated, replies: list[object]) -> Acked | Exception:
    """Decode the pipeline replies of :func:`queue_replicated`: the :class:`Acked`, or the
    first error (a script failure unwrapped as the drivers do; NOSCRIPT as is)."""
    reply = _typed(replies[0])
    if isinstance(reply, Exception):
        return reply
    tail = _decode_tail(op.replicas, op.run_id, replies[1:])
    if isinstance(tail, Exception):
        return tail
    return Acked(reply, *tail)


_START = object()

_RENEW = SCRIPTS["lock_renew"]


def _renewal(op: object) -> bool:
    """Whether ``op`` is a watchdog renewal that ``lock_renew.lua`` can carry along with
    others: ``lock_extend`` in mode "max" on one key (no done key, no op id)."""
    return (
        type(op) is Eval
        and op.script.name == "lock_extend"
        and len(op.keys) == 1
        and len(op.args) == 3
        and op.args[2] == "max"
    )


def _parts(reply: object, n: int) -> list[object]:
    """The ``n`` per-lock replies inside one ``lock_renew`` reply (its failure: n times)."""
    if isinstance(reply, Exception):
        return [reply] * n
    if isinstance(reply, list | tuple) and len(reply) == n:
        return list(reply)
    return [UnexpectedReplyError(f"lock_renew replied {reply!r}")] * n


class Batch(Generic[T]):
    """Several flows driven side by side: each step sends the next operation of every
    unfinished flow in one pipelined round trip (used by the watchdogs to renew many leases
    at once). Flows must not block (no :class:`Wait`).

    With ``merge`` (a plain Redis client: one node, so keys of any slots may share a
    script), the step's Lock renewals (``lock_extend`` "max" on one key) go as ONE
    ``lock_renew.lua`` call instead of one script each; each flow still gets the reply
    ``lock_extend`` would have given it.
    """

    def __init__(self, flows: list[Flow[T]], *, merge: bool = False) -> None:
        self.results: list[T | BaseException | None] = [None] * len(flows)
        self.pending: list[tuple[int, Flow[T], Op]] = []
        self.merge = merge
        self._tail: tuple[int, int, bool] = (0, 0, False)  # this step's WAIT and INFO
        self._wire: list[Op] | None = None  # this step's operations as sent (see ops())
        self._groups: list[list[int]] = []  # per operation sent: the pending flows it serves
        for i, flow in enumerate(flows):
            self._advance(i, flow, _START)

    def _advance(self, i: int, flow: Flow[T], reply: object) -> None:
        try:
            if reply is _START:
                op = next(flow)
            elif isinstance(reply, Exception):
                op = flow.throw(reply)
            else:
                op = flow.send(reply)
        except StopIteration as stop:
            self.results[i] = stop.value
            return
        except Exception as exc:  # the flow raised: its result is the error
            self.results[i] = exc
            return
        if isinstance(op, Wait | Sleep):
            raise TypeError("a batched flow may not block")
        self.pending.append((i, flow, op))

    def ops(self) -> list[Op]:
        """The operations to send in this step: one per unfinished flow, except that with
        ``merge`` two or more Lock renewals go as one ``lock_renew`` call (first). The
        replies, one per operation returned, go to :meth:`feed` (through :meth:`split`
        after a pipeline)."""
        if self._wire is not None:
            return self._wire
        ops = [op for _, _, op in self.pending]
        carried = [k for k, op in enumerate(ops) if _renewal(op)] if self.merge else []
        if len(carried) < 2:
            self._groups = [[k] for k in range(len(ops))]
            self._wire = ops
            return ops
        keys: list[str] = []
        pairs: list[str] = []
        for k in carried:
            op = ops[k]
            assert isinstance(op, Eval)
            keys.append(op.keys[0])
            pairs.append(f"{op.args[0]!s} {op.args[1]!s}")  # a token and a number (str, int)
        taken = set(carried)
        rest = [k for k in range(len(ops)) if k not in taken]
        self._groups = [carried, *([k] for k in rest)]
        self._wire = [Eval(_RENEW, tuple(keys), (" ".join(pairs),)), *(ops[k] for k in rest)]
        return self._wire

    def queue(self, pipe: Any) -> list[Op]:
        """Queue this step's operations (:meth:`ops`) on a redis-py pipeline (sync or
        asyncio: queuing does no I/O); returns them in order. The replies go through
        :meth:`split`.

        :class:`Replicated` operations share ONE ``WAIT`` (the largest replica count and
        limit asked) and one ``INFO server`` after all the scripts: WAIT on the pipeline's
        connection covers every write made on it, so one serves them all.
        """
        ops = self.ops()
        replicas, timeout_ms, run_id = 0, 0, False
        for op in ops:
            if isinstance(op, Replicated):
                _queue_eval(pipe, op.op)
                replicas = max(replicas, op.replicas)
                timeout_ms = max(timeout_ms, op.timeout_ms)
                run_id = run_id or op.run_id
            elif isinstance(op, Eval):
                _queue_eval(pipe, op)
            elif isinstance(op, Call):
                pipe.execute_command(*op.args)
            else:  # a FanOut only comes from a quorum client, which never pipelines
                raise TypeError(f"{type(op).__name__} cannot be pipelined")
        self._tail = (replicas, timeout_ms, run_id)
        _queue_tail(pipe, replicas, timeout_ms, run_id)
        return ops

    def split(self, replies: list[object]) -> list[object]:
        """The replies of the pipeline :meth:`queue` filled, one per operation: a
        :class:`Replicated` operation's reply becomes its :class:`Acked` (or the error of the
        shared WAIT / INFO)."""
        ops = self.ops()
        n = len(ops)
        replicas, _, run_id = self._tail
        tail = _decode_tail(replicas, run_id, replies[n:])
        out: list[object] = []
        for op, reply in zip(ops, replies[:n], strict=True):
            if isinstance(op, Replicated) and not isinstance(reply, Exception):
                reply = tail if isinstance(tail, Exception) else Acked(reply, *tail)
            out.append(reply)
        return out

    def feed(self, replies: list[object]) -> None:
        """Hand each flow its reply (``replies``: one per operation of :meth:`ops`; an
        exception is thrown into the flow, unwrapped as the single drivers do) and collect
        the next operations."""
        groups = self._groups if self._wire is not None else [[k] for k in range(len(replies))]
        pending, self.pending = self.pending, []
        self._wire = None
        per: list[object] = [None] * len(pending)
        for group, reply in zip(groups, replies, strict=True):
            if len(group) == 1:
                per[group[0]] = reply
            else:
                for k, part in zip(group, _parts(reply, len(group)), strict=True):
                    per[k] = part
        for (i, flow, _), reply in zip(pending, per, strict=True):
            self._advance(i, flow, _typed(reply))
