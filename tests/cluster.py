# SPDX-License-Identifier: MIT
"""A real local Redis Cluster for the tests: 3 masters + 3 replicas on 127.0.0.1.

:class:`LocalCluster` starts six ``redis-server`` children (:class:`RedisProcess`, TCP,
each in its own directory) with ``--cluster-enabled yes`` and joins them with plain
redis-py commands, no ``redis-cli``: ``CLUSTER ADDSLOTSRANGE`` (``CLUSTER ADDSLOTS`` in
chunks on 6.2, which has no ADDSLOTSRANGE), ``CLUSTER MEET`` and ``CLUSTER REPLICATE``. It
then waits, bounded and with a clear error, until every node reports ``cluster_state:ok``,
all six nodes agree on who serves which slot, and every replica's link is up.

Fault helpers for the tests: :meth:`LocalCluster.failover` (``CLUSTER FAILOVER [FORCE]`` on
the replica of a slot's master, then wait until every node sees it as the master) and
:meth:`LocalCluster.migrate_slot` (``SETSLOT IMPORTING/MIGRATING``, ``MIGRATE`` of the
keys, ``SETSLOT NODE`` on every master), also available step by step
(:meth:`~LocalCluster.begin_migration`, :meth:`~LocalCluster.move_keys`,
:meth:`~LocalCluster.finish_migration`) so a test can act in between.

Every duration is in seconds.
"""

from __future__ import annotations

import math
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from redis.crc import key_slot

from redislock.server import RedisProcess, ServerError, find_redis_server

__all__ = ["NODE_TIMEOUT", "SLOTS", "LocalCluster", "LocalClusterError", "Node", "parse_nodes"]

SLOTS = 16384
_BUS_OFFSET = 10000  # the cluster bus listens on port + 10000 (6.2 has no --cluster-port)
NODE_TIMEOUT = 2.0  # --cluster-node-timeout, seconds
_ELECTION_RETRY = 4 * NODE_TIMEOUT + 0.5  # a replica's election state is stale this long


class LocalClusterError(Exception):
    """The local cluster could not be started, joined, or brought back to health in time."""


@dataclass(frozen=True)
class NodeView:
    """One line of ``CLUSTER NODES``, as seen by some node."""

    id: str
    port: int
    flags: frozenset[str]
    master_id: str | None  # for a replica, the id of its master
    slots: frozenset[int]
    migrating: dict[int, str] = field(default_factory=dict)  # slot -> target node id
    importing: dict[int, str] = field(default_factory=dict)  # slot -> source node id

    @property
    def is_master(self) -> bool:
        return "master" in self.flags

    @property
    def failing(self) -> bool:
        return bool(self.flags & {"fail", "fail?", "handshake", "noaddr"})


def parse_nodes(text: str) -> dict[str, NodeView]:
    """``CLUSTER NODES`` output by node id."""
    out: dict[str, NodeView] = {}
    for line in text.strip().splitlines():
        parts = line.split()
        node_id, addr, flags, master = parts[0], parts[1], parts[2], parts[3]
        port = int(addr.split("@")[0].rsplit(":", 1)[1] or 0)
        slots: set[int] = set()
        migrating: dict[int, str] = {}
        importing: dict[int, str] = {}
        for item in parts[8:]:
            if item.startswith("["):  # [slot->-target] or [slot-<-source]
                body = item.strip("[]")
                if "->-" in body:
                    s, target = body.split("->-")
                    migrating[int(s)] = target
                else:
                    s, source = body.split("-<-")
                    importing[int(s)] = source
            elif "-" in item:
                lo, hi = item.split("-")
                slots.update(range(int(lo), int(hi) + 1))
            else:
                slots.add(int(item))
        out[node_id] = NodeView(
            id=node_id,
            port=port,
            flags=frozenset(flags.replace("myself,", "").replace(",myself", "").split(",")),
            master_id=None if master == "-" else master,
            slots=frozenset(slots),
            migrating=migrating,
            importing=importing,
        )
    return out


class Node:
    """One redis-server of the cluster, with an admin client (decoded, 5 s socket timeout)."""

    def __init__(self, proc: RedisProcess) -> None:
        self.proc = proc
        assert proc.port is not None
        self.port: int = proc.port
        self.admin = redis.Redis(
            host="127.0.0.1", port=self.port, decode_responses=True, socket_timeout=5
        )
        self.id = ""

    @property
    def name(self) -> str:
        """``127.0.0.1:<port>``, as redis-py names cluster nodes."""
        return f"127.0.0.1:{self.port}"

    def cmd(self, *args: Any) -> Any:
        """Run a raw command on this node (no redirection: this node answers)."""
        return self.admin.execute_command(*args)  # type: ignore[no-untyped-call]

    def view(self) -> dict[str, NodeView]:
        """The cluster as this node sees it."""
        return parse_nodes(str(self.cmd("CLUSTER", "NODES")))

    def info(self, section: str) -> dict[str, str]:
        """``INFO <section>`` (or ``CLUSTER INFO`` for "cluster") as a str -> str dict."""
        raw = self.cmd("CLUSTER", "INFO") if section == "cluster" else self.cmd("INFO", section)
        if isinstance(raw, dict):  # redis-py parsed INFO already
            return {str(k): str(v) for k, v in raw.items()}
        pairs = (line.split(":", 1) for line in str(raw).splitlines() if ":" in line)
        return {k.strip(): v.strip() for k, v in pairs}

    def close(self) -> None:
        self.admin.close()

    def __repr__(self) -> str:
        return f"<Node {self.name} {self.id[:8]}>"


def _port_pair_free(port: int) -> bool:
    for p in (port, port + _BUS_OFFSET):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", p))
            except OSError:
                return False
    return True


def _pick_ports(n: int) -> list[int]:
    """``n`` ports below the ephemeral range whose bus port (+10000) is free too."""
    picked: list[int] = []
    rng = random.Random()
    while len(picked) < n:
        port = rng.randrange(12000, 22000)
        if port not in picked and _port_pair_free(port):
            picked.append(port)
    return picked


class LocalCluster:
    """3 masters + 3 replicas on 127.0.0.1, started and owned by this object.

    Args:
        directory: parent directory; node ``i`` runs in ``<directory>/n<i>``.
        binary: the ``redis-server`` binary; ``None`` uses :func:`find_redis_server`.
        masters: number of masters (each gets one replica).

    Raises (from :meth:`start`):
        ServerNotFoundError: no redis-server binary.
        ServerError: a node did not start.
        LocalClusterError: the nodes did not form a healthy cluster in time.
    """

    def __init__(self, directory: Path, *, binary: str | None = None, masters: int = 3) -> None:
        self.directory = directory
        self.binary = binary if binary is not None else find_redis_server()
        self.n_masters = masters
        self.nodes: list[Node] = []
        self.version: tuple[int, ...] = ()
        self._won: dict[str, float] = {}  # node id -> monotonic time it last won an election

    # ------------------------------------------------------------------ life cycle

    def _proc(self, i: int, port: int) -> RedisProcess:
        name = f"n{i}"
        return RedisProcess(
            self.directory / name,
            unix_socket=False,
            port=port,
            binary=self.binary,
            name=name,
            args=[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                f"nodes-{name}.conf",
                "--cluster-node-timeout",
                str(int(NODE_TIMEOUT * 1000)),
                # a replica syncs at once (7.0 waits 5 s for more replicas by default)
                "--repl-diskless-sync",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
                "--appendonly",
                "no",
            ],
        )

    def start(self, timeout: float = 20.0) -> None:
        """Start the six servers and join them into one healthy cluster.

        Args:
            timeout: how long joining may take, in seconds.
        """
        try:
            self._start_nodes()
            self._join(timeout)
        except BaseException:
            self.stop()
            raise

    def _start_nodes(self) -> None:
        count = 2 * self.n_masters
        for attempt in range(3):
            ports = _pick_ports(count)
            started: list[RedisProcess] = []
            try:
                for i, port in enumerate(ports):
                    proc = self._proc(i, port)
                    for stale in proc.directory.glob("nodes-*.conf"):  # a previous attempt's
                        stale.unlink()
                    proc.start()
                    started.append(proc)
            except ServerError:
                for proc in started:
                    proc.stop()
                if attempt == 2:
                    raise
                continue  # somebody took one of the ports between the check and the start
            self.nodes = [Node(proc) for proc in started]
            return

    def _join(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        server = self.nodes[0].info("server")
        self.version = tuple(int(x) for x in server["redis_version"].split(".")[:2])
        for node in self.nodes:
            node.id = str(node.cmd("CLUSTER", "MYID"))
        masters = self.nodes[: self.n_masters]
        replicas = self.nodes[self.n_masters :]
        bounds = [SLOTS * k // self.n_masters for k in range(self.n_masters + 1)]
        for k, node in enumerate(masters):
            self._add_slots(node, bounds[k], bounds[k + 1] - 1)
        first = self.nodes[0]
        for node in self.nodes[1:]:
            first.cmd("CLUSTER", "MEET", "127.0.0.1", node.port)
        ids = {node.id for node in self.nodes}

        def all_known() -> bool:
            for replica in replicas:
                view = replica.view()
                if not ids <= set(view) or any("handshake" in v.flags for v in view.values()):
                    return False
            return True

        self._wait(all_known, deadline, "every node to know the others after CLUSTER MEET")
        for master, replica in zip(masters, replicas, strict=True):
            replica.cmd("CLUSTER", "REPLICATE", master.id)
        self.wait_healthy(max(0.0, deadline - time.monotonic()))

    def _add_slots(self, node: Node, lo: int, hi: int) -> None:
        if self.version >= (7, 0):
            node.cmd("CLUSTER", "ADDSLOTSRANGE", lo, hi)
            return
        for start in range(lo, hi + 1, 1000):  # 6.2: no ADDSLOTSRANGE
            node.cmd("CLUSTER", "ADDSLOTS", *range(start, min(start + 1000, hi + 1)))

    def stop(self) -> None:
        """Stop every server (idempotent)."""
        for node in self.nodes:
            node.close()
            node.proc.stop()
        self.nodes = []

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ health

    def _wait(self, predicate: Callable[[], bool], deadline: float, what: str) -> None:
        last: BaseException | None = None
        while True:
            try:
                if predicate():
                    return
            except (redis.RedisError, OSError) as exc:
                last = exc
            if time.monotonic() >= deadline:
                detail = f" (last error: {last!r})" if last is not None else ""
                states = []
                for node in self.nodes:
                    try:
                        states.append(f"{node.name}: {node.info('cluster')['cluster_state']}")
                    except (redis.RedisError, OSError, KeyError) as exc:
                        states.append(f"{node.name}: {exc!r}")
                raise LocalClusterError(
                    f"local cluster: timed out waiting for {what}{detail}; "
                    f"cluster_state per node: {', '.join(states)}; logs in {self.directory}"
                )
            time.sleep(0.05)

    def healthy(self) -> bool:
        """True when every node says ``cluster_state:ok``, all nodes agree on the slot map
        and on who replicates whom, no node is failing or migrating a slot, every master
        has a replica and every replica's link to its master is up."""
        views = []
        for node in self.nodes:
            if node.info("cluster").get("cluster_state") != "ok":
                return False
            views.append(node.view())
        first = views[0]
        summary = {(v.id, v.is_master, v.master_id, v.slots) for v in first.values()}
        for view in views:
            if {(v.id, v.is_master, v.master_id, v.slots) for v in view.values()} != summary:
                return False
            if any(v.failing or v.migrating or v.importing for v in view.values()):
                return False
        masters = [v for v in first.values() if v.is_master]
        if len(masters) != self.n_masters:
            return False
        for master in masters:
            if not any(v.master_id == master.id for v in first.values()):
                return False
        for node in self.nodes:
            rep = node.info("replication")
            if rep.get("role") == "slave" and rep.get("master_link_status") != "up":
                return False
        return True

    def wait_healthy(self, timeout: float = 20.0) -> None:
        """Wait until :meth:`healthy`.

        Raises:
            LocalClusterError: not healthy within ``timeout`` seconds.
        """
        self._wait(
            self.healthy,
            time.monotonic() + timeout,
            "cluster_state:ok on every node, one slot map, every replica linked",
        )

    # ------------------------------------------------------------------ topology

    def by_id(self, node_id: str) -> Node:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def masters(self) -> list[Node]:
        """The current masters (as the first node sees them)."""
        view = self.nodes[0].view()
        return [self.by_id(v.id) for v in view.values() if v.is_master]

    def master_of(self, slot: int) -> Node:
        """The master serving ``slot``, by the view of the nodes themselves: the node that
        claims the slot in its own ``CLUSTER NODES`` line."""
        for node in self.nodes:
            me = node.view()[node.id]
            if me.is_master and slot in me.slots:
                return node
        raise LocalClusterError(f"no master claims slot {slot}")

    def slot_owners(self) -> dict[int, str]:
        """Slot -> id of the master serving it, as the first node sees it."""
        return {s: v.id for v in self.nodes[0].view().values() if v.is_master for s in v.slots}

    def node_for(self, key: str) -> Node:
        """The master serving ``key``'s slot."""
        return self.master_of(key_slot(key.encode()))

    def replica_of(self, master: Node) -> Node:
        """A replica of ``master`` (as ``master`` sees it)."""
        for view in master.view().values():
            if view.master_id == master.id and "slave" in view.flags:
                return self.by_id(view.id)
        raise LocalClusterError(f"{master} has no replica")

    def startup(self) -> dict[str, Any]:
        """``host``/``port`` of one node, for ``RedisCluster(**cluster.startup(), ...)``."""
        return {"host": "127.0.0.1", "port": self.nodes[0].port}

    def flush(self) -> None:
        """FLUSHALL on every master (replicas follow)."""
        for node in self.masters():
            node.cmd("FLUSHALL")

    # ------------------------------------------------------------------ faults

    def failover(
        self, slot: int, *, force: bool = False, timeout: float = 30.0
    ) -> tuple[Node, Node]:
        """``CLUSTER FAILOVER`` (or ``FAILOVER FORCE``) on the replica of ``slot``'s master;
        wait until every node sees the replica as the master of ``slot`` and the cluster is
        healthy again (the old master then replicates the new one).

        A replica that won an election less than ``4 * node timeout`` (8 s) ago re-uses that
        election's stale vote count when asked again, declares itself master with an old
        epoch and is demoted at once (seen on 6.2 and 7.0): this waits out that window
        first (see :meth:`calm_master`), and asks again if a promotion does not stick.

        Returns:
            ``(old_master, new_master)``.

        Raises:
            LocalClusterError: not done within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        old = self.master_of(slot)
        new = self.replica_of(old)
        calm_at = self._won.get(new.id, -math.inf) + _ELECTION_RETRY
        time.sleep(max(0.0, calm_at - time.monotonic()))
        args = ("CLUSTER", "FAILOVER", "FORCE") if force else ("CLUSTER", "FAILOVER")

        def promoted() -> bool:
            for node in self.nodes:
                view = node.view().get(new.id)
                if view is None or not view.is_master or slot not in view.slots:
                    return False
            return True

        while True:
            new.cmd(*args)
            try:
                self._wait(promoted, min(deadline, time.monotonic() + 4.0), "a promotion")
                break
            except LocalClusterError:
                if time.monotonic() >= deadline:
                    raise
        self._won[new.id] = time.monotonic()
        self._wait(self.healthy, deadline, "a healthy cluster after the failover")
        return old, new

    def wait_calm(self, slot: int) -> None:
        """Sleep until the replica of ``slot``'s master may be failed over at once (see
        :meth:`failover`), so a test can prepare a fault right before it."""
        new = self.replica_of(self.master_of(slot))
        time.sleep(max(0.0, self._won.get(new.id, -math.inf) + _ELECTION_RETRY - time.monotonic()))

    def wait_replicated(self, master: Node, timeout: float = 10.0) -> None:
        """Wait until every replica of ``master`` has acknowledged all its writes so far
        (its offset in ``INFO replication`` equals the master's).

        Raises:
            LocalClusterError: not within ``timeout`` seconds.
        """

        def synced() -> bool:
            info = master.admin.info("replication")
            target = int(info["master_repl_offset"])
            replicas = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
            return bool(replicas) and all(int(r["offset"]) >= target for r in replicas)

        self._wait(synced, time.monotonic() + timeout, f"the replicas of {master} to catch up")

    def calm_master(self) -> Node:
        """The master whose replica won an election longest ago (or never): the cheapest
        one to :meth:`failover` now."""
        return min(self.masters(), key=lambda m: self._won.get(self.replica_of(m).id, -math.inf))

    def begin_migration(self, slot: int, to: Node) -> Node:
        """``SETSLOT IMPORTING`` on ``to``, then ``SETSLOT MIGRATING`` on the slot's master.

        Returns:
            The source master.
        """
        src = self.master_of(slot)
        if src.id == to.id:
            raise ValueError(f"slot {slot} is already served by {to}")
        to.cmd("CLUSTER", "SETSLOT", slot, "IMPORTING", src.id)
        src.cmd("CLUSTER", "SETSLOT", slot, "MIGRATING", to.id)
        return src

    def move_keys(self, slot: int, src: Node, to: Node, keys: list[str] | None = None) -> int:
        """``MIGRATE`` ``keys`` (default: every key of ``slot`` left on ``src``) to ``to``.

        Returns:
            How many keys were moved.
        """
        moved = 0
        while True:
            batch = keys if keys is not None else src.cmd("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not batch:
                return moved
            src.cmd("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *batch)
            moved += len(batch)
            if keys is not None:
                return moved

    def finish_migration(self, slot: int, src: Node, to: Node, timeout: float = 15.0) -> None:
        """Move what is left, then ``SETSLOT NODE`` on the target, the source and every other
        master; wait until the cluster is healthy with ``to`` serving ``slot``."""
        self.move_keys(slot, src, to)
        others = [m for m in self.masters() if m.id not in {src.id, to.id}]
        for node in (to, src, *others):
            node.cmd("CLUSTER", "SETSLOT", slot, "NODE", to.id)
        deadline = time.monotonic() + timeout

        def moved() -> bool:
            return all(slot in node.view()[to.id].slots for node in self.nodes)

        self._wait(moved, deadline, f"{to} to serve slot {slot} everywhere")
        self._wait(self.healthy, deadline, "a healthy cluster after the migration")

    def migrate_slot(self, slot: int, to: Node) -> Node:
        """Migrate ``slot`` with its keys to master ``to``; returns the source master."""
        src = self.begin_migration(slot, to)
        self.finish_migration(slot, src, to)
        return src
