"""A throwaway ``redis-server`` (free loopback port, no persistence, its own directory).

Used by ``byconsole --demo``, the benchmarks and the test fixtures, so that nothing
depends on a server already running.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


STOP_WAIT_S = 5.0
"""How long :meth:`RedisServer.stop` waits for the server to exit, after SIGTERM and
again after SIGKILL."""


class RedisServer:
    """A ``redis-server`` on a free loopback port, started and stopped by its owner.

    Args:
        port: the port (a free one when omitted).
        extra_args: more ``redis-server`` arguments (e.g. ``--requirepass``).
    """

    def __init__(self, port: int | None = None, extra_args: Sequence[str] = ()) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (e.g. apt-get install redis-server)")
        self.binary = binary
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        self.dir = Path(tempfile.mkdtemp(prefix="redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:{port}/0``."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start the server and wait until it answers."""
        args = [
            self.binary,
            *("--port", str(self.port), "--bind", "127.0.0.1"),
            *("--save", "", "--appendonly", "no", "--dir", str(self.dir)),
            *("--daemonize", "no", "--loglevel", "warning"),
            *self.extra_args,
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the port answers PING (or an auth error, which is an answer too)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith((b"+PONG", b"-NOAUTH", b"-ERR")):
                        return
            except OSError:
                pass
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not start")

    def cli(self, *args: str) -> str:
        """Run ``redis-cli`` against this server; returns its output."""
        out = subprocess.run(
            ["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True, timeout=10
        )
        return out.stdout.strip()

    def stop(self) -> None:
        """Terminate the server (kill if it does not exit within :data:`STOP_WAIT_S`)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_WAIT_S)
        self.proc = None

    def restart(self) -> None:
        """Stop and start again on the same port (all data is lost)."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Stop and remove the directory."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
