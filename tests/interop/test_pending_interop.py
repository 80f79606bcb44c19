"""Pending entries and dead letters against real by-framework processes: a by-framework
client's task held by our real worker is listed and dead-lettered (its envelope kept),
and by-framework's own wakeup controller's control-plane dead letter is listed."""

from __future__ import annotations

import asyncio
import json

from tests.interop.harness import Fleet
from tests.interop.test_interop_data import _run_byf, _wait_online


async def test_a_byf_clients_task_held_by_our_worker_is_listed_and_dead_lettered(
    fleet: Fleet,
) -> None:
    fleet.start_our_worker(
        "holder",
        ["stuck"],
        handler="tests.interop.data_handlers:busy",
        env={"INTEROP_BUSY": "120"},
    )
    await _wait_online(fleet, "holder-r0")
    # The client gives up at once; its task stays with our worker, which holds it.
    sent = await asyncio.to_thread(
        _run_byf, fleet, "byf_client.py", "stuck", "1", "--policy", "FAIL_FAST", "--timeout", "1"
    )
    message_id = sent["messages"][0]["message_id"]

    async def listed() -> dict[str, object]:
        for _ in range(200):
            done = await asyncio.to_thread(fleet.byconsole, "type", "pending", "stuck", "--json")
            doc = json.loads(done.stdout)
            if doc["pending"]:
                return dict(doc["pending"][0])
            await asyncio.sleep(0.1)
        raise AssertionError("never pending")

    entry = await listed()
    assert entry["kind"] == "by-framework" and entry["task_id"] == message_id
    assert entry["consumer"] == "holder-r0" and entry["owner_online"] is True
    assert entry["deliveries"] == 1 and entry["action_type"] == "ASK_AGENT"

    moved = await asyncio.to_thread(
        fleet.byconsole,
        "type",
        "dead-letter",
        "stuck",
        str(entry["id"]),
        "--reason",
        "hung",
        "--json",
    )
    assert moved.returncode == 0, moved.stderr
    dead = json.loads(
        (await asyncio.to_thread(fleet.byconsole, "dead", "list", "stuck", "--json")).stdout
    )["dead"]
    assert [(d["task_id"], d["worker_id"]) for d in dead] == [(message_id, "holder-r0")]
    envelope = json.loads(
        (
            await asyncio.to_thread(
                fleet.byconsole, "dead", "show", "stuck", dead[0]["id"], "--json"
            )
        ).stdout
    )["fields"]["data"]
    assert json.loads(envelope)["action_type"] == "ASK_AGENT"  # kept as by-framework wrote it
    still = json.loads(
        (await asyncio.to_thread(fleet.byconsole, "type", "pending", "stuck", "--json")).stdout
    )
    assert still["total"] == 0


async def test_by_frameworks_control_plane_dead_letters_are_listed(fleet: Fleet) -> None:
    woke = await asyncio.to_thread(_run_byf, fleet, "byf_wakeup.py", "sleepy")
    done = await asyncio.to_thread(fleet.byconsole, "dead", "list", "--json")
    assert done.returncode == 0, done.stderr
    control = json.loads(done.stdout)["control_plane"]
    assert control["total"] == 1 and control["read_only"] is True
    (letter,) = control["dead"]
    assert letter["task_id"] == woke["execution_id"] and letter["type"] == "sleepy"
    assert letter["source"] == "control-plane"
    assert letter["error"] == "FAILED: no capacity in region eu-1"
