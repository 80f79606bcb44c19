"""How the headless CLI fails: exit codes, the ``byconsole: error:`` line, and a document
even when Redis cannot be read (real redis-servers; one with ``requirepass``)."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from tests.integration.cli_helpers import BYCONSOLE, K, add_worker, cli_env, run
from tests.redis_server import RedisServer, free_port


@pytest.fixture
def env(redis_url: str, tmp_path: Path) -> dict[str, str]:
    return cli_env(redis_url, tmp_path)


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line]


async def test_dead_list_of_an_unknown_type_exits_1_like_type_does(
    redis: Redis, env: dict[str, str]
) -> None:
    await add_worker(redis, "w1", ["chat"])
    typo = run(["dead", "list", "nosuchtype"], env)
    assert typo.code == 1, typo
    assert error_lines(typo.err) == ["byconsole: error: unknown agent type: nosuchtype"]
    scoped = run(["--snapshot", "--type", "nosuch"], env)
    assert scoped.code == 1
    assert "byconsole: error: unknown agent type: nosuch" in scoped.err
    # A known type with no dead letters is no error.
    known = run(["dead", "list", "chat"], env)
    assert known.code == 0, known.err
    assert "0 dead letter(s) of chat" in known.out


async def test_every_error_line_has_the_documented_prefix(
    redis: Redis, env: dict[str, str]
) -> None:
    await add_worker(redis, "w1", ["chat"])
    for args in (
        ["worker", "info", "ghost"],
        ["worker", "suspend", "ghost", "--reason", "x"],
        ["dead", "show", "chat", "1-0"],
        ["type", "pause", "nosuch"],
    ):
        result = run(args, env)
        assert result.code == 1, (args, result)
        lines = error_lines(result.err)
        assert len(lines) == 1 and lines[0].startswith("byconsole: error: "), (args, lines)


def test_json_format_prints_a_document_when_redis_is_unreachable(tmp_path: Path) -> None:
    env = cli_env(f"redis://127.0.0.1:{free_port()}/0", tmp_path)
    result = run(["--snapshot", "--format", "json"], env)
    assert result.code == 2
    doc = result.json()
    assert doc["up"] is False and "cannot reach Redis" in doc["error"]
    assert doc["redis"]["endpoint"].startswith("redis://127.0.0.1:")
    assert error_lines(result.err) == [f"byconsole: error: {doc['error']}"]


@pytest.fixture
def secured() -> Iterator[RedisServer]:
    server = RedisServer(extra_args=["--requirepass", "Pw-0f-ops"]).start()
    yield server
    server.cleanup()


def test_a_password_protected_redis_without_a_password_says_noauth(
    secured: RedisServer, tmp_path: Path
) -> None:
    env = cli_env(f"redis://127.0.0.1:{secured.port}/0", tmp_path)
    for args in (["--snapshot"], ["worker", "list"]):
        result = run(args, env)
        assert result.code == 2
        assert error_lines(result.err) == [
            f"byconsole: error: Redis at redis://127.0.0.1:{secured.port}/0 requires a "
            "password (NOAUTH)"
        ]
        assert "HELLO" not in result.err
    as_json = run(["--snapshot", "--format", "json"], env)
    assert "requires a password (NOAUTH)" in as_json.json()["error"]
    wrong = run(["--snapshot"], cli_env(f"redis://:nope@127.0.0.1:{secured.port}/0", tmp_path))
    assert wrong.code == 2 and "refused the credentials" in wrong.err


def test_help_names_every_source_of_the_url_in_order(tmp_path: Path) -> None:
    result = run(["--help"], cli_env("redis://127.0.0.1:1/0", tmp_path))
    assert result.code == 0
    text = " ".join(result.out.split())
    line = text[text.index("Redis URL precedence:") :].split("(REDIS_CLUSTER_HOST")[0]
    sources = [s.strip() for s in line.removeprefix("Redis URL precedence:").split(">")]
    assert [s.split()[0] for s in sources] == [
        "--redis-url-file",
        "--redis-url",
        "BYAI_REDIS_URL",
        "REDIS_URL",
        "REDIS_HOST",
        "--context",
        "redis://localhost:6379/0",
    ], sources


async def test_a_registry_of_the_wrong_type_warns_and_exits_1(
    redis: Redis, env: dict[str, str]
) -> None:
    await redis.set(K.workers, "not a set")
    for args in (["--snapshot"], ["worker", "list"], ["--snapshot", "--format", "json"]):
        result = run(args, env)
        assert result.code == 1, (args, result)
        assert f"byconsole: warning: {K.workers} holds the wrong Redis type (WRONGTYPE)" in (
            result.err
        )
    doc = run(["--snapshot", "--format", "json"], env).json()
    assert doc["redis"]["wrong_type"] == [K.workers]
    await redis.delete(K.workers)
    await add_worker(redis, "w1", ["chat"])
    healthy = run(["--snapshot"], env)
    assert healthy.code == 0 and healthy.err == ""


def test_the_console_refuses_to_draw_into_a_redirected_stderr(tmp_path: Path) -> None:
    env = {**cli_env(f"redis://127.0.0.1:{free_port()}/0", tmp_path), "TERM": "xterm"}
    leader, follower = pty.openpty()
    err_path = tmp_path / "err.txt"
    with open(err_path, "wb") as err:
        proc = subprocess.run(
            [str(BYCONSOLE)], env=env, stdin=follower, stdout=follower, stderr=err, timeout=30
        )
    os.close(follower)
    os.close(leader)
    assert proc.returncode == 2
    lines = error_lines(err_path.read_text())
    assert len(lines) == 1 and "the console draws on stderr" in lines[0], lines
    assert json.dumps(lines)  # one readable line, no screen painted into the file
    assert "\x1b" not in err_path.read_text()


async def test_a_write_into_a_frozen_redis_ends_in_one_bounded_line(tmp_path: Path) -> None:
    server = RedisServer().start()
    assert server.proc is not None
    try:
        admin = Redis.from_url(server.url, decode_responses=True)
        await add_worker(admin, "w1", ["chat"])
        await admin.aclose()
        os.kill(server.proc.pid, signal.SIGSTOP)
        result = run(["worker", "suspend", "w1", "--reason", "x"], cli_env(server.url, tmp_path))
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)
        server.cleanup()
    assert result.code == 2 and result.elapsed < 20, result
    lines = error_lines(result.err)
    assert len(lines) == 1 and lines[0].startswith("byconsole: error: cannot reach Redis"), lines
    assert "Redis did not answer" in lines[0] and "check with --snapshot" in lines[0]
