"""A throwaway Redis Cluster for tests: N primaries (+ replicas) on free loopback ports.

Every node is a :class:`tests.redis_server.RedisServer` started with
``--cluster-enabled yes``; ``redis-cli --cluster create`` joins them. A stopped node
keeps its directory (and so its ``nodes.conf``), so :meth:`RedisCluster.start_node`
brings the same node identity back and it rejoins the cluster.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterable

from tests.redis_server import RedisServer, free_port

CLUSTER_BUS_OFFSET = 10_000
"""Redis Cluster nodes also listen on ``port + 10000`` for the cluster bus."""

NODE_TIMEOUT_MS = 2_000


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_ports(count: int, taken: Iterable[int] = ()) -> list[int]:
    """``count`` distinct ports whose cluster-bus port (``+10000``) is free as well."""
    chosen: list[int] = []
    avoid = set(taken)
    for _ in range(1_000):
        if len(chosen) == count:
            return chosen
        port = free_port()
        bus = port + CLUSTER_BUS_OFFSET
        if bus > 65_535 or port in avoid or bus in avoid or not _bindable(bus):
            continue
        avoid.update((port, bus))
        chosen.append(port)
    raise RuntimeError(f"could not find {count} free port pairs for a Redis Cluster")


class RedisCluster:
    """A Redis Cluster on loopback, created and destroyed by the test session.

    Args:
        primaries: number of primaries (at least 3, Redis Cluster's minimum).
        replicas: replicas per primary (0 or more).
    """

    def __init__(self, primaries: int = 3, replicas: int = 0) -> None:
        if primaries < 3:
            raise ValueError("redis-cli --cluster create needs at least 3 primaries")
        if shutil.which("redis-cli") is None:
            raise RuntimeError("redis-cli is not installed; `make test` installs it")
        self.host = "127.0.0.1"
        self.primaries = primaries
        self.replicas = replicas
        self.nodes: dict[int, RedisServer] = {}
        for port in free_cluster_ports(primaries * (1 + replicas)):
            node = RedisServer(port=port)
            node.extra_args = [
                "--cluster-enabled", "yes",
                "--cluster-config-file", str(node.dir / "nodes.conf"),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                # Replicas sync at once instead of after the default 5 s diskless delay.
                "--repl-diskless-sync-delay", "0",
            ]  # fmt: skip
            self.nodes[port] = node
        self.startup_seconds: float | None = None
        """How long :meth:`start` took (processes, join, ``cluster_state:ok``)."""

    # -- addresses ---------------------------------------------------------------------

    @property
    def ports(self) -> list[int]:
        """Every node's port, in creation order."""
        return list(self.nodes)

    @property
    def port(self) -> int:
        """The seed port clients connect to first."""
        return self.ports[0]

    @property
    def env(self) -> dict[str, str]:
        """``REDIS_CLUSTER_HOST`` / ``REDIS_CLUSTER_PORT`` for a subprocess."""
        return {"REDIS_CLUSTER_HOST": self.host, "REDIS_CLUSTER_PORT": str(self.port)}

    # -- life cycle --------------------------------------------------------------------

    def start(self, timeout: float = 30.0) -> RedisCluster:
        """Start every node, join them into one cluster and wait until it serves."""
        began = time.monotonic()
        try:
            for node in self.nodes.values():
                node.start()
            out = subprocess.run(
                [
                    "redis-cli", "--cluster", "create",
                    *(f"{self.host}:{p}" for p in self.ports),
                    "--cluster-replicas", str(self.replicas),
                    "--cluster-yes",
                ],
                capture_output=True, text=True, timeout=timeout,
            )  # fmt: skip
            if out.returncode != 0 or "[OK] All 16384 slots covered" not in out.stdout:
                raise RuntimeError(f"redis-cli --cluster create failed: {out.stdout}{out.stderr}")
            self.wait_ok(timeout=timeout)
        except BaseException:
            self.cleanup()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def running(self, port: int) -> bool:
        """Whether the node on ``port`` is up."""
        proc = self.nodes[port].proc
        return proc is not None and proc.poll() is None

    def stop_node(self, port: int) -> None:
        """Stop one node (its ``nodes.conf`` is kept for :meth:`start_node`)."""
        self.nodes[port].stop()

    def start_node(self, port: int) -> None:
        """Start a stopped node again with its old identity; it rejoins the cluster."""
        if not self.running(port):
            self.nodes[port].start()

    def cleanup(self) -> None:
        """Stop every node and delete their directories."""
        for node in self.nodes.values():
            node.cleanup()

    # -- state -------------------------------------------------------------------------

    def cli(self, port: int, *args: str) -> str:
        """Run one ``redis-cli`` command against one node and return its output."""
        return self.nodes[port].cli(*args)

    def info(self, port: int, section: str) -> dict[str, str]:
        """``INFO <section>`` / ``CLUSTER INFO`` of one node as a dict."""
        raw = self.cli(port, "CLUSTER", "INFO") if section == "cluster" else None
        if raw is None:
            raw = self.cli(port, "INFO", section)
        fields: dict[str, str] = {}
        for line in raw.splitlines():
            name, sep, value = line.strip().partition(":")
            if sep:
                fields[name] = value
        return fields

    def primary_ports(self) -> list[int]:
        """Ports of the running nodes that are primaries right now (roles change on failover)."""
        return [
            p
            for p in self.ports
            if self.running(p) and self.info(p, "replication").get("role") == "master"
        ]

    def replica_ports(self) -> list[int]:
        """Ports of the running nodes that are replicas right now."""
        return [
            p
            for p in self.ports
            if self.running(p) and self.info(p, "replication").get("role") == "slave"
        ]

    def slot_ranges(self, port: int) -> list[tuple[int, int]]:
        """The slot ranges the node on ``port`` says it serves (empty for a replica)."""
        ranges: list[tuple[int, int]] = []
        for line in self.cli(port, "CLUSTER", "NODES").splitlines():
            parts = line.split()
            if len(parts) < 8 or "myself" not in parts[2]:
                continue
            for spec in parts[8:]:
                low, _, high = spec.partition("-")
                if low.isdigit() and (high or low).isdigit():
                    ranges.append((int(low), int(high or low)))
        return ranges

    def port_for_slot(self, slot: int) -> int:
        """The port of the running primary serving ``slot``."""
        for port in self.primary_ports():
            if any(low <= slot <= high for low, high in self.slot_ranges(port)):
                return port
        raise LookupError(f"no running primary serves slot {slot}")

    def fail_over(self, port: int, timeout: float = 30.0) -> int:
        """Stop the primary on ``port`` and wait until a replica has taken over its slots.

        Returns:
            The port of the promoted replica.

        Raises:
            RuntimeError: no replica took over within ``timeout`` seconds.
        """
        ranges = self.slot_ranges(port)
        if not ranges:
            raise ValueError(f"node {port} serves no slots (is it a replica?)")
        self.stop_node(port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                promoted = self.port_for_slot(ranges[0][0])
            except LookupError:
                promoted = None
            if promoted is not None and self.is_ok():
                return promoted
            if time.monotonic() >= deadline:
                raise RuntimeError(f"no replica took over the slots of node {port}")
            time.sleep(0.05)

    def is_ok(self) -> bool:
        """Whether every running node reports ``cluster_state:ok`` and sees all slots."""
        for port in self.ports:
            if not self.running(port):
                continue
            info = self.info(port, "cluster")
            if info.get("cluster_state") != "ok" or info.get("cluster_slots_ok") != "16384":
                return False
            if self.info(port, "replication").get("role") == "slave" and (
                self.info(port, "replication").get("master_link_status") != "up"
            ):
                return False
        return True

    def wait_ok(self, timeout: float = 30.0) -> None:
        """Poll until :meth:`is_ok` holds.

        Raises:
            RuntimeError: the cluster did not converge within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while not self.is_ok():
            if time.monotonic() >= deadline:
                raise RuntimeError("Redis Cluster did not reach cluster_state:ok")
            time.sleep(0.05)

    def flushall(self) -> None:
        """Empty every primary (replicas follow; they refuse writes)."""
        for port in self.primary_ports():
            self.cli(port, "FLUSHALL")

    def heal(self, timeout: float = 30.0) -> None:
        """Restart stopped nodes and wait until the cluster serves every slot again."""
        for port in self.ports:
            self.start_node(port)
        self.wait_ok(timeout=timeout)


def _measure() -> None:
    """``python -m tests.cluster``: how long the two cluster fixtures take to start."""
    for primaries, replicas in ((3, 0), (3, 1)):
        cluster = RedisCluster(primaries, replicas)
        try:
            cluster.start()
            print(f"{primaries} primaries + {primaries * replicas} replicas: "
                  f"ready in {cluster.startup_seconds:.2f} s")  # fmt: skip
        finally:
            cluster.cleanup()


if __name__ == "__main__":
    _measure()
