"""The real ``worker-runtime`` executable as subprocesses on a real redis-server and cluster."""

from __future__ import annotations

import signal
import socket
import subprocess
import threading
from collections import Counter
from pathlib import Path

from tests.backends import Backend
from tests.handlers import DONE_LIST, STARTED_LIST
from tests.integration.runtime_helpers import BIN, ROOT, eventually, spawn_worker, stop_process
from tests.redis_server import env_with
from worker_runtime.connection import AnyRedis
from worker_runtime.keys import CONSUMER_GROUP


def submit_cli(url: str, agent_type: str, payload: str, count: int) -> str:
    """``worker-runtime submit`` as a subprocess; returns its stdout."""
    out = subprocess.run(
        [str(BIN / "worker-runtime"), "submit", agent_type, payload, "--count", str(count)],
        env=env_with(url),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


async def _count(redis: AnyRedis, key: str) -> Counter[str]:
    # The test clients decode responses: every entry is a str.
    return Counter(str(entry) for entry in await redis.lrange(key, 0, -1))


async def test_two_replicas_consume_100_tasks_exactly_once(
    backend: Backend, tmp_path: Path
) -> None:
    redis, keys = backend.redis, backend.keys
    proc = spawn_worker(
        backend.url,
        "tests.handlers:record",
        ["chat"],
        "cli1",
        replicas=2,
        extra_env=backend.env,
        log_path=tmp_path / "w.log",
    )
    try:
        await eventually(lambda: redis.exists(keys.worker_online("cli1-r1")), timeout=15)
        submit = subprocess.run(
            [str(BIN / "worker-runtime"), "submit", "chat", '{"n": 1}', "--count", "100"],
            env=env_with(backend.url, **backend.env),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert submit.returncode == 0, submit.stderr
        assert "submitted 100 task(s)" in submit.stdout

        async def all_done() -> bool:
            return await redis.llen(DONE_LIST) >= 100

        await eventually(all_done, timeout=20)
        done = await _count(redis, DONE_LIST)
        started = await _count(redis, STARTED_LIST)
        assert len(done) == 100 and set(done.values()) == {1}
        assert set(started.values()) == {1}
        # Both replicas took part, and the stream's group has nothing pending.
        processed = [await redis.zcard(keys.worker_executions(f"cli1-r{i}")) for i in range(2)]
        assert all(p > 0 for p in processed), processed
        await eventually(lambda: _pending_zero(backend), timeout=5)
    finally:
        rc = stop_process(proc, signal.SIGTERM)
    assert rc == 0, (tmp_path / "w.log").read_text()
    # Graceful stop: offline at once (leases gone, out of routing), still known.
    assert not await redis.exists(keys.worker_online("cli1-r0"), keys.worker_online("cli1-r1"))
    assert await redis.scard(keys.type_workers("chat")) == 0
    assert await redis.sismember(keys.workers, "cli1-r0")


async def _pending_zero(backend: Backend) -> bool:
    info = await backend.redis.xpending(backend.keys.type_stream("chat"), CONSUMER_GROUP)
    return int(info["pending"]) == 0


async def test_sigkill_mid_task_second_process_completes_everything(
    backend: Backend, tmp_path: Path
) -> None:
    redis, keys = backend.redis, backend.keys
    first = spawn_worker(
        backend.url,
        "tests.handlers:record",
        ["chat"],
        "k1",
        extra_env=backend.env,
        log_path=tmp_path / "k1.log",
    )
    second = None
    try:
        await eventually(lambda: redis.exists(keys.worker_online("k1-r0")), timeout=15)
        submit = subprocess.run(
            [str(BIN / "worker-runtime"), "submit", "chat", '{"sleep": 0.5}', "--count", "20"],
            env=env_with(backend.url, **backend.env),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert submit.returncode == 0, submit.stderr
        await eventually(lambda: redis.llen(STARTED_LIST), timeout=10)
        stop_process(first, signal.SIGKILL)
        killed_done = await redis.llen(DONE_LIST)
        assert killed_done < 20  # it died with work in flight
        second = spawn_worker(
            backend.url,
            "tests.handlers:record",
            ["chat"],
            "k2",
            extra_env=backend.env,
            log_path=tmp_path / "k2.log",
        )

        async def all_done() -> bool:
            return len(await _count(redis, DONE_LIST)) == 20

        await eventually(all_done, timeout=30)
        started = await _count(redis, STARTED_LIST)
        done = await _count(redis, DONE_LIST)
        # At-least-once: only tasks that were running when k1 died ran twice.
        duplicates = {t for t, n in started.items() if n > 1}
        assert len(duplicates) <= 20 - killed_done
        assert all(n >= 1 for n in done.values())
    finally:
        stop_process(first, signal.SIGKILL)
        if second is not None:
            assert stop_process(second) == 0


def test_invalid_role_exits_2_before_connecting(tmp_path: Path) -> None:
    connections: list[object] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                connections.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        out = subprocess.run(
            [str(BIN / "worker-runtime"), "run", "tests.handlers:record", "--type", "chat"],
            cwd=ROOT,
            env=env_with(f"redis://127.0.0.1:{port}/0", BYAI_WORKER_ROLE="overlord"),
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        stop.set()
        thread.join()
        server.close()
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "BYAI_WORKER_ROLE" in lines[0] and "overlord" in lines[0]
    assert "Traceback" not in out.stderr
    assert connections == []


def test_bad_handler_and_flags_are_one_line_errors() -> None:
    cases = [
        (["run", "nosuchmodule:handler", "--type", "chat"], "cannot import"),
        (["run", "tests.handlers:DONE_LIST", "--type", "chat"], "async function"),
        (["run", "tests.handlers", "--type", "chat"], "module:callable"),
        (["run", "tests.handlers:record", "--type", "chat", "--replicas", "0"], "--replicas"),
        (["submit", "chat", "[1, 2]"], "JSON must be an object"),
        (["submit", "chat", "{nope"], "JSON is not valid"),
    ]
    for args, expected in cases:
        out = subprocess.run(
            [str(BIN / "worker-runtime"), *args],
            cwd=ROOT,
            env=env_with("redis://127.0.0.1:1/0"),
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert out.returncode == 2, (args, out.stderr)
        assert expected in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_unreachable_redis_exits_2() -> None:
    out = subprocess.run(
        [str(BIN / "worker-runtime"), "run", "tests.handlers:record", "--type", "chat"],
        cwd=ROOT,
        env=env_with("redis://:s3cret@127.0.0.1:1/0"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2
    assert "s3cret" not in out.stderr and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith("worker-runtime: cannot reach Redis")
