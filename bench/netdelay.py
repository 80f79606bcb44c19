"""A slower network between a client and the benchmark's Redis (an operator on a bastion).

Preferred: the client runs in a network namespace behind a veth pair whose namespace
end delays every packet with ``tc netem`` (``10.200.0.1/30`` on the host end, where
Redis also listens; ``10.200.0.2/30`` inside). This needs root, ``ip netns`` and the
``sch_netem`` qdisc in the kernel.

Fallback when netem is missing (common in containers and micro-VMs): a TCP relay
process on loopback that holds every chunk for half the delay in each direction, so
each round trip costs the delay plus the relay's own forwarding time (measured and
printed as the effective RTT).

    .venv/bin/python -m bench.netdelay relay LISTEN_PORT TARGET_PORT DELAY_MS
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from worker_runtime.embedded import RedisServer, free_port

NETNS = "bybench"
HOST_IF, NS_IF = "bybench0", "bybench1"
HOST_ADDR, NS_ADDR = "10.200.0.1", "10.200.0.2"

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=20)


def _rtt_ms(host: str, port: int, wrap: Sequence[str] = (), samples: int = 50) -> float:
    """Median Redis PING round trip (ms) from a client started with ``wrap``."""
    code = (
        "import socket,time,statistics,sys\n"
        f"s=socket.create_connection(({host!r},{port}));s.setsockopt(6,1,1)\n"
        "ts=[]\n"
        f"for _ in range({samples}):\n"
        "  t=time.perf_counter();s.sendall(b'PING\\r\\n');s.recv(64)\n"
        "  ts.append((time.perf_counter()-t)*1000)\n"
        "print(statistics.median(ts))\n"
    )
    out = subprocess.run(
        [*wrap, sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else "the RTT probe failed")
    return float(out.stdout.strip())


class DelayedPath:
    """A route to Redis with ``delay_ms`` of added round-trip time.

    Use :meth:`open`; then clients connect to :attr:`host`:``port_for(redis_port)``,
    wrapping their command line with :attr:`wrap`. Always :meth:`close`.

    Args:
        delay_ms: added round-trip time.
        allow_netns: try ``ip netns`` + netem first.
    """

    def __init__(self, delay_ms: float = 1.0, allow_netns: bool = True) -> None:
        self.delay_ms = delay_ms
        self.allow_netns = allow_netns
        self.kind = ""
        self.description = ""
        self.host = "127.0.0.1"
        self.wrap: list[str] = []
        self.rtt_ms = 0.0
        self.base_rtt_ms = 0.0
        self.skipped: list[str] = []
        self._relay: subprocess.Popen[bytes] | None = None
        self._relay_port = 0
        self._netns = False

    # -- netns + netem ------------------------------------------------------------------

    def _netns_setup(self) -> str | None:
        """Create the namespace; returns why it failed, or ``None``."""
        if os.geteuid() != 0:
            return "not root"
        if shutil.which("ip") is None or shutil.which("tc") is None:
            return "ip/tc not installed"
        self._netns_teardown()  # leftovers of an interrupted run (only our own names)
        steps = [
            ("ip", "netns", "add", NETNS),
            ("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF),
            ("ip", "link", "set", NS_IF, "netns", NETNS),
            ("ip", "addr", "add", f"{HOST_ADDR}/30", "dev", HOST_IF),
            ("ip", "link", "set", HOST_IF, "up"),
            ("ip", "netns", "exec", NETNS, "ip", "addr", "add", f"{NS_ADDR}/30", "dev", NS_IF),
            ("ip", "netns", "exec", NETNS, "ip", "link", "set", NS_IF, "up"),
            ("ip", "netns", "exec", NETNS, "ip", "link", "set", "lo", "up"),
        ]
        if self.delay_ms > 0:
            steps.append(
                (
                    "ip",
                    "netns",
                    "exec",
                    NETNS,
                    "tc",
                    "qdisc",
                    "add",
                    "dev",
                    NS_IF,
                    "root",
                    "netem",
                    "delay",
                    f"{self.delay_ms}ms",
                )
            )
        for step in steps:
            out = _run(*step)
            if out.returncode != 0:
                self._netns_teardown()
                err = (out.stderr or out.stdout).strip().splitlines()
                return f"'{' '.join(step[-6:])}' failed: {err[-1] if err else out.returncode}"
        self._netns = True
        return None

    def _netns_teardown(self) -> None:
        _run("ip", "link", "del", HOST_IF)
        _run("ip", "netns", "del", NETNS)
        self._netns = False

    # -- relay -------------------------------------------------------------------------

    def _relay_setup(self, redis_port: int) -> None:
        self._relay_port = free_port()
        self._relay = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.netdelay",
                "relay",
                str(self._relay_port),
                str(redis_port),
                str(self.delay_ms),
            ],
            cwd=ROOT,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self._relay_port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("the delay relay did not start")

    # -- public ------------------------------------------------------------------------

    def open(self, server: RedisServer) -> DelayedPath:
        """Set the path up to ``server`` (which listens on 127.0.0.1)."""
        redis_port = server.port
        self.base_rtt_ms = _rtt_ms("127.0.0.1", redis_port)
        reason = self._netns_setup() if self.allow_netns else "disabled by --no-netns"
        if reason is None:
            # protected-mode refuses non-loopback clients of a server without a password;
            # the only other address is on the private veth pair this object created.
            said = server.cli(
                "CONFIG", "SET", "bind", f"127.0.0.1 {HOST_ADDR}", "protected-mode", "no"
            )
            if "OK" not in said:
                reason = f"Redis would not listen on {HOST_ADDR}: {said}"
                self._netns_teardown()
        if reason is None:
            self.kind = "netns"
            self.host = HOST_ADDR
            self.wrap = ["ip", "netns", "exec", NETNS]
            self.description = (
                f"client in network namespace {NETNS!r} behind a veth pair "
                f"({NS_ADDR} -> {HOST_ADDR}), tc netem delay {self.delay_ms:g} ms"
            )
            self.rtt_ms = _rtt_ms(HOST_ADDR, redis_port, self.wrap)
            return self
        self.skipped.append(f"netns + netem not used: {reason}")
        self._relay_setup(redis_port)
        self.kind = "relay"
        self.description = (
            f"loopback TCP relay holding each chunk {self.delay_ms / 2:g} ms per direction "
            f"({self.delay_ms:g} ms per round trip plus forwarding)"
        )
        self.rtt_ms = _rtt_ms("127.0.0.1", self._relay_port)
        return self

    def port_for(self, redis_port: int) -> int:
        """The port a client dials to reach Redis through this path."""
        return self._relay_port if self.kind == "relay" else redis_port

    def url_for(self, redis_port: int) -> str:
        """``redis://host:port/0`` through this path."""
        return f"redis://{self.host}:{self.port_for(redis_port)}/0"

    def close(self) -> None:
        """Remove the namespace or stop the relay."""
        if self._relay is not None:
            self._relay.send_signal(signal.SIGTERM)
            try:
                self._relay.wait(5)
            except subprocess.TimeoutExpired:
                self._relay.kill()
                self._relay.wait(5)
            self._relay = None
        if self._netns:
            self._netns_teardown()


# -- the relay process ---------------------------------------------------------------
#
# Threads with blocking sockets, not asyncio: the event loop's timers have a 1 ms
# granularity (epoll), which would turn a 0.5 ms hold into 1-2 ms.


def _pump(src: socket.socket, dst: socket.socket, half_delay_s: float) -> None:
    """Forward ``src`` to ``dst``; each chunk leaves ``half_delay_s`` after it arrived."""
    chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def sender() -> None:
        while True:
            due, data = chunks.get()
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            try:
                dst.sendall(data)
            except OSError:
                return

    out = threading.Thread(target=sender, daemon=True)
    out.start()
    while True:
        try:
            data = src.recv(65536)
        except OSError:
            data = b""
        chunks.put((time.perf_counter() + half_delay_s, data))
        if not data:
            break
    out.join()


def relay(listen_port: int, target_port: int, delay_ms: float) -> None:
    """Serve the relay until SIGTERM."""
    half = delay_ms / 2000
    listener = socket.create_server(("127.0.0.1", listen_port))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))

    def serve(client: socket.socket) -> None:
        server = socket.create_connection(("127.0.0.1", target_port))
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        back = threading.Thread(target=_pump, args=(server, client, half), daemon=True)
        back.start()
        _pump(client, server, half)
        back.join()
        client.close()
        server.close()

    while True:
        client, _ = listener.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


def main() -> None:
    """``relay LISTEN TARGET DELAY_MS`` (run by :class:`DelayedPath`), or a self-check."""
    if len(sys.argv) == 5 and sys.argv[1] == "relay":
        relay(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
        return
    import argparse

    parser = argparse.ArgumentParser(description="Set a delayed path up, print its RTT.")
    parser.add_argument("--delay-ms", type=float, default=1.0)
    parser.add_argument("--no-netns", action="store_true")
    args = parser.parse_args()
    server = RedisServer().start()
    path = DelayedPath(args.delay_ms, allow_netns=not args.no_netns)
    try:
        path.open(server)
        for line in path.skipped:
            print(line)
        print(f"path: {path.description}")
        print(f"Redis PING RTT: loopback {path.base_rtt_ms:.3f} ms, delayed {path.rtt_ms:.3f} ms")
    finally:
        path.close()
        server.cleanup()


if __name__ == "__main__":
    main()
