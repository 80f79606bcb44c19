"""``byconsole worker restart`` / ``type restart`` / ``worker stop`` / ``type stop``
(README, "Restart, stop and pinned calls") as a real subprocess against a real
``worker-runtime`` process on a real redis-server: the replacement's new id is what the
worker's instance reported, a by-framework worker is refused up front with the reason,
a rolling restart prints each step in order, and a stop is a drain / a scale to 0."""

from __future__ import annotations

import json
from pathlib import Path

from redis.asyncio import Redis

from tests.integration.cli_helpers import assert_one_line_error, cli_env, run
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from tests.integration.test_restart_verbs import _by_framework_worker, _replicas

TYPE, INSTANCE = "crs", "ci"


async def test_worker_and_type_restart_from_the_cli(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    proc = spawn_worker(redis_url, "tests.handlers:record", [TYPE], INSTANCE, replicas=2)
    try:

        async def both_up() -> bool:
            return await _replicas(redis, INSTANCE, TYPE) == ["ci-r0", "ci-r1"]

        await eventually(both_up, timeout=20)
        await _by_framework_worker(redis, "bf-1", TYPE)

        # by-framework: refused before anything is written, exit 1, the reason in one line.
        refused = run(["worker", "restart", "bf-1"], env)
        assert_one_line_error(refused, code=1)
        assert "by-framework" in refused.err

        done = run(["worker", "restart", "ci-r0", "--wait", "--json", "-r", "new build"], env)
        assert done.code == 0, done
        doc = json.loads(done.out)
        assert doc["state"] == "replaced" and doc["target"] == "ci-r0"
        assert doc["replacement"] == "ci-r2"  # a new id, as the instance reported it
        assert await _replicas(redis, INSTANCE, TYPE) == ["ci-r1", "ci-r2"]

        # Rolling, one instance: one replica at a time, each line as it happens.
        rolled = run(["type", "restart", TYPE, "--instance", INSTANCE], env, timeout=60)
        assert rolled.code == 0, rolled
        lines = rolled.out.splitlines()
        # "<id>: replaced as <new> in 0.4 s": the latency is cut off, it varies.
        assert [line.split(" in ")[0] for line in lines[:-1]] == [
            "ci-r1: sent",
            "ci-r1: replaced as ci-r3",
            "ci-r2: sent",
            "ci-r2: replaced as ci-r4",
        ]
        assert lines[-1] == "2 of 2 replica(s) replaced"
        assert await _replicas(redis, INSTANCE, TYPE) == ["ci-r3", "ci-r4"]

        # Fleet-wide, the by-framework replica is refused first and nothing is sent to
        # it; the outcome is not "all replaced": exit 1 (--json: one document).
        fleet = run(["type", "restart", TYPE, "--json", "--max-unavailable", "2"], env, timeout=60)
        assert fleet.code == 1, fleet
        summary = json.loads(fleet.out)
        states = {r["target"]: r["state"] for r in summary["replicas"]}
        assert states == {"bf-1": "refused", "ci-r3": "replaced", "ci-r4": "replaced"}
        assert summary["replaced"] == 2
        assert "1 replica(s) not replaced" in fleet.err

        unknown = run(["type", "restart", "nosuchtype"], env)
        assert_one_line_error(unknown, code=1)

        # stop: one replica is a drain (not replaced: the instance runs one fewer); the
        # instance's replicas of the type are scale T 0 --instance I.
        stopped = run(["worker", "stop", "ci-r5", "--wait"], env)
        assert stopped.code == 0, stopped
        assert stopped.out.startswith("stop ci-r5 (drain: not replaced): written · applied")

        async def one_left() -> bool:
            return await _replicas(redis, INSTANCE, TYPE) == ["ci-r6"]

        await eventually(one_left, timeout=10)
        gone = run(["type", "stop", TYPE, "--instance", INSTANCE, "--wait", "--json"], env)
        assert gone.code == 0, gone
        doc = json.loads(gone.out)
        assert (doc["action"], doc["serving"], doc["stopped"]) == ("scale", [], True)
        assert await _replicas(redis, INSTANCE, TYPE) == []
        assert "scale T 0" in run(["type", "stop", "--help"], env).out
    finally:
        assert stop_process(proc) == 0


async def test_type_stop_fleet_wide_is_scale_to_zero_on_every_instance(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    procs = [
        spawn_worker(redis_url, "tests.handlers:record", [TYPE], name, replicas=1)
        for name in ("fa", "fb")
    ]
    try:

        async def both_up() -> bool:
            return all([await _replicas(redis, name, TYPE) for name in ("fa", "fb")])

        await eventually(both_up, timeout=20)
        gone = run(["type", "stop", TYPE, "--wait", "--json"], env)
        assert gone.code == 0, gone
        doc = json.loads(gone.out)
        assert (doc["action"], doc["serving"], doc["stopped"]) == ("scale", [], True)
        for name in ("fa", "fb"):
            assert await _replicas(redis, name, TYPE) == []
        # A later scale undoes it: the fleet-wide target is a scale target like any other.
        back = run(["scale", TYPE, "1", "--wait"], env)
        assert back.code == 0, back
        assert any([await _replicas(redis, name, TYPE) for name in ("fa", "fb")])
    finally:
        for proc in procs:
            assert stop_process(proc) == 0
