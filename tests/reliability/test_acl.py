"""The minimal ACL users (tests/reliability/acl.py) each do their job, and no more.

* the worker user runs a real ``worker-runtime`` process end to end (registration,
  consumption, acks, executions, leader election, metrics, scheduler, drain);
* the operator user runs every ``byconsole`` write command;
* the viewer user reads everything (``--snapshot`` in every format, the read
  subcommands, the ``--read-only`` console) and cannot change anything: every write
  is refused with one clear line, and Redis holds exactly what it held before.
"""

from __future__ import annotations

import asyncio
import fnmatch
import inspect
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import NoPermissionError

from bench.fault_handlers import JOURNAL_ENV
from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from tests.integration.cli_helpers import BYCONSOLE, add_worker
from tests.integration.runtime_helpers import BIN, FAST_ENV, ROOT, eventually, stop_process
from tests.redis_server import env_with
from tests.reliability.acl import Secured, dump_all
from tests.streams import stream_entries
from worker_runtime.admin import WorkerManager
from worker_runtime.keys import CONSUMER_GROUP, Keys
from worker_runtime.settings import RedisSettings

K = Keys()


def _run(
    command: str, args: list[str], url: str, tmp: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    exe = str(BYCONSOLE) if command == "byconsole" else str(BIN / "worker-runtime")
    env = env_with(url, XDG_CONFIG_HOME=str(tmp), **extra)
    return subprocess.run(
        [exe, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("schema", ["v1", "v2"])
def test_the_key_patterns_cover_every_key(schema: str) -> None:
    keys = Keys(schema)  # type: ignore[arg-type]
    rendered: list[str] = []
    for name, member in inspect.getmembers(Keys):
        if name.startswith(("_", "acl_patterns")) or name == "schema":
            continue
        value = getattr(keys, name)
        if isinstance(member, property) and isinstance(value, dict):
            rendered += value.values()  # a family of keys by name (control_plane_streams)
        elif isinstance(member, property):
            rendered.append(value)
        elif name == "all_worker_keys":
            rendered += value("w-1")
        else:
            rendered.append(value("x-1"))
    assert len(rendered) > 25
    for key in rendered:
        assert any(fnmatch.fnmatchcase(key, p) for p in keys.acl_patterns), key
        # The append-only audit rules: every key but the audit stream, which none match.
        # Redis negates a class with [^...], fnmatch with [!...].
        globs = [p.replace("[^", "[!") for p in keys.acl_patterns_except_audit]
        matched = any(fnmatch.fnmatchcase(key, p) for p in globs)
        assert matched is (key != keys.audit_stream), key


@pytest.mark.parametrize("user", ["operator", "worker"])
async def test_the_audit_stream_is_append_only(secured: Secured, admin: Redis, user: str) -> None:
    client = Redis.from_url(secured.url(user), decode_responses=True)
    try:
        manager = WorkerManager(client, K, operator="mallory@laptop")
        await add_worker(admin, "w-1", ["chat"])
        if user == "operator":
            await manager.suspend_worker("w-1", reason="ok")
        else:  # a worker audits too (a drain's end, a refused push), but suspends no one
            await manager.audit("refused-command", "w-1", "ok")
        entries: Any = await admin.xrange(K.audit_stream)
        assert len(entries) == 1
        # The entry names the Redis user Redis authenticated, whatever $USER claims.
        assert entries[0][1]["redis_user"] == user
        assert entries[0][1]["operator"] == "mallory@laptop"
        for attempt in (
            client.delete(K.audit_stream),
            client.xtrim(K.audit_stream, maxlen=0),
            client.xdel(K.audit_stream, entries[0][0]),
            client.unlink(K.audit_stream),
            client.eval("return redis.call('DEL', KEYS[1])", 1, K.audit_stream),
        ):
            with pytest.raises(NoPermissionError):
                await attempt
        remaining: Any = await admin.xrange(K.audit_stream)
        assert len(remaining) == 1
        # Every other key stays writable as before.
        await client.delete(K.worker_admin("w-1"))
    finally:
        await client.aclose()


@pytest.mark.slow
async def test_worker_user_runs_the_whole_runtime(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.txt"
    log = tmp_path / "worker.log"
    env = env_with(
        secured.url("worker"),
        **FAST_ENV,
        BYAI_METRICS_INTERVAL="0.3",
        BYAI_JANITOR_INTERVAL="0.3",
        **{JOURNAL_ENV: str(journal)},
    )
    args = ["run", "bench.fault_handlers:traced", "--type", "chat", "--instance", "aclw"]
    args += ["--periodic", "tick:0.5"]
    worker = subprocess.Popen(
        [str(BIN / "worker-runtime"), *args, "--type", "tick"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        await eventually(lambda: admin.exists(K.worker_online("aclw-r0")), timeout=20)
        # An application submits with the same rights.
        out = _run(
            "worker-runtime",
            ["submit", "chat", "{}", "--count", "10"],
            secured.url("worker"),
            tmp_path,
        )
        assert out.returncode == 0, out.stderr

        async def worked() -> bool:
            done = journal.read_text().count("D ") if journal.exists() else 0
            return bool(
                done >= 12  # 10 tasks + periodic ones
                and await admin.exists(K.leader_lock)  # elected
                and await admin.zcard(K.metrics_history) > 0  # the collector wrote
                and await admin.zcard(K.worker_executions("aclw-r0")) >= 10
            )

        await eventually(worked, timeout=20)
        pending = await admin.xpending(K.type_stream("chat"), CONSUMER_GROUP)
        assert pending["pending"] == 0  # acknowledged
        # Drain (by the operator): the worker finishes, writes its own audit entry, exits.
        drained = _run(
            "byconsole", ["worker", "drain", "aclw-r0"], secured.url("operator"), tmp_path
        )
        assert drained.returncode == 0, drained.stderr
        assert worker.wait(20) == 0
    finally:
        stop_process(worker)
    text = log.read_text()
    for bad in ("no permissions", "NOPERM", "Traceback", " ERROR "):
        assert bad not in text, text[-2000:]
    audit = await stream_entries(admin, K.audit_stream)
    assert [f["action"] for _, f in audit] == ["drain", "drained"]


async def test_worker_user_cannot_reach_beyond_its_keys(secured: Secured, admin: Redis) -> None:
    del admin
    worker = Redis.from_url(secured.url("worker"), decode_responses=True)
    try:
        for call in (
            worker.flushall(),
            worker.config_get("*"),
            worker.keys("*"),
            worker.set("someone-else:key", "x"),
            worker.get("someone-else:key"),
            worker.acl_list(),
        ):
            with pytest.raises(NoPermissionError):
                await call
    finally:
        await worker.aclose()


async def test_operator_user_runs_every_write_command(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    await add_worker(admin, "w1", ["chat"], instance="host-a:1")
    await add_worker(admin, "w2", ["chat"], online=False)
    url = secured.url("operator")
    for args in (
        ["worker", "suspend", "w1", "--reason", "r"],
        ["worker", "resume", "w1"],
        ["type", "deny", "chat", "w1"],
        ["type", "allow", "chat", "w1"],
        ["scale", "chat", "3"],
        ["scale", "chat", "1", "--instance", "host-a:1"],
        ["worker", "drain", "w1"],
        ["worker", "evict", "w1", "--force"],
        ["worker", "forget", "w2"],
        ["--snapshot"],
    ):
        out = _run("byconsole", args, url, tmp_path)
        assert out.returncode == 0, (args, out.stderr)
    assert not await admin.sismember(K.workers, "w2")
    assert await admin.hget(K.scale_targets, "chat") == "3"
    operator = Redis.from_url(url, decode_responses=True)
    try:
        # It administers; it does not consume tasks or touch anything else.
        await admin.xgroup_create(K.type_stream("chat"), CONSUMER_GROUP, mkstream=True)
        for call in (
            operator.xreadgroup(CONSUMER_GROUP, "op", {K.type_stream("chat"): ">"}),
            operator.xack(K.type_stream("chat"), CONSUMER_GROUP, "0-1"),
            operator.flushall(),
            operator.set("someone-else:key", "x"),
        ):
            with pytest.raises(NoPermissionError):
                await call
    finally:
        await operator.aclose()


WRITES = [
    ["worker", "suspend", "w1", "--reason", "try"],
    ["worker", "resume", "w1"],
    ["worker", "evict", "w1"],
    ["worker", "evict", "w1", "--force"],
    ["worker", "drain", "w1"],
    ["worker", "forget", "w2"],
    ["type", "deny", "chat", "w1"],
    ["type", "allow", "chat", "w1"],
    ["scale", "chat", "4"],
    ["scale", "chat", "2", "--instance", "host-a:1"],
]


async def test_viewer_reads_everything_and_changes_nothing(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    await add_worker(admin, "w1", ["chat"], instance="host-a:1")
    await add_worker(admin, "w2", ["chat"], online=False)
    await admin.sadd(K.type_denied("chat"), "w2")
    await admin.zadd(K.instances, {"host-a:1": 1})
    await admin.xadd(
        K.audit_stream, {"ts": 1, "operator": "x", "action": "suspend", "target": "w1"}
    )
    url = secured.url("viewer")
    reads = [
        ["--snapshot"],
        ["--snapshot", "--format", "json"],
        ["--snapshot", "--format", "prom"],
        ["--snapshot", "--read-only", "--min-online", "1"],
        ["worker", "list"],
        ["worker", "info", "w1", "--json"],
        ["type", "denylist", "chat"],
        ["metrics", "snapshot"],
        ["metrics", "history"],
    ]
    # Independent commands run side by side (each is its own process).
    outs = await asyncio.gather(
        *(asyncio.to_thread(_run, "byconsole", args, url, tmp_path) for args in reads)
    )
    for args, out in zip(reads, outs, strict=True):
        assert out.returncode == 0, (args, out.stderr)
    doc = json.loads(outs[1].stdout)
    assert [w["worker_id"] for w in doc["workers"]] == ["w1", "w2"]

    before = await dump_all(admin)
    attempts = [cmd for args in WRITES for cmd in (args, [*args, "--read-only"])]
    outs = await asyncio.gather(
        *(asyncio.to_thread(_run, "byconsole", args, url, tmp_path) for args in attempts)
    )
    for args, out, refused in zip(WRITES, outs[::2], outs[1::2], strict=True):
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        line = out.stderr.strip()
        assert "\n" not in line and "Traceback" not in line, line
        assert "refused the command: the Redis ACL user may not run" in line, line
        # With --read-only nothing is even sent.
        assert refused.returncode == 2
        assert "changes the fleet and --read-only is set" in refused.stderr
    submit = _run("worker-runtime", ["submit", "chat", "{}"], url, tmp_path)
    assert submit.returncode == 2
    assert submit.stderr.strip() == (
        "worker-runtime: Redis refused the command: the Redis ACL user may not run XADD"
    )
    run = _run("worker-runtime", ["run", "tests.handlers:noop", "--type", "chat"], url, tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "the Redis ACL user may not run" in run.stderr.strip().splitlines()[-1]
    assert await dump_all(admin) == before


async def test_read_only_console_works_as_viewer(secured: Secured, admin: Redis) -> None:
    await add_worker(admin, "w1", ["chat"])
    backend = RedisBackend(RedisSettings(url=secured.url("viewer")))
    app = ConsoleApp(backend, refresh=0.2, read_only=True)
    async with app.run_test(size=(120, 36)) as pilot:
        for _ in range(100):
            if app.snapshot is not None and app.snapshot.workers:
                break
            await pilot.pause(0.05)
        assert app.snapshot is not None
        assert [w.worker_id for w in app.snapshot.workers] == ["w1"]
        screen = app.export_screenshot()
    assert "w1" in screen
