"""The control plane: lifecycle commands both ways between byconsole/worker_runtime
and by-framework, on a real redis-server and a real 3-node cluster.

Every command travels by push and is applied at once (well under the 5 s heartbeat
that the pull channel would need), is visible in byconsole, is never dead-lettered,
and leaves no ERROR in any log.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.integration.runtime_helpers import eventually
from tests.interop.control import (
    PUSH_BOUND_S,
    byf_applied,
    our_applied,
    record_latency,
    time_until,
    watch_push,
)
from tests.interop.harness import Fleet, wait_for
from worker_runtime.models import AdminState

SLOW_BYF_BEAT = {"BYF_HEARTBEAT": "5", "BYF_LEASE_TTL": "30"}
SLOW_OUR_BEAT = {"BYAI_HEARTBEAT_INTERVAL": "5", "BYAI_LEASE_TTL": "30"}


async def _lease_of(fleet: Fleet, worker_id: str) -> bool:
    return bool(await fleet.redis.exists(fleet.keys.worker_online(worker_id)))


def _listed(fleet: Fleet, worker_id: str, *flags: str) -> dict[str, Any]:
    done = fleet.byconsole("worker", "list", "--json", *flags)
    assert done.returncode == 0, done.stderr
    rows = {w["worker_id"]: w for w in json.loads(done.stdout)}
    assert worker_id in rows, sorted(rows)
    row: dict[str, Any] = rows[worker_id]
    return row


async def _byconsole_push_to_byf(
    fleet: Fleet, worker_id: str, *args: str
) -> tuple[tuple[Any, int], float]:
    """Run ``byconsole worker ARGS --json``: its JSON and exit code, and the latency (ms)."""
    stream = fleet.keys.worker_stream(worker_id)
    watcher = asyncio.create_task(
        watch_push(fleet.redis, stream, lambda eid: byf_applied(fleet.redis, stream, eid))
    )
    await asyncio.sleep(0.05)  # the watcher has read the stream's last entry
    done = await asyncio.to_thread(fleet.byconsole, "worker", *args, "--json")
    _, fields, latency = await watcher
    # Exactly by-framework's envelope: one field, data = {action_type, header, body}.
    assert set(fields) == {"data"}
    record_latency(fleet.log_dir, f"byconsole->by-framework ({fleet.kind})", args[0], latency)
    return (json.loads(done.stdout) if done.stdout else None, done.returncode), latency


async def test_byconsole_drives_a_by_framework_worker_by_push(fleet: Fleet) -> None:
    worker = fleet.start_byf_worker("byf-1", ["echo"], **SLOW_BYF_BEAT)
    second = fleet.start_byf_worker("byf-2", ["echo"], **SLOW_BYF_BEAT)
    await asyncio.to_thread(wait_for, lambda: "Heartbeat started" in worker.log(), 30)
    await asyncio.to_thread(wait_for, lambda: "Heartbeat started" in second.log(), 30)
    assert await _lease_of(fleet, "byf-1")
    # by-framework wrote its routing set under the name our key factory spells (v2 on
    # the cluster: registry:agent_type:{echo}:workers).
    assert await fleet.redis.sismember(fleet.keys.type_workers("echo"), "byf-1")
    row = _listed(fleet, "byf-1")
    assert (row["runtime"], row["status"], row["command_state"]) == ("by-framework", "online", None)

    # suspend: applied by push, shown as unconfirmable; --wait has its own outcome.
    (doc, code), latency = await _byconsole_push_to_byf(
        fleet, "byf-1", "suspend", "byf-1", "--reason", "interop", "--wait"
    )
    assert code == 3, doc
    assert (doc["state"], doc["runtime"], doc["confirmation"]) == (
        "unconfirmable",
        "by-framework",
        "none",
    )
    assert latency < PUSH_BOUND_S * 1000
    await asyncio.to_thread(wait_for, lambda: "Worker suspended by admin: interop" in worker.log())
    row = _listed(fleet, "byf-1")
    assert (row["lifecycle"], row["command_state"]) == ("suspended", "unconfirmable")
    assert not await fleet.redis.sismember(fleet.keys.type_workers("echo"), "byf-1")

    (doc, code), latency = await _byconsole_push_to_byf(fleet, "byf-1", "resume", "byf-1")
    assert (code, doc["state"]) == (0, "unconfirmable")
    assert latency < PUSH_BOUND_S * 1000
    await asyncio.to_thread(wait_for, lambda: "Worker resumed by admin" in worker.log())
    # Back in routing at once, as by-framework's own resume does (its beat is 5 s away).
    assert await fleet.redis.sismember(fleet.keys.type_workers("echo"), "byf-1")

    # Denylists are one set for both admins (by-framework has no push for them).
    fleet.byf_admin("deny", "byf-1", "--type", "echo")
    denied = fleet.byconsole("type", "denylist", "echo", "--json")
    assert json.loads(denied.stdout) == ["byf-1"]
    assert fleet.byconsole("type", "allow", "echo", "byf-1").returncode == 0
    assert fleet.byf_admin("denylist", "--type", "echo")["denied"] == []

    # drain does not exist in by-framework: written as its graceful equivalent, an
    # eviction without force (its runner waits for in-flight tasks), and said so.
    drained = fleet.byconsole("worker", "drain", "byf-2", "--json")
    assert drained.returncode == 0, drained.stderr
    doc = json.loads(drained.stdout)
    assert (doc["action"], doc["requested"]) == ("evict", "drain")
    await asyncio.to_thread(
        wait_for, lambda: "eviction requested by admin (force=False)" in second.log()
    )
    assert second.wait_exit(20) is not None
    admin = AdminState.parse(await fleet.redis.hgetall(fleet.keys.worker_admin("byf-1")))
    assert admin.lifecycle == "active"

    # evict --force: force survives the trip; confirmed only by the worker's own exit.
    (doc, code), latency = await _byconsole_push_to_byf(
        fleet, "byf-1", "evict", "byf-1", "--force", "--wait", "--timeout", "30"
    )
    assert (code, doc["state"], doc["confirmation"]) == (0, "applied", "lease_gone"), doc
    assert latency < PUSH_BOUND_S * 1000
    assert "eviction requested by admin (force=True)" in worker.log()
    assert worker.wait_exit(20) is not None

    # It removed itself from the registry; the admin-state index keeps it listed.
    assert not await fleet.redis.sismember(fleet.keys.workers, "byf-1")
    online_only = json.loads(fleet.byconsole("worker", "list", "--json").stdout)
    assert "byf-1" not in {w["worker_id"] for w in online_only}
    row = _listed(fleet, "byf-1", "--all")
    assert (row["status"], row["lifecycle"]) == ("offline", "evicted")
    snapshot = json.loads(fleet.byconsole("--snapshot", "--format", "json").stdout)
    assert "byf-1" in {w["worker_id"] for w in snapshot["workers"]}
    # ... and resumable: by-framework's own admin then lets it rejoin.
    resumed = fleet.byconsole("worker", "resume", "byf-1", "--json")
    assert resumed.returncode == 0 and json.loads(resumed.stdout)["state"] == "offline"
    assert fleet.byf_admin("state", "byf-1")["state"]["lifecycle"] == "active"

    assert fleet.error_lines() == {}


async def test_by_framework_admin_drives_our_worker_by_push(fleet: Fleet) -> None:
    ours = fleet.start_our_worker("wr", ["echo"], env=SLOW_OUR_BEAT)
    wid = "wr-r0"
    await eventually(lambda: _lease_of(fleet, wid), timeout=30)
    stream = fleet.keys.worker_stream(wid)
    # The Chinese start-up line, beside the English one (logged just after registering).

    async def start_logged() -> str:
        text = ours.log()
        return text if "instance wr started: role=all" in text else ""

    started = await eventually(start_logged, timeout=30)
    assert "Worker 角色: all, 实例名称: wr, 已启用模块: [consumer, heartbeat" in started

    async def confirmed(entry_id: str) -> bool:
        # by-framework writes the admin hash, then pushes: the hash stamps the command.
        admin = AdminState.parse(await fleet.redis.hgetall(fleet.keys.worker_admin(wid)))
        stamp = admin.updated_at or 0
        return stamp > 0 and await our_applied(fleet.redis, fleet.keys, wid, stamp)

    async def applied_after(action: str, *args: str) -> float:
        """Run by-framework's WorkerManager; ms from its push to our confirmation."""
        watcher = asyncio.create_task(watch_push(fleet.redis, stream, confirmed))
        await asyncio.sleep(0.05)
        await asyncio.to_thread(fleet.byf_admin, action, wid, *args)
        _, fields, latency = await watcher
        assert json.loads(fields["data"])["action_type"].endswith("_WORKER")
        direction = f"by-framework->worker_runtime ({fleet.kind})"
        record_latency(fleet.log_dir, direction, action, latency)
        return latency

    assert await applied_after("suspend", "--reason", "from byf") < PUSH_BOUND_S * 1000
    row = _listed(fleet, wid)
    assert (row["runtime"], row["lifecycle"], row["applied_lifecycle"]) == (
        "worker_runtime",
        "suspended",
        "suspended",
    )
    assert row["command_state"] == "applied"
    assert not await fleet.redis.sismember(fleet.keys.type_workers("echo"), wid)

    assert await applied_after("resume") < PUSH_BOUND_S * 1000
    assert _listed(fleet, wid)["applied_lifecycle"] == "active"

    # by-admin (the CLI) too, and it lists our worker with the state it applied.
    done = fleet.by_admin("worker", "suspend", wid, "--reason", "by-admin")
    assert done.returncode == 0, done.stderr
    stamp = AdminState.parse(await fleet.redis.hgetall(fleet.keys.worker_admin(wid))).updated_at
    assert stamp is not None
    await time_until(lambda: our_applied(fleet.redis, fleet.keys, wid, stamp))
    listed = json.loads(fleet.by_admin("worker", "list", "--json").stdout)
    assert [(w["worker_id"], w["lifecycle"]) for w in listed] == [(wid, "suspended")]

    # A forced eviction keeps its force: the replica cancels and leaves at once.
    await asyncio.to_thread(fleet.byf_admin, "evict", wid, "--force", "--reason", "bye")
    await time_until(lambda: _gone(fleet, wid))
    assert f"{wid}: suspended -> evicted [force] (bye)" in ours.log()

    # Nothing was dead-lettered, by either side, and no ERROR anywhere.
    assert await fleet.redis.xlen(fleet.keys.dead_letter_stream("echo")) == 0
    assert "malformed" not in ours.log()
    assert fleet.error_lines() == {}


async def _gone(fleet: Fleet, worker_id: str) -> bool:
    return not await fleet.redis.exists(fleet.keys.worker_online(worker_id))
