"""TLS: a real redis-server that speaks only TLS on its client port and requires a
client certificate; the runtime, ``worker-runtime submit`` and ``byconsole`` work over
``rediss://`` with ``BYAI_REDIS_TLS_CA`` / ``_CERT`` / ``_KEY``, and every certificate
problem is one line that says what to change.

Certificates are made for the test with the ``openssl`` command line: a CA, a server
certificate for ``localhost`` and 127.0.0.1, a client certificate, and a second,
unrelated ("rogue") CA with its own client certificate.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.handlers import DONE_LIST
from tests.integration.cli_helpers import BYCONSOLE
from tests.integration.runtime_helpers import BIN, FAST_ENV, ROOT, eventually, stop_process
from tests.redis_server import RedisServer, env_with, free_port
from worker_runtime.keys import Keys

K = Keys()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> None:
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-keyout", f"{name}.key", "-out", f"{name}.crt", "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip


def _signed(directory: Path, name: str, ca: str, subject: str, ext: str) -> None:
    (directory / f"{name}.ext").write_text(ext)
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
        "-out", f"{name}.csr", "-subj", f"/CN={subject}",
        cwd=directory,
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext",
        cwd=directory,
    )  # fmt: skip


@dataclass
class Tls:
    """The TLS server and the files a client may be given."""

    server: RedisServer
    port: int
    dir: Path

    def url(self, host: str = "localhost") -> str:
        """``rediss://`` to the TLS port."""
        return f"rediss://{host}:{self.port}/0"

    def file(self, name: str) -> str:
        """Path of a generated file."""
        return str(self.dir / name)

    def env(self, tmp: Path, host: str = "localhost", **overrides: str) -> dict[str, str]:
        """A client environment with the good CA and client certificate, plus overrides."""
        env = env_with(
            self.url(host),
            XDG_CONFIG_HOME=str(tmp),
            BYAI_REDIS_TLS_CA=self.file("ca.crt"),
            BYAI_REDIS_TLS_CERT=self.file("client.crt"),
            BYAI_REDIS_TLS_KEY=self.file("client.key"),
        )
        for name, value in overrides.items():
            if value:
                env[name] = value
            else:
                env.pop(name, None)
        return env


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tls]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command line is needed to make test certificates")
    directory = tmp_path_factory.mktemp("tls")
    _ca(directory, "ca")
    _ca(directory, "rogue")
    _signed(
        directory,
        "server",
        "ca",
        "localhost",
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
    )
    _signed(directory, "client", "ca", "worker", "extendedKeyUsage=clientAuth\n")
    _signed(directory, "rogue-client", "rogue", "intruder", "extendedKeyUsage=clientAuth\n")
    port = free_port()
    # The plain port (loopback only) is for the test's own setup and checks; clients
    # under test are only ever given the TLS port.
    server = RedisServer(
        extra_args=[
            *("--bind", "127.0.0.1", "127.0.0.2"),
            *("--tls-port", str(port)),
            *("--tls-cert-file", str(directory / "server.crt")),
            *("--tls-key-file", str(directory / "server.key")),
            *("--tls-ca-cert-file", str(directory / "ca.crt")),
            *("--tls-auth-clients", "yes"),
        ]
    ).start()
    yield Tls(server, port, directory)
    server.cleanup()


@pytest.fixture
async def plain(tls: Tls) -> AsyncIterator[Redis]:
    client = Redis(port=tls.server.port, decode_responses=True)
    await client.flushall()
    yield client
    await client.aclose()


def _run(command: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = str(BYCONSOLE) if command == "byconsole" else str(BIN / "worker-runtime")
    return subprocess.run(
        [exe, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


async def test_runtime_submit_and_console_over_tls(tls: Tls, plain: Redis, tmp_path: Path) -> None:
    env = tls.env(tmp_path)
    log = tmp_path / "worker.log"
    args = ["run", "tests.handlers:record", "--type", "chat", "--instance", "tls1"]
    worker = subprocess.Popen(
        [str(BIN / "worker-runtime"), *args],
        cwd=ROOT,
        env={**env, **FAST_ENV},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        await eventually(lambda: plain.exists(K.worker_online("tls1-r0")), timeout=20)
        submitted = _run("worker-runtime", ["submit", "chat", '{"n": 1}', "--count", "20"], env)
        assert submitted.returncode == 0, submitted.stderr
        # The handler itself writes through the same TLS settings.
        await eventually(lambda: _at_least(plain, DONE_LIST, 20), timeout=20)

        snapshot = _run("byconsole", ["--snapshot", "--format", "json"], env)
        assert snapshot.returncode == 0, snapshot.stderr
        doc = json.loads(snapshot.stdout)
        assert doc["redis"]["endpoint"] == tls.url()
        assert [(w["worker_id"], w["status"]) for w in doc["workers"]] == [("tls1-r0", "online")]

        suspended = _run(
            "byconsole", ["worker", "suspend", "tls1-r0", "--wait", "--reason", "tls"], env
        )
        assert suspended.returncode == 0, suspended.stderr
        assert "applied by the worker" in suspended.stdout
    finally:
        assert stop_process(worker) == 0, log.read_text()
    assert "Traceback" not in log.read_text()


async def _at_least(redis: Redis, key: str, count: int) -> bool:
    return bool(await redis.llen(key) >= count)


CASES = {
    # name: (environment overrides, host, what the one line must say)
    "untrusted server (another CA)": (
        {"BYAI_REDIS_TLS_CA": "rogue.crt"},
        "localhost",
        ["CERTIFICATE_VERIFY_FAILED", "check BYAI_REDIS_TLS_CA"],
    ),
    "untrusted server (system CAs)": (
        {"BYAI_REDIS_TLS_CA": ""},
        "localhost",
        ["CERTIFICATE_VERIFY_FAILED", "check BYAI_REDIS_TLS_CA"],
    ),
    "host not in the certificate": (
        {},
        "127.0.0.2",
        ["mismatch", "does not name this host"],
    ),
    "no client certificate": (
        {"BYAI_REDIS_TLS_CERT": "", "BYAI_REDIS_TLS_KEY": ""},
        "localhost",
        # The alert, or (TLS 1.3 checks the certificate after the handshake) a reset.
        ["set BYAI_REDIS_TLS_CERT and BYAI_REDIS_TLS_KEY"],
    ),
    "client certificate from another CA": (
        {"BYAI_REDIS_TLS_CERT": "rogue-client.crt", "BYAI_REDIS_TLS_KEY": "rogue-client.key"},
        "localhost",
        # "unknown ca" from the server, or a reset (as above): either names the setting.
        ["BYAI_REDIS_TLS_CERT"],
    ),
    "key of another certificate": (
        {"BYAI_REDIS_TLS_KEY": "server.key"},
        "localhost",
        ["BYAI_REDIS_TLS_KEY is not the key of BYAI_REDIS_TLS_CERT"],
    ),
    "missing CA file": (
        {"BYAI_REDIS_TLS_CA": "nope/ca.crt"},
        "localhost",
        ["invalid BYAI_REDIS_TLS_CA", "nope/ca.crt", "not a readable file"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", ["byconsole", "worker-runtime"])
def test_certificate_errors_are_one_clear_line(
    tls: Tls, case: str, command: str, tmp_path: Path
) -> None:
    overrides, host, says = CASES[case]
    env = tls.env(tmp_path, host, **{k: tls.file(v) if v else "" for k, v in overrides.items()})
    args = ["--snapshot"] if command == "byconsole" else ["submit", "chat", "{}"]
    out = _run(command, args, env)
    assert out.returncode == 2, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith(f"{command}: "), lines[0]
    for words in says:
        assert words in lines[0], lines[0]


def test_worker_with_an_untrusted_server_exits_2(tls: Tls, tmp_path: Path) -> None:
    env = {**tls.env(tmp_path, BYAI_REDIS_TLS_CA=tls.file("rogue.crt")), **FAST_ENV}
    out = _run("worker-runtime", ["run", "tests.handlers:record", "--type", "chat"], env)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("worker-runtime: cannot reach Redis") and "BYAI_REDIS_TLS_CA" in last


def test_insecure_skips_server_verification_only(tls: Tls, tmp_path: Path) -> None:
    # The documented escape hatch: the server is not verified, the client still proves
    # itself with its certificate (the server requires one).
    env = tls.env(tmp_path, BYAI_REDIS_TLS_CA=tls.file("rogue.crt"), BYAI_REDIS_TLS_INSECURE="1")
    assert _run("byconsole", ["--snapshot"], env).returncode == 0
    env = tls.env(tmp_path, BYAI_REDIS_TLS_INSECURE="1", BYAI_REDIS_TLS_CERT="")
    env.pop("BYAI_REDIS_TLS_KEY")
    assert _run("byconsole", ["--snapshot"], env).returncode == 2
