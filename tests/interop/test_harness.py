"""The harness itself: a real by-framework worker registers and its own admin drives it."""

from __future__ import annotations

import json

from tests.interop.harness import Fleet, wait_for


async def test_byf_worker_registers_and_obeys_its_own_admin(fleet: Fleet) -> None:
    worker = fleet.start_byf_worker("byf-a", ["echo"])

    def listed() -> list[dict[str, object]]:
        done = fleet.by_admin("worker", "list", "--json")
        rows: list[dict[str, object]] = json.loads(done.stdout or "[]")
        return [r for r in rows if r["worker_id"] == "byf-a"]

    rows = wait_for(listed, timeout=20)
    assert rows[0]["agent_types"] == ["echo"]
    assert await fleet.redis.sismember(fleet.keys.workers, "byf-a")

    fleet.byf_admin("suspend", "byf-a", "--reason", "harness")
    assert fleet.byf_admin("state", "byf-a")["state"]["lifecycle"] == "suspended"
    wait_for(lambda: "suspended by admin" in worker.log(), timeout=5)

    fleet.byf_admin("evict", "byf-a")
    assert worker.wait_exit(20) is not None, worker.log()
    assert fleet.error_lines() == {}
