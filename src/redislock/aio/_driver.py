# SPDX-License-Identifier: MIT
"""The only code that sends commands with an asyncio client: it performs a flow's operations."""

from __future__ import annotations

from typing import Any, TypeVar

from redis.exceptions import NoScriptError, ResponseError

from redislock._core.ops import BlockPop, Eval, Flow, Op, script_error

__all__ = ["run"]

T = TypeVar("T")


async def _execute(client: Any, op: Op) -> Any:
    if isinstance(op, Eval):
        n = len(op.keys)
        try:
            try:
                return await client.evalsha(op.script.sha, n, *op.keys, *op.args)
            except NoScriptError:
                # After SCRIPT FLUSH, a restart or a failover: EVAL sends the body.
                return await client.eval(op.script.source, n, *op.keys, *op.args)
        except ResponseError as exc:
            typed = script_error(exc)
            if typed is None:
                raise
            raise typed from exc
    if isinstance(op, BlockPop):
        return await client.blpop([op.key], timeout=op.timeout)
    return await client.execute_command(*op.args)


async def run(client: Any, flow: Flow[T]) -> T:
    """Drive ``flow`` to its end with ``client``; errors (not cancellation) go into the flow."""
    try:
        op = next(flow)
        while True:
            try:
                reply = await _execute(client, op)
            except Exception as exc:
                op = flow.throw(exc)
            else:
                op = flow.send(reply)
    except StopIteration as stop:
        result: T = stop.value
        return result
