# SPDX-License-Identifier: MIT
"""Context-manager bases for objects with a life cycle.

* :class:`Closeable`: ``with obj:`` returns ``obj`` and calls ``obj.close()`` on exit;
* :class:`Startable`: ``with obj:`` calls ``obj.start()``, returns ``obj`` and calls
  ``obj.stop()`` on exit.

Used by the server processes (:mod:`redislock.server`) and the test kit
(:mod:`redislock.testing`), which had the same ``__enter__``/``__exit__`` pair in every class.
"""

from __future__ import annotations

from typing import Self

__all__ = ["Closeable", "Startable"]


class Closeable:
    """A context manager that returns itself on entry and calls :meth:`close` on exit."""

    def close(self) -> None:
        """Release what the object holds; subclasses make it idempotent."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Startable(Closeable):
    """A context manager that calls :meth:`start` on entry, returning itself, and
    :meth:`stop` on exit."""

    def start(self) -> object:
        """Start the object; subclasses say what that means and what it raises."""
        raise NotImplementedError

    def stop(self) -> object:
        """Stop the object; subclasses make it idempotent."""
        raise NotImplementedError

    def close(self) -> None:
        """The same as :meth:`stop`."""
        self.stop()

    def __enter__(self) -> Self:
        self.start()
        return self
