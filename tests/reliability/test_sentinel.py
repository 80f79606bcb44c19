"""Redis Sentinel: a worker follows failovers and no task is lost; ``WAIT`` on submit.

A primary, a replica and three real ``redis-sentinel`` processes on loopback
(tests/sentinel.py). A real ``worker-runtime run`` process pointed only at the
sentinels runs tasks while the test submits them through the sentinels too (each
submit acknowledged by a replica, ``WAIT 1``), across a ``SENTINEL FAILOVER`` and then
a SIGKILL of the new primary. Every acknowledged task must finish (at-least-once); a
task may run twice only where a failover lost its acknowledgement (the worker's
``XACK`` reached a primary that was then replaced before replicating it), so the
duplicates are counted and reported, not forbidden.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.runtime_helpers import BIN, ROOT, eventually, stop_process
from tests.redis_server import env_with
from tests.sentinel import MASTER, SentinelSet
from worker_runtime.connection import create_redis
from worker_runtime.keys import Keys
from worker_runtime.producer import NotReplicatedError, Producer
from worker_runtime.settings import ConfigError, RedisSettings, load

pytestmark = pytest.mark.slow

TYPE = "sentineled"


@pytest.fixture(scope="module")
def sentinels() -> Iterator[SentinelSet]:
    group = SentinelSet().start()
    yield group
    group.cleanup()


def test_sentinel_settings_forms_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "redis+sentinel://app:s3cret@h1:26380,h2/prod-main/2"
    settings = load(RedisSettings, url=url)
    assert settings.sentinel and settings.sentinel_master == "prod-main"
    assert settings.sentinel_nodes == [("h1", 26380), ("h2", 26379)]
    assert settings.url == "redis://app:s3cret@prod-main/2"
    assert settings.endpoint == "sentinel redis://h1:26380,h2:26379/prod-main/2"
    assert "s3cret" not in settings.endpoint

    monkeypatch.setenv("BYAI_REDIS_SENTINELS", "10.0.0.1:26379,10.0.0.2:26379")
    monkeypatch.setenv("BYAI_REDIS_SENTINEL_MASTER", "main")
    monkeypatch.setenv("BYAI_REDIS_SENTINEL_PASSWORD", "sentinel-pw")
    monkeypatch.setenv("BYAI_REDIS_URL", "rediss://worker:data-pw@ignored:6380/0")
    from_env = load(RedisSettings)
    assert from_env.sentinel_nodes == [("10.0.0.1", 26379), ("10.0.0.2", 26379)]
    assert from_env.sentinel_password == "sentinel-pw"
    assert from_env.endpoint == "sentinel rediss://10.0.0.1:26379,10.0.0.2:26379/main/0"

    monkeypatch.delenv("BYAI_REDIS_SENTINEL_MASTER")
    for bad, why in (
        ({}, "needs the master name"),
        ({"url": "redis+sentinel://h1:99999/m/0"}, "port"),
        ({"url": "redis+sentinel://h1:1/m/x"}, "database number"),
        ({"url": "redis+sentinel://h1:1/"}, "names no master"),
        ({"url": "redis+sentinel://h1:1/bad name/0"}, "master name"),
    ):
        with pytest.raises(ConfigError) as caught:
            load(RedisSettings, **bad)
        message = str(caught.value)
        assert why in message and "\n" not in message and "pw" not in message, message


async def test_clients_reach_the_primary_and_producer_waits_for_replicas(
    sentinels: SentinelSet,
) -> None:
    client = create_redis(RedisSettings(url=sentinels.url))
    try:
        await client.set("h7:probe", "1")
        primary = sentinels.primary_port()
        assert sentinels.server_on(primary).cli("GET", "h7:probe") == "1"
        # One replica: WAIT 1 is met, WAIT 2 is not (a clear error, the task is on the primary).
        ok = Producer(client, wait_replicas=1, wait_timeout_ms=5000)
        task_id = await ok.submit(TYPE, {"n": 1})
        assert task_id
        too_many = Producer(client, wait_replicas=2, wait_timeout_ms=200)
        with pytest.raises(NotReplicatedError) as caught:
            await too_many.submit(TYPE, {"n": 2})
        assert "only 1 of 2 replica(s)" in str(caught.value)
        with pytest.raises(NotReplicatedError):
            await too_many.submit_many(TYPE, [{"n": 3}, {"n": 4}])
    finally:
        await client.aclose()

    env = env_with("redis://127.0.0.1:1/0", BYAI_REDIS_SENTINELS=sentinels.nodes)
    env.update(BYAI_REDIS_SENTINEL_MASTER=MASTER)
    env.pop("BYAI_REDIS_URL")
    base = [str(BIN / "worker-runtime"), "submit", TYPE, "{}", "--wait-replicas"]
    good = subprocess.run([*base, "1"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    short = [*base, "2", "--wait-replicas-timeout", "200"]
    bad = subprocess.run(short, cwd=ROOT, env=env, capture_output=True, text=True)
    assert bad.returncode == 1 and "only 1 of 2 replica(s)" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_byconsole_reaches_the_primary_through_a_context(
    sentinels: SentinelSet, tmp_path: Path
) -> None:
    config = tmp_path / "byconsole" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        f'[contexts.ha]\nsentinels = "{sentinels.nodes}"\nsentinel_master = "{MASTER}"\n'
    )
    env = env_with("redis://127.0.0.1:1/0", XDG_CONFIG_HOME=str(tmp_path))
    env.pop("BYAI_REDIS_URL")
    # A type the snapshot can only list when it reads the primary.
    sentinels.server_on(sentinels.primary_port()).cli("SADD", Keys().agent_types, TYPE)
    args = [str(BIN / "byconsole"), "--context", "ha", "--snapshot", "--format", "json"]
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert TYPE in {t["name"] for t in json.loads(done.stdout)["types"]}
    listed = subprocess.run(
        [str(BIN / "byconsole"), "--context", "ha", "contexts"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"sentinel {sentinels.nodes}/{MASTER}" in listed.stdout
    # A master name the sentinels do not monitor, and sentinels nobody runs: one line each.
    for url, why in (
        (f"redis+sentinel://{sentinels.nodes}/nosuch/0", "no sentinel names it"),
        ("redis+sentinel://127.0.0.1:1,127.0.0.1:2/nosuch/0", "2 sentinel(s) unreachable"),
    ):
        failed = subprocess.run(
            [str(BIN / "byconsole"), "--redis-url", url, "--snapshot"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert failed.returncode == 2 and "no primary found for 'nosuch'" in failed.stderr
        assert why in failed.stderr and len(failed.stderr.strip().splitlines()) == 1


def _journal(path: Path) -> tuple[Counter[str], Counter[str]]:
    started: Counter[str] = Counter()
    done: Counter[str] = Counter()
    if path.exists():
        for line in path.read_text().splitlines():
            what, _, task_id = line.partition(" ")
            (started if what == "started" else done)[task_id] += 1
    return started, done


async def test_a_worker_follows_failovers_and_no_task_is_lost(
    sentinels: SentinelSet, tmp_path: Path
) -> None:
    journal = tmp_path / "journal"
    env = env_with(
        "redis://127.0.0.1:1/0",
        BYAI_REDIS_SENTINELS=sentinels.nodes,
        BYAI_REDIS_SENTINEL_MASTER=MASTER,
        TEST_JOURNAL=str(journal),
        BYAI_HEARTBEAT_INTERVAL="1",
        BYAI_LEASE_TTL="15",
        BYAI_BLOCK_MS="200",
        BYAI_CLAIM_IDLE_MS="3000",
        BYAI_GRACE_PERIOD="5",
    )
    env.pop("BYAI_REDIS_URL")
    args = [str(BIN / "worker-runtime"), "run", "tests.handlers:journal", "--type", TYPE]
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [*args, "--instance", "sentinel-w"], cwd=ROOT, env=env, stdout=out, stderr=out
        )
    client = create_redis(RedisSettings(url=sentinels.url))
    producer = Producer(client, wait_replicas=1, wait_timeout_ms=1000)
    accepted: list[str] = []
    unreplicated: list[str] = []
    resent = 0
    stop = asyncio.Event()

    async def submit_forever() -> None:
        nonlocal resent
        n = 0
        while not stop.is_set():
            task_id = f"s-{n}-{uuid.uuid4().hex[:6]}"
            n += 1
            while True:  # the same task id again after an error: at most a duplicate
                try:
                    await producer.submit(TYPE, {"sleep": 0.02}, task_id=task_id)
                    accepted.append(task_id)
                    break
                except NotReplicatedError:
                    unreplicated.append(task_id)  # on the primary, not yet on a replica
                    break
                except Exception:
                    resent += 1
                    await asyncio.sleep(0.1)
            await asyncio.sleep(0.01)

    submitter = asyncio.create_task(submit_forever())
    try:
        await eventually(lambda: _done_count(journal, 10), timeout=30)
        first = await asyncio.to_thread(sentinels.failover)
        # Tasks keep running after it: 10 more finish.
        mark = _finished(journal)
        await eventually(lambda: _done_count(journal, mark + 10), timeout=30)
        killed_at = time.monotonic()
        old = sentinels.server_on(first)
        second = await asyncio.to_thread(sentinels.kill_primary)
        failover_s = time.monotonic() - killed_at
        assert second != first
        # The killed node comes back and the sentinels make it the new primary's replica,
        # so WAIT 1 can be met again.
        await asyncio.to_thread(old.start)
        mark = _finished(journal)
        await eventually(lambda: _done_count(journal, mark + 10), timeout=60)
    finally:
        stop.set()
        await submitter
    try:
        wanted = set(accepted) | set(unreplicated)

        async def all_done() -> bool:
            _, done = _journal(journal)
            return wanted <= set(done)

        await eventually(all_done, timeout=60)
    finally:
        await client.aclose()
        code = stop_process(worker)
    started, done = _journal(journal)
    twice = sorted(t for t, c in started.items() if c > 1)
    print(
        json.dumps(
            {
                "accepted": len(accepted),
                "unreplicated": len(unreplicated),
                "resent": resent,
                "ran_twice": len(twice),
                "kill_to_new_primary_s": round(failover_s, 1),
            }
        )
    )
    assert wanted <= set(done), "lost: " + ",".join(sorted(wanted - set(done))[:5])
    assert worker.poll() is not None and code == 0, log.read_text()[-2000:]
    # A worker that was never stopped ran each task once unless a failover lost its ack:
    # at most the tasks in flight around the two failovers (concurrency 50 each).
    assert len(twice) <= 100, twice[:10]


def _finished(journal: Path) -> int:
    return sum(_journal(journal)[1].values())


async def _done_count(journal: Path, at_least: int) -> bool:
    return _finished(journal) >= at_least


DATA_PW = "Data-Pw-h7x"
SENTINEL_PW = "Sentinel-Pw-h7y"


async def test_sentinel_and_data_passwords_are_separate(tmp_path: Path) -> None:
    """Sentinels with their own ``requirepass``, data nodes with another: each is sent only
    where it belongs, a wrong one is one line naming the lookup, never the password."""
    group = SentinelSet(data_password=DATA_PW, sentinel_password=SENTINEL_PW).start()
    try:
        url = f"redis+sentinel://:{DATA_PW}@{group.nodes}/{MASTER}/0"
        client = create_redis(RedisSettings(url=url, sentinel_password=SENTINEL_PW))
        try:
            await client.set("h7:auth", "ok")
            assert await client.get("h7:auth") == "ok"
        finally:
            await client.aclose()
        secret = tmp_path / "sentinel-pw"
        secret.write_text(SENTINEL_PW + "\n")
        env = env_with(url, BYAI_REDIS_SENTINEL_PASSWORD_FILE=str(secret))
        args = [str(BIN / "byconsole"), "--snapshot", "--format", "json"]
        good = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert good.returncode == 0, good.stderr
        for wrong in ({"BYAI_REDIS_SENTINEL_PASSWORD": "nope"}, {}):
            env = env_with(url, **wrong)
            bad = subprocess.run(
                args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
            )
            assert bad.returncode == 2 and "no primary found for" in bad.stderr, bad.stderr
            assert "the sentinels refused their credentials" in bad.stderr
            assert len(bad.stderr.strip().splitlines()) == 1
            assert DATA_PW not in bad.stderr and SENTINEL_PW not in bad.stderr
    finally:
        group.cleanup()
