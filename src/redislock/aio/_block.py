# SPDX-License-Identifier: MIT
"""``AsyncBlock``: the end of the ``async with`` block of a shell (a lease, a barrier party,
a period's turn, a guard), and :func:`noting`, how such an end never masks the block's own
exception."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from types import TracebackType

__all__ = ["AsyncBlock", "noting"]


class AsyncBlock:
    """An object whose ``async with`` block ends in :meth:`_end`, which gets the block's
    exception (None: the block exited normally)."""

    __slots__ = ()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._end(exc)

    async def _end(self, exc: BaseException | None) -> None:
        raise NotImplementedError


@contextlib.contextmanager
def noting(exc: BaseException, doing: str) -> Iterator[None]:
    """Around what ends a block that raised ``exc`` (a release, a leave): should it fail too,
    its error becomes a note on ``exc`` (``redislock: <doing> also failed: ...``), which
    then propagates as it is."""
    try:
        yield
    except Exception as err:  # never mask the body's own exception
        exc.add_note(f"redislock: {doing} also failed: {err!r}")
