# SPDX-License-Identifier: MIT
"""The single-client driver: the only code that sends commands to one Redis (or one Cluster
client). It performs a flow's operations; a Redlock's :class:`FanOut` goes to the fan-out
driver its client is (:mod:`redislock.aio._fanout`)."""

from __future__ import annotations

from typing import Any, TypeVar

from redislock._clients import NO_SCRIPT_ERRORS, RESPONSE_ERRORS
from redislock._core.features import Features, parse_info
from redislock._core.ops import (
    Acked,
    Batch,
    Commands,
    Eval,
    FanOut,
    Flow,
    Op,
    Probe,
    Replicated,
    Sleep,
    Wait,
    acked,
    error_flow,
    queue_replicated,
    script_error,
)
from redislock._core.wake import ticket
from redislock.aio import _flavour
from redislock.aio._state import state_of

__all__ = ["execute", "features", "run", "run_batch", "run_many"]

T = TypeVar("T")


async def features(client: Any) -> Features:
    """What ``client``'s server has natively (``INFO server``, sent once per client; an
    error reply, e.g. an ACL without INFO, means none). See :mod:`redislock._core.features`.

    Raises:
        redis.exceptions.RedisError: the connection failed (nothing is cached then).
    """
    state = state_of(client)
    feats = state.features
    if feats is None:
        try:
            info = await client.execute_command("INFO", "server")
        except RESPONSE_ERRORS:
            info = None
        feats = state.features = parse_info(info)
    return feats


async def execute(client: Any, op: Op) -> Any:
    """Perform one operation with ``client`` and return its reply (typed script errors are
    raised as :mod:`redislock.errors`; redis-py's own errors propagate).

    Commands wait for the client's gate (:meth:`redislock.aio._state.ClientState.gate`):
    redislock never has more in flight than the client's pool can serve, so a burst of
    waiters cannot make the pool refuse the holder's release."""
    state = state_of(client)
    if isinstance(op, Probe):  # cached after the first; the first goes through the gate
        feats = state.features
        if feats is not None:
            return feats
    elif isinstance(op, Wait | Sleep | FanOut):  # no pooled connection
        return await _perform(client, op)
    gate = state.gate()
    try:
        if gate is None:
            return await _perform(client, op)
        async with gate:
            return await _perform(client, op)
    except RESPONSE_ERRORS as exc:  # an ACL refusal, a name used by two kinds: typed errors
        typed = await run(client, error_flow(exc, op))
        if typed is exc:
            raise
        raise typed from exc


async def _perform(client: Any, op: Op) -> Any:
    if isinstance(op, Probe):
        return await features(client)
    if isinstance(op, Eval):
        n = len(op.keys)
        try:
            try:
                if op.encoded:  # the same EVALSHA, its keys encoded once by the core
                    return await client.execute_command("EVALSHA", *op.encoded, *op.args)
                return await client.evalsha(op.script.sha, n, *op.keys, *op.args)
            except NO_SCRIPT_ERRORS:
                # After SCRIPT FLUSH, a restart or a failover: EVAL sends the body.
                return await client.eval(op.script.source, n, *op.keys, *op.args)
        except RESPONSE_ERRORS as exc:
            typed = script_error(exc)
            if typed is None:
                raise
            raise typed from exc
    if isinstance(op, Replicated):
        return await _replicated(client, op)
    if isinstance(op, Commands):
        pipe = client.pipeline(transaction=False)
        for args, options in op.calls:
            pipe.execute_command(*args, **options)
        return await pipe.execute(raise_on_error=False)
    if isinstance(op, Wait):  # outside a flow: nothing was sent before it
        return await state_of(client).hub(execute).wait(op, ticket())
    if isinstance(op, FanOut):  # a Redlock's masters: the client fans the operations out
        return await client.fan_out(op)
    if isinstance(op, Sleep):
        await _flavour.sleep(op.seconds)
        return None
    return await client.execute_command(*op.args)


async def _replicated(client: Any, op: Replicated) -> Acked:
    # One pipeline, so WAIT and INFO run on the connection that wrote (see Replicated).
    load = False
    while True:
        pipe = client.pipeline(transaction=False)
        queue_replicated(pipe, op, load=load)
        reply = acked(op, await pipe.execute(raise_on_error=False))
        if isinstance(reply, Acked):
            return reply
        if isinstance(reply, NO_SCRIPT_ERRORS) and not load:
            load = True  # after SCRIPT FLUSH, a restart or a failover: EVAL sends the body
            continue
        raise reply


async def run(client: Any, flow: Flow[T]) -> T:
    """Drive ``flow`` to its end with ``client``; errors (not cancellation) go into the flow.

    A :class:`Wait` waits on the client's shared wake-up channel (no pooled connection);
    the driver takes a ticket before it sends each other operation, so the hub knows which
    messages came after it (:mod:`redislock._core.wake`). A plain wake-up the flow took but
    could not use (its next operation failed or was cancelled) goes to the next waiter.

    Cancellation (asyncio): it stops the flow at once during a wait, and right after any
    other command even if the client library swallowed it (see
    :func:`redislock.aio._flavour.cancelled_since`): the flow does not get the reply, and
    the caller closes it and undoes what the command may have done.

    Raises:
        asyncio.CancelledError: the calling task was cancelled.
    """
    mark = _flavour.cancel_mark()
    cursor = 0
    claimed: str | None = None  # the channel of a plain wake-up not used yet
    try:
        op = next(flow)
        while True:
            try:
                if isinstance(op, Wait):
                    reply = await state_of(client).hub(execute).wait(op, cursor)
                    if reply is not None and op.match is None:
                        claimed = op.channel
                else:
                    cursor = ticket()
                    reply = await execute(client, op)
                    claimed = None
            except Exception as exc:
                if claimed is not None:  # the try after the wake-up failed
                    _pass_on(client, claimed)
                    claimed = None
                op = flow.throw(exc)
            else:
                if _flavour.cancelled_since(mark):
                    raise _flavour.Cancelled  # the caller closes the flow and undoes the op
                op = flow.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
    finally:
        if claimed is not None:
            _pass_on(client, claimed)


def _pass_on(client: Any, channel: str) -> None:
    """A plain wake-up the flow took could not be used (the flow ended before it tried):
    give it to the next waiter of the channel."""
    hub = state_of(client).hub_if_any()
    if hub is not None:
        hub.pass_on(channel)


async def run_many(client: Any, flows: list[Flow[T]]) -> list[T | BaseException | None]:
    """Drive non-blocking ``flows`` together; returns each flow's result, or the exception
    it ended with."""
    batch = Batch(flows)
    await run_batch(client, batch)
    return batch.results


async def run_batch(client: Any, batch: Batch[Any]) -> None:
    """Drive ``batch`` to its end: one pipelined round trip per step (a single operation
    goes alone, so clients that cannot pipeline work too)."""
    while batch.pending:
        ops = batch.ops()
        if len(ops) == 1:
            try:
                replies: list[object] = [await execute(client, ops[0])]
            except Exception as exc:
                replies = [exc]
            batch.feed(replies)
            continue
        pipe = client.pipeline(transaction=False)
        batch.queue(pipe)
        gate = state_of(client).gate()
        try:
            if gate is None:
                replies = batch.split(await pipe.execute(raise_on_error=False))
            else:
                async with gate:
                    replies = batch.split(await pipe.execute(raise_on_error=False))
        except Exception as exc:  # the connection failed: every flow gets the error
            replies = [exc] * len(ops)
        for k, (op, reply) in enumerate(zip(ops, replies, strict=True)):
            if isinstance(reply, NO_SCRIPT_ERRORS):  # EVAL it alone; that loads the script
                try:
                    replies[k] = await execute(client, op)
                except Exception as exc:
                    replies[k] = exc
        batch.feed(replies)
