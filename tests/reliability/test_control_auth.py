"""Commands nobody may forge: the worker ACL user of the README, literally, and signed pushes.

* The README's ``ACL SETUSER`` lines are the ones tested here (tests/reliability/acl.py).
* With the worker user, ``byconsole worker suspend`` of another worker is refused by
  Redis and changes nothing; the worker user cannot write the fleet control stream,
  scale targets or admin hashes either.
* A hand-written entry on a victim's stream (the worker user may append there: direct
  tasks) is not applied by a worker holding the fleet's control secret, and is
  reported (log line and audit entry); an operator's signed command is applied.
* A forged far-future stamp does not make a worker ignore the real commands after it.
"""

from __future__ import annotations

import fnmatch
import inspect
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis
from redis.exceptions import NoPermissionError

from tests.integration.cli_helpers import BYCONSOLE, add_worker
from tests.integration.runtime_helpers import BIN, FAST_ENV, ROOT, eventually, stop_process
from tests.redis_server import env_with
from tests.reliability.acl import Secured, dump_all, readme_rule, setuser_args
from tests.streams import stream_entries
from worker_runtime.keys import Keys
from worker_runtime.messages import encode_command
from worker_runtime.models import Command, CommandAction, Lifecycle, now_ms
from worker_runtime.signing import SIG_FIELD

K = Keys()
SECRET = "fleet-control-secret-0123456789"
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _byconsole(
    args: list[str], url: str, tmp: Path, **extra: str
) -> subprocess.CompletedProcess[str]:
    env = env_with(url, XDG_CONFIG_HOME=str(tmp), **extra)
    return subprocess.run(
        [str(BYCONSOLE), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("user", ["viewer", "operator", "worker"])
def test_the_readme_shows_the_tested_acl_rules(user: str) -> None:
    assert readme_rule(user) in README


ADMIN_HASHES = {"worker_admin", "worker_admin_pattern"}
"""The admin hashes, and the SCAN pattern that finds them (rendered as a key would be)."""

OPERATOR_ONLY = {"audit_stream", "fleet_stream", "scale_targets", "scale_overrides", *ADMIN_HASHES}


@pytest.mark.parametrize("schema", ["v1", "v2"])
def test_the_worker_writes_every_key_but_the_operators(schema: str) -> None:
    keys = Keys(schema)  # type: ignore[arg-type]
    globs = [p.replace("[^", "[!") for p in keys.acl_patterns_worker_writes]
    admin_glob = keys.acl_patterns_worker_admin.replace("[^", "[!")
    checked = 0
    for name, member in inspect.getmembers(Keys):
        if name.startswith(("_", "acl_patterns")) or name in ("schema", "all_worker_keys"):
            continue
        value = getattr(keys, name)
        rendered = (
            list(value.values())
            if isinstance(value, dict)
            else [value]
            if isinstance(member, property)
            else [value("x-1"), value("w{7}"), value("admin")]
        )
        for key in rendered:
            checked += 1
            writable = any(fnmatch.fnmatchcase(key, p) for p in globs)
            assert writable is (name not in OPERATOR_ONLY), (name, key)
            assert fnmatch.fnmatchcase(key, admin_glob) is (name in ADMIN_HASHES), (name, key)
    assert checked > 60


async def test_the_worker_user_cannot_act_as_an_operator(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    await add_worker(admin, "w-1", ["chat"])
    await add_worker(admin, "w-2", ["chat"], instance="host-b:1")
    before = await dump_all(admin)
    url = secured.url("worker")
    for args in (
        ["worker", "suspend", "w-2", "--reason", "mine now"],
        ["scale", "chat", "0"],
        ["type", "pause", "chat", "--reason", "mine now"],
    ):
        out = _byconsole(args, url, tmp_path)
        assert out.returncode != 0, (args, out.stdout)
        assert "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "ACL user may not" in out.stderr, out.stderr
    # Refused by Redis before anything was written: no admin state, push or audit entry.
    assert await dump_all(admin) == before
    worker = Redis.from_url(url, decode_responses=True)
    try:
        for call in (
            worker.hset(K.worker_admin("w-2"), "lifecycle", "evicted"),
            worker.eval(
                "return redis.call('HSET', KEYS[1], 'lifecycle', 'evicted')",
                1,
                K.worker_admin("w-2"),
            ),
            worker.xadd(K.fleet_stream, {"kind": "command", "data": "{}"}),
            worker.hset(K.scale_targets, "chat", "0"),
            worker.delete(K.worker_admin("w-2"), K.worker_agent_types("w-2")),
        ):
            with pytest.raises(NoPermissionError):
                await call
        # What it may do: read them, and delete one admin hash (a drained worker's own).
        assert await worker.hgetall(K.worker_admin("w-2")) == {}
        assert await worker.delete(K.worker_admin("w-2")) == 0
    finally:
        await worker.aclose()


def _spawn(url: str, instance: str, log: Path, **extra: str) -> subprocess.Popen[bytes]:
    env = env_with(url, **{**FAST_ENV, **extra})
    args = [str(BIN / "worker-runtime"), "run", "bench.fault_handlers:noop", "--type", "chat"]
    args += ["--instance", instance]
    with log.open("ab") as out:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


async def _lifecycle(redis: Redis, worker_id: str) -> str | None:
    raw = await redis.get(K.worker_online(worker_id))
    return None if raw is None else str(json.loads(raw).get("lifecycle"))


async def _refusals(redis: Redis, worker_id: str) -> list[dict[str, Any]]:
    return [
        f
        for _, f in await stream_entries(redis, K.audit_stream)
        if f.get("action") == "refused-command" and f.get("target") == worker_id
    ]


def _forged(lifecycle: Lifecycle, stamp: int, *, force: bool = False) -> dict[str, str]:
    command = Command(
        action=CommandAction.LIFECYCLE,
        lifecycle=lifecycle,
        force=force,
        reason="forged",
        updated_at=stamp,
        updated_by="ops@corp",
    )
    return encode_command(command)


async def test_a_forged_push_is_not_applied_and_is_reported(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    log = tmp_path / "victim.log"
    victim = _spawn(secured.url("worker"), "vic", log, BYAI_CONTROL_SECRET=SECRET)
    attacker = Redis.from_url(secured.url("worker"), decode_responses=True)
    try:
        await eventually(lambda: admin.exists(K.worker_online("vic-r0")), timeout=20)
        stream = K.worker_stream("vic-r0")
        # Another worker's credential may append here (direct tasks), so it tries.
        await attacker.xadd(stream, _forged(Lifecycle.EVICTED, now_ms(), force=True))  # type: ignore[arg-type]
        fake = {**_forged(Lifecycle.SUSPENDED, now_ms()), SIG_FIELD: "0" * 64}
        await attacker.xadd(stream, fake)  # type: ignore[arg-type]

        async def reported() -> bool:
            return (
                len(await _refusals(admin, "vic-r0")) >= 1
                and log.read_text().count("refused pushed command") >= 2
            )

        await eventually(reported, timeout=10)
        details = " ".join(f["details"] for f in await _refusals(admin, "vic-r0"))
        assert "unsigned" in details and "signature does not match" in details
        assert await _lifecycle(admin, "vic-r0") == "active"
        assert victim.poll() is None
        reported_before = len(await _refusals(admin, "vic-r0"))
        # The operator's command, signed with the fleet's secret, is applied.
        out = _byconsole(
            ["worker", "suspend", "vic-r0", "--wait"],
            secured.url("operator"),
            tmp_path,
            BYAI_CONTROL_SECRET=SECRET,
        )
        assert out.returncode == 0, out.stderr
        assert await _lifecycle(admin, "vic-r0") == "suspended"
        assert len(await _refusals(admin, "vic-r0")) == reported_before  # not refused
    finally:
        await attacker.aclose()
        stop_process(victim, signal.SIGTERM)
    text = log.read_text()
    assert SECRET not in text and "Traceback" not in text


async def test_a_far_future_stamp_does_not_block_later_commands(
    secured: Secured, admin: Redis, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    worker = _spawn(secured.url("worker"), "fut", log)  # no secret: unsigned pushes accepted
    attacker = Redis.from_url(secured.url("worker"), decode_responses=True)
    ten_years = 10 * 365 * 86_400_000
    try:
        await eventually(lambda: admin.exists(K.worker_online("fut-r0")), timeout=20)
        forged = _forged(Lifecycle.SUSPENDED, now_ms() + ten_years)
        await attacker.xadd(K.worker_stream("fut-r0"), forged)  # type: ignore[arg-type]
        await eventually(lambda: _has_refusal(admin, "fut-r0"), timeout=10)
        details = (await _refusals(admin, "fut-r0"))[0]["details"]
        assert "a stamp from the future" in details
        assert await _lifecycle(admin, "fut-r0") == "active"
        for verb, state in (("suspend", "suspended"), ("resume", "active")):
            out = _byconsole(
                ["worker", verb, "fut-r0", "--wait"], secured.url("operator"), tmp_path
            )
            assert out.returncode == 0, (verb, out.stderr)
            assert await _lifecycle(admin, "fut-r0") == state
    finally:
        await attacker.aclose()
        stop_process(worker, signal.SIGTERM)
    assert "Traceback" not in log.read_text()


async def _has_refusal(redis: Redis, worker_id: str) -> bool:
    return bool(await _refusals(redis, worker_id))


@pytest.mark.parametrize("schema", ["v1", "v2"])
async def test_redis_applies_the_worker_patterns_as_written(
    secured: Secured, admin: Redis, schema: str
) -> None:
    """Redis's globs (``[^…]``), not only fnmatch's, leave out exactly the operator's keys."""
    keys = Keys(schema)  # type: ignore[arg-type]
    acl: Any = admin  # ACL commands are untyped in redis-py
    await acl.execute_command("ACL", "SETUSER", *setuser_args("worker", keys))
    worker = Redis.from_url(secured.url("worker"), decode_responses=True)
    try:
        for key in (
            keys.worker_online("w{1}"),
            keys.worker_stream("w-1"),
            keys.type_stream("chat"),
            keys.admin_workers,
            keys.type_pauses,
            keys.offline_since,
        ):
            # A write (DEL of a key that does not exist) the worker may make.
            assert await worker.eval("return redis.call('DEL', KEYS[1])", 1, key) == 0
        for key in (keys.worker_admin("w{1}"), keys.worker_admin("w-1"), keys.fleet_stream):
            with pytest.raises(NoPermissionError):
                await worker.eval("return redis.call('DEL', KEYS[1])", 1, key)
            assert await worker.exists(key) == 0  # still readable
    finally:
        await worker.aclose()
        await acl.execute_command("ACL", "SETUSER", *setuser_args("worker"))
