"""``--snapshot --fail-on-alert``, the ``alerts`` / ``slo`` JSON and per-context thresholds,
through the real ``byconsole`` executable on a real redis-server."""

from __future__ import annotations

from pathlib import Path

from redis.asyncio import Redis

from tests.integration.cli_helpers import K, add_worker, assert_one_line_error, cli_env, run
from worker_runtime.keys import CONSUMER_GROUP


async def _orphan_backlog(redis: Redis, agent_type: str = "orphan", n: int = 50) -> None:
    """A type with a queued backlog and no worker at all."""
    await redis.sadd(K.agent_types, agent_type)
    for i in range(n):
        await redis.xadd(K.type_stream(agent_type), {"data": f"task {i}"})


async def test_fail_on_alert_fires_on_an_orphan_backlog(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    await add_worker(redis, "w-1", ["chat"])
    await _orphan_backlog(redis)
    env = cli_env(redis_url, tmp_path)

    done = run(["--snapshot", "--format", "json", "--fail-on-alert", "NO_WORKERS_ONLINE"], env)
    assert done.code == 1, done.err
    doc = done.json()
    (alert,) = [a for a in doc["alerts"] if a["code"] == "NO_WORKERS_ONLINE"]
    assert alert["subject"] == "type:orphan" and alert["agent_type"] == "orphan"
    assert alert["severity"] == "critical" and alert["runbook"]
    assert set(doc["slo"]) >= {"success_ratio", "burn_rate", "freshness_age_ms", "window"}
    assert "executions" in doc
    assert "check failed: alert NO_WORKERS_ONLINE (critical, type:orphan)" in done.err

    # Case-insensitive codes, comma lists, any.
    assert run(["--snapshot", "--fail-on-alert", "no_workers_online,queue_backlog"], env).code == 1
    assert run(["--snapshot", "--fail-on-alert", "any"], env).code == 1
    # 50 < by-framework's backlog threshold of 100: this one does not fire.
    ok = run(["--snapshot", "--fail-on-alert", "QUEUE_BACKLOG"], env)
    assert ok.code == 0, ok.err
    # Scoped to another type, the orphan's alert is not that type's.
    assert (
        run(["--snapshot", "--type", "chat", "--fail-on-alert", "NO_WORKERS_ONLINE"], env).code == 0
    )
    # The table lists the alerts too.
    table = run(["--snapshot"], env)
    assert "NO_WORKERS_ONLINE" in table.out and "Tasks (last 5m)" in table.out


async def test_thresholds_come_from_the_context(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    await add_worker(redis, "w-1", ["chat"])
    await _orphan_backlog(redis, n=20)
    config = tmp_path / "byconsole" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[contexts.strict]\nurl = "{redis_url}"\n'
        "[contexts.strict.alerts]\nqueue_backlog = 10\n"
        f'[contexts.lax]\nurl = "{redis_url}"\n'
    )
    env = cli_env(redis_url, tmp_path)
    env.pop("BYAI_REDIS_URL")
    strict = run(["--context", "strict", "--snapshot", "--fail-on-alert", "QUEUE_BACKLOG"], env)
    assert strict.code == 1 and "QUEUE_BACKLOG" in strict.err
    lax = run(["--context", "lax", "--snapshot", "--fail-on-alert", "QUEUE_BACKLOG"], env)
    assert lax.code == 0, lax.err
    # metrics snapshot uses the same thresholds.
    doc = run(["--context", "strict", "metrics", "snapshot", "--json"], env).json()
    assert "QUEUE_BACKLOG" in {a["code"] for a in doc["alerts"]}


async def test_bad_fail_on_alert_and_bad_thresholds_are_one_line_errors(
    redis_url: str, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    bad = run(["--snapshot", "--fail-on-alert", "NOPE"], env)
    assert_one_line_error(bad)
    assert "unknown alert code NOPE" in bad.err
    assert_one_line_error(run(["--fail-on-alert", "any"], env))  # needs --snapshot
    config = tmp_path / "byconsole" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("[contexts.x.alerts]\nqueue_backlog = -1\n")
    assert_one_line_error(run(["--context", "x", "--snapshot"], env))


async def test_a_stream_nobody_declared_raises_its_alerts(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    # What another producer leaves behind: tasks on a type stream no index, worker or
    # target names, read by two consumer groups (two runtimes' conventions), one entry
    # held by a consumer that is gone. Found by the discovery, it gets every alert.
    await add_worker(redis, "w-1", ["chat"])
    stream = K.type_stream("foreign")
    for i in range(50):
        await redis.xadd(stream, {"data": f"task {i}"})
    await redis.xgroup_create(stream, CONSUMER_GROUP, id="0")
    await redis.xgroup_create(stream, "agent_engines:3f2a9c1b7e", id="0")
    await redis.xreadgroup("agent_engines:3f2a9c1b7e", "gone-1", {stream: ">"}, count=1)
    assert not await redis.sismember(K.agent_types, "foreign")
    env = cli_env(redis_url, tmp_path)

    done = run(["--snapshot", "--format", "json"], env)
    assert done.code == 0, done.err
    doc = done.json()
    (view,) = [t for t in doc["types"] if t["name"] == "foreign"]
    assert view["registered"] is False and len(view["groups"]) == 2
    codes = {(a["code"], a["agent_type"]) for a in doc["alerts"]}
    assert ("NO_WORKERS_ONLINE", "foreign") in codes
    assert ("SEVERAL_CONSUMER_GROUPS", "foreign") in codes
    for flags in (
        ["--max-depth", "10"],
        ["--fail-on-alert", "SEVERAL_CONSUMER_GROUPS"],
        ["--fail-on-alert", "NO_WORKERS_ONLINE"],
    ):
        failed = run(["--snapshot", *flags], env)
        assert failed.code == 1, (flags, failed.err)
        assert "foreign" in failed.err
