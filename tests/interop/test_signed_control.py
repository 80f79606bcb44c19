"""by-framework's admin drives a worker that requires signed pushes.

by-framework's ``WorkerManager`` (by_framework/admin/worker_manager.py,
``suspend_worker`` / ``evict_worker``: write the admin hash, then push the envelope)
signs nothing. A worker of ours holding the fleet's control secret reads such a push
as "read the admin hash", so by-framework's commands still apply by push (well before
the 5 s heartbeat), except ``force``, which an unsigned push cannot grant.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.runtime_helpers import eventually
from tests.interop.control import PUSH_BOUND_S, our_applied, time_until
from tests.interop.harness import Fleet
from worker_runtime.models import AdminState

SLOW_OUR_BEAT = {"BYAI_HEARTBEAT_INTERVAL": "5", "BYAI_LEASE_TTL": "30"}
SECRET = "fleet-control-secret-0123456789"


# A single node is enough: signing does not depend on the key schema (the cluster runs
# the same push path in test_control.py).
@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_by_framework_admin_drives_a_worker_with_a_control_secret(fleet: Fleet) -> None:
    env = {**SLOW_OUR_BEAT, "BYAI_CONTROL_SECRET": SECRET}
    ours = fleet.start_our_worker("ws", ["echo"], env=env)
    wid = "ws-r0"
    await eventually(lambda: fleet.redis.exists(fleet.keys.worker_online(wid)), timeout=30)

    async def applied() -> bool:
        admin = AdminState.parse(await fleet.redis.hgetall(fleet.keys.worker_admin(wid)))
        stamp = admin.updated_at or 0
        return stamp > 0 and await our_applied(fleet.redis, fleet.keys, wid, stamp)

    for action, args in (("suspend", ["--reason", "from byf"]), ("resume", [])):
        sent = await asyncio.to_thread(fleet.byf_admin, action, wid, *args)
        done = await time_until(applied)
        assert done - float(sent["sent_ms"]) < PUSH_BOUND_S * 1000, action
    await asyncio.to_thread(fleet.byf_admin, "evict", wid, "--force", "--reason", "bye")
    await eventually(lambda: _gone(fleet, wid), timeout=15)
    log = ours.log()
    assert f"{wid}: active -> evicted (bye)" in log  # graceful: no [force]
    assert "force ignored" in log
    assert SECRET not in log
    assert fleet.error_lines() == {}


async def _gone(fleet: Fleet, worker_id: str) -> bool:
    return not await fleet.redis.exists(fleet.keys.worker_online(worker_id))
