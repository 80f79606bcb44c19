"""``byconsole config get`` / ``config set`` (README, "Type configuration") as a real
subprocess against a real ``worker-runtime`` process (``tests.config_handlers``, whose
``on_init`` fails when asked to) on a real redis-server: values parsed as JSON when
they parse, reserved keys refused with the reason before anything is written, and
``--wait`` printing each replica's applied / failed as its lease reports it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from tests.integration.cli_helpers import assert_one_line_error, cli_env, run
from tests.integration.runtime_helpers import eventually, spawn_worker, stop_process
from worker_runtime.keys import Keys

KEYS = Keys()
IDS = ["cc-r0", "cc-r1"]


async def test_config_get_and_set_from_the_cli(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    env = cli_env(redis_url, tmp_path)
    proc = spawn_worker(redis_url, "tests.config_handlers:handle", ["ccfg"], "cc", replicas=2)
    try:

        async def up() -> bool:
            return all([await redis.exists(KEYS.worker_online(w)) for w in IDS])

        await eventually(up, timeout=20)
        empty = run(["config", "get", "ccfg"], env)
        assert (empty.code, empty.out.strip()) == (0, "ccfg: no configuration set")

        done = run(
            [
                *("config", "set", "ccfg", "temperature=0.2", "greeting=hello", "tags=[1,2]"),
                *("--reason", "launch", "--wait"),
            ],
            env,
        )
        assert done.code == 0, done
        lines = done.out.splitlines()
        assert lines[0].startswith("config set ccfg: version 1 written · ")
        assert lines[1:] == ["  cc-r0: applied", "  cc-r1: applied"]
        got = json.loads(run(["config", "get", "ccfg", "--json"], env).out)
        assert got["version"] == 1
        assert got["config"] == {"greeting": "hello", "tags": [1, 2], "temperature": 0.2}

        # A reserved key: refused with the reason, nothing written (still version 1).
        reserved = run(["config", "set", "ccfg", "replicas=4"], env)
        assert_one_line_error(reserved, code=1)
        assert "'replicas' is reserved" in reserved.err
        assert json.loads(run(["config", "get", "ccfg", "--json"], env).out)["version"] == 1

        # The hook fails on every replica: each says so, with the hook's error; exit 1.
        failed = run(
            ["config", "set", "ccfg", "fail=true", "--unset", "tags", "--wait", "--json"], env
        )
        assert failed.code == 1, failed
        doc = json.loads(failed.out)
        assert doc["version"] == 2 and doc["diff"] == "+fail=true; -tags"
        assert {w: r["state"] for w, r in doc["replicas"].items()} == dict.fromkeys(IDS, "failed")
        assert all("asked to fail" in r["error"] for r in doc["replicas"].values())

        entries: Any = await redis.xrange(KEYS.audit_stream)
        audit = [dict(f) for _, f in entries]
        sets = [e for e in audit if e["action"] == "config-set"]
        assert [e["details"] for e in sets] == [
            'v1: +greeting="hello"; +tags=[1, 2]; +temperature=0.2',
            "v2: +fail=true; -tags",
        ]
        assert_one_line_error(run(["config", "set", "ccfg"], env), code=1)
        assert_one_line_error(run(["config", "set", "ccfg", "novalue"], env), code=2)
    finally:
        assert stop_process(proc) == 0
