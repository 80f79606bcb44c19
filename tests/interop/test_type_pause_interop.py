"""Pausing a type served by a real by-framework worker and one of ours (README, Pausing a type).

by-framework has no pause: ``byconsole type pause`` puts its workers on the type's
denylist (its runner leaves the stream out of XREADGROUP from its next heartbeat on)
and the resume takes off exactly those, never a deny the operator set by hand. Tasks
a real by-framework client sends while the type is paused stay undelivered; after the
resume each runs exactly once.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.interop.harness import Fleet
from tests.interop.test_interop_data import _groups, _run_byf, _wait_group, _wait_online

HANDLER = "tests.interop.data_handlers:answer"
BYF_BLOCK_S = 2.0
"""by-framework's blocking XREADGROUP (``stream_block_ms``): a read already waiting when
the denylist changes may still deliver one entry."""


def _byconsole_json(fleet: Fleet, *args: str) -> tuple[int, Any]:
    done = fleet.byconsole(*args, "--json")
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


async def _undelivered(fleet: Fleet, agent_type: str) -> tuple[int, int]:
    groups = await _groups(fleet, agent_type)
    return sum(int(g["lag"] or 0) for g in groups), sum(int(g["pending"]) for g in groups)


async def test_pause_denylists_by_framework_workers_and_resume_lifts_only_those(
    fleet: Fleet,
) -> None:
    agent_type = f"paused-{fleet.kind}"
    theirs = fleet.start_byf_worker("byf-pz", [agent_type])
    fleet.start_byf_worker("byf-hz", [agent_type])
    await _wait_online(fleet, "byf-pz")
    await _wait_online(fleet, "byf-hz")
    await _wait_group(fleet, agent_type, "agent_engines")
    fleet.start_our_worker("pz", [agent_type], handler=HANDLER)
    await _wait_online(fleet, "pz-r0")
    # The operator's own deny, set before the pause: it must survive the resume.
    assert fleet.byconsole("type", "deny", agent_type, "byf-hz").returncode == 0

    code, doc = _byconsole_json(fleet, "type", "pause", agent_type, "--reason", "interop", "--wait")
    assert code == 3, doc  # by-framework cannot confirm: exit 3, as for its workers
    assert (doc["state"], doc["confirmed"]) == ("applied", ["pz-r0"])
    assert (doc["denylisted"], doc["kept_denied"]) == (["byf-pz"], ["byf-hz"])
    assert "by-framework cannot apply a pause" in doc["note"]
    denied = fleet.byf_admin("denylist", "--type", agent_type)["denied"]
    assert sorted(denied) == ["byf-hz", "byf-pz"]  # by-framework's admin sees the same set
    # One heartbeat for by-framework to refresh its denylist, plus a read in flight.
    await asyncio.sleep(1.0 + BYF_BLOCK_S + 1.0)

    count = 4
    client = asyncio.create_task(
        asyncio.to_thread(
            _run_byf, fleet, "byf_client.py", agent_type, str(count), "--timeout", "60"
        )
    )
    for _ in range(300):
        if (await _undelivered(fleet, agent_type))[0] == count or client.done():
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(3.0)  # three by-framework heartbeats, one more blocking read
    assert await _undelivered(fleet, agent_type) == (count, 0)

    code, doc = _byconsole_json(fleet, "type", "resume", agent_type, "--wait")
    assert code == 3, doc
    assert (doc["state"], doc["confirmed"], doc["denylisted"]) == ("applied", ["pz-r0"], ["byf-pz"])
    denied = fleet.byf_admin("denylist", "--type", agent_type)["denied"]
    assert denied == ["byf-hz"]  # exactly the pause's deny lifted

    result = await client
    records = [m["record"] for m in result["messages"]]
    assert all(m["ends"] == 1 and len(m["answers"]) == 1 for m in result["messages"]), result
    assert all(r["status"] == "COMPLETED" for r in records), records
    assert {r["worker_id"] for r in records} <= {"byf-pz", "pz-r0"}
    assert await _undelivered(fleet, agent_type) == (0, 0)
    assert theirs.alive()
