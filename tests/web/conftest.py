"""The web tests' servers: ``byconsole serve``'s application in-process (aiohttp's test
server, real console processes on the session's redis-server) or as a real subprocess."""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web as aioweb
from aiohttp.test_utils import TestClient, TestServer

from byconsole.web.commands import session_command
from byconsole.web.scrape import ScrapeCache
from byconsole.web.server import ServeConfig, WebServer
from byconsole.web.users import Role, add_user
from tests.redis_server import env_with, free_port
from worker_runtime.connection import create_redis
from worker_runtime.fleet import FleetReader
from worker_runtime.settings import RedisSettings
from worker_runtime.snapshot import FleetSnapshot

PASSWORDS = {"olga": "operator password 1", "vic": "viewer password 1"}
ROLES = {"olga": Role.OPERATOR, "vic": Role.VIEWER}


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """olga (operator) and vic (viewer), hashed once for the whole session."""
    path = tmp_path_factory.mktemp("web") / "users"
    for name, password in PASSWORDS.items():
        add_user(path, name, ROLES[name], password)
    return path


def console_command() -> list[str]:
    """The console command a session runs (as ``byconsole serve`` builds it)."""
    return [sys.executable, "-m", "byconsole", "--refresh", "0.5"]


@dataclass
class Web:
    """The in-process server, its test client and what it is made of."""

    server: WebServer
    client: TestClient[aioweb.Request, aioweb.Application]
    scrape: ScrapeCache
    reads: list[float] = field(default_factory=list)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.client.port}"

    async def login(self, name: str, password: str | None = None) -> int:
        """POST the login form; the status (303 on success, the cookie kept)."""
        response = await self.client.post(
            "/login",
            data={"user": name, "password": PASSWORDS[name] if password is None else password},
            headers={"Origin": self.origin},
            allow_redirects=False,
        )
        return response.status


@contextlib.asynccontextmanager
async def make_web(
    redis_url: str,
    users_file: Path,
    clock: Callable[[], float] = time.monotonic,
    **options: Any,
) -> AsyncIterator[Web]:
    """The real application on an aiohttp test server (``options``: ServeConfig fields)."""
    settings = RedisSettings(url=redis_url)
    client = create_redis(settings, retries=0)
    reader = FleetReader(client, settings.keys, endpoint=settings.endpoint, history_range=None)
    reads: list[float] = []

    async def read() -> FleetSnapshot:
        reads.append(time.monotonic())
        return await reader.read()

    scrape = ScrapeCache(read, interval=10.0, clock=clock)
    options.setdefault(
        "console",
        session_command(console_command(), {"BYAI_REDIS_URL": redis_url}, read_only=False),
    )
    config = ServeConfig(where=settings.endpoint, users_path=users_file, **options)
    server = WebServer(config, scrape)
    test_client: TestClient[aioweb.Request, aioweb.Application] = TestClient(
        TestServer(server.app())
    )
    await test_client.start_server()
    try:
        yield Web(server, test_client, scrape, reads)
    finally:
        await test_client.close()
        await client.aclose()


@pytest.fixture
async def web(redis_url: str, users_file: Path) -> AsyncIterator[Web]:
    async with make_web(redis_url, users_file) as made:
        yield made


@dataclass
class ServeProcess:
    """``byconsole serve`` as a real subprocess."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    tls: ssl.SSLContext | None = None
    """A client context trusting the server's certificate, when it serves HTTPS."""

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def children(self) -> list[int]:
        """The console processes it runs now."""
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        try:
            return [int(p) for p in path.read_text().split()]
        except OSError:
            return []


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (``openssl``, as the TLS tests make theirs)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"),
            *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
            *("-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


def start_serve(
    redis_url: str, users_file: Path, tmp_path: Path, *extra: str, tls: bool = False
) -> ServeProcess:
    port = free_port()
    log = tmp_path / "serve.log"
    args = [
        str(Path(sys.executable).parent / "byconsole"),
        "serve",
        "--listen",
        f"127.0.0.1:{port}",
        "--users",
        str(users_file),
        "--refresh",
        "0.5",
        *extra,
    ]
    client_tls: ssl.SSLContext | None = None
    if tls:
        cert, key = self_signed(tmp_path)
        args += ["--tls-cert", str(cert), "--tls-key", str(key)]
        client_tls = ssl.create_default_context(cafile=str(cert))
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env_with(redis_url), stdout=out, stderr=out)
    served = ServeProcess(proc, port, log, client_tls)
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(
                f"{served.url}/healthz", timeout=2, context=client_tls
            ) as answer:
                if answer.status == 200:
                    return served
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"serve did not start: {log.read_text()}") from None
            time.sleep(0.1)


def stop_serve(served: ServeProcess) -> int:
    if served.proc.poll() is None:
        os.kill(served.proc.pid, signal.SIGTERM)
        try:
            served.proc.wait(20)
        except subprocess.TimeoutExpired:
            served.proc.kill()
            served.proc.wait(5)
    return served.proc.returncode


@pytest.fixture
def serve(redis_url: str, users_file: Path, tmp_path: Path) -> Iterator[ServeProcess]:
    served = start_serve(redis_url, users_file, tmp_path)
    yield served
    stop_serve(served)
