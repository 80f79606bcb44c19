"""A primary, a replica and three ``redis-sentinel`` processes on loopback, for tests.

Sentinels are ``redis-server --sentinel`` with a config file each (a sentinel rewrites
its file as it learns the topology). Timings are short so a failover takes seconds:
a primary is judged down after ``down_after_ms`` of silence and two sentinels agree.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.redis_server import RedisServer, free_port

MASTER = "h7primary"


class SentinelSet:
    """A primary + replica monitored by three sentinels, started and stopped by its owner.

    Args:
        down_after_ms: ``sentinel down-after-milliseconds``.
        failover_timeout_ms: ``sentinel failover-timeout``.
        data_password: ``requirepass`` (and ``masterauth``) of the primary and replica;
            the sentinels get it as ``sentinel auth-pass``.
        sentinel_password: the sentinels' own ``requirepass`` (they use it with each
            other too).
    """

    def __init__(
        self,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 4000,
        data_password: str | None = None,
        sentinel_password: str | None = None,
    ) -> None:
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        self.data_password = data_password
        self.sentinel_password = sentinel_password
        self.dir = Path(tempfile.mkdtemp(prefix="sentinel-"))
        self.servers: list[RedisServer] = []
        self.sentinel_ports: list[int] = []
        self.sentinels: list[subprocess.Popen[bytes]] = []

    @property
    def nodes(self) -> str:
        """``127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3`` (``BYAI_REDIS_SENTINELS``)."""
        return ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)

    @property
    def url(self) -> str:
        """``redis+sentinel://…/MASTER/0``."""
        return f"redis+sentinel://{self.nodes}/{MASTER}/0"

    def start(self) -> SentinelSet:
        """Start the primary, its replica and the sentinels; wait until all agree."""
        # A replica's sync starts at once (Redis waits 5 s for more replicas by default).
        fast_sync = ["--repl-diskless-sync-delay", "0"]
        if self.data_password:
            fast_sync += ["--requirepass", self.data_password, "--masterauth", self.data_password]
        primary = RedisServer(extra_args=fast_sync).start()
        self.servers.append(primary)
        replica = RedisServer(
            extra_args=[*fast_sync, "--replicaof", "127.0.0.1", str(primary.port)]
        )
        self.servers.append(replica.start())
        self._wait(lambda: "master_link_status:up" in self.data_cli(replica, "INFO", "replication"))
        binary = shutil.which("redis-server") or "redis-server"
        self.sentinel_ports = [free_port() for _ in range(3)]
        ids = [f"{n + 1:x}" * 40 for n in range(3)]
        for n, port in enumerate(self.sentinel_ports):
            conf = self.dir / f"sentinel-{n}.conf"
            # The replica and the other sentinels are written in, with fixed run ids:
            # otherwise they are learnt from hello messages every 2 s (seconds of start).
            known = "".join(
                f"sentinel known-sentinel {MASTER} 127.0.0.1 {other} {ids[m]}\n"
                for m, other in enumerate(self.sentinel_ports)
                if m != n
            )
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.dir}\nsentinel myid {ids[n]}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {primary.port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} {self.down_after_ms}\n"
                f"sentinel failover-timeout {MASTER} {self.failover_timeout_ms}\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
                f"sentinel known-replica {MASTER} 127.0.0.1 {replica.port}\n"
                + known
                + (
                    f"sentinel auth-pass {MASTER} {self.data_password}\n"
                    if self.data_password
                    else ""
                )
                + (f"requirepass {self.sentinel_password}\n" if self.sentinel_password else "")
            )
            proc = subprocess.Popen(
                [binary, str(conf), "--sentinel"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            self.sentinels.append(proc)
        # Every sentinel knows the replica and the two others.
        for port in self.sentinel_ports:
            self._wait(lambda p=port: self._knows_everyone(p))
        return self

    def _knows_everyone(self, port: int) -> bool:
        replicas = self.sentinel_cli(port, "SENTINEL", "REPLICAS", MASTER)
        others = self.sentinel_cli(port, "SENTINEL", "SENTINELS", MASTER)
        return "slave" in replicas and others.count("127.0.0.1") >= 2

    def sentinel_cli(self, port: int, *args: str) -> str:
        """``redis-cli`` against one sentinel."""
        auth = ["--no-auth-warning", "-a", self.sentinel_password] if self.sentinel_password else []
        out = subprocess.run(
            ["redis-cli", "-p", str(port), *auth, *args], capture_output=True, text=True, timeout=10
        )
        return out.stdout

    def data_cli(self, server: RedisServer, *args: str) -> str:
        """``redis-cli`` against the primary or the replica."""
        auth = ["--no-auth-warning", "-a", self.data_password] if self.data_password else []
        return server.cli(*auth, *args)

    def primary_port(self) -> int:
        """The port the sentinels name as the primary now."""
        reply = self.sentinel_cli(
            self.sentinel_ports[0], "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER
        ).split()
        return int(reply[1])

    def server_on(self, port: int) -> RedisServer:
        """The server listening on ``port``."""
        return next(s for s in self.servers if s.port == port)

    def failover(self) -> int:
        """``SENTINEL FAILOVER``; returns the new primary's port once it serves writes."""
        old = self.primary_port()
        self.sentinel_cli(self.sentinel_ports[0], "SENTINEL", "FAILOVER", MASTER)
        return self._wait_new_primary(old)

    def kill_primary(self) -> int:
        """SIGKILL the primary; returns the new primary's port once it serves writes."""
        old = self.primary_port()
        server = self.server_on(old)
        assert server.proc is not None
        server.proc.kill()
        server.proc.wait(5)
        server.proc = None
        return self._wait_new_primary(old)

    def _wait_new_primary(self, old: int) -> int:
        self._wait(lambda: self.primary_port() != old, timeout=30)
        new = self.primary_port()
        self._wait(
            lambda: "role:master" in self.data_cli(self.server_on(new), "INFO", "replication")
        )
        return new

    @staticmethod
    def _wait(check: object, timeout: float = 20.0) -> None:
        assert callable(check)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except (OSError, ValueError, IndexError, subprocess.SubprocessError):
                pass
            time.sleep(0.1)
        raise RuntimeError("sentinel set did not reach the expected state")

    def cleanup(self) -> None:
        """Stop everything and remove the directory."""
        for proc in self.sentinels:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
        for server in self.servers:
            server.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


def port_open(port: int) -> bool:
    """Whether something accepts connections on ``port``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False
