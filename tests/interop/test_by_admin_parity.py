"""Scripts written against by-admin run unchanged against byconsole.

The same commands (names, arguments, short options) and the same ``--json`` shapes,
checked by running both programs on one mixed fleet (a by-framework worker and one of
ours) on a real redis-server and cluster.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.integration.runtime_helpers import eventually
from tests.interop.harness import Fleet

BY_ADMIN_FIELDS = ("worker_id", "agent_types", "last_seen", "ip_address", "lifecycle")


def _json(done: Any) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """by-admin's fields of one worker; ``last_seen`` only as a fact (both read one lease)."""
    out = {name: row[name] for name in BY_ADMIN_FIELDS}
    out["agent_types"] = sorted(out["agent_types"])
    out["last_seen"] = isinstance(row["last_seen"], int) and row["last_seen"] > 0
    out["lifecycle_reason"] = row["lifecycle_reason"]
    return out


# Output shapes do not depend on the backend (the key schema is covered by the other
# interop tests on both): one run keeps the suite short.
@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_by_admin_commands_and_json_shapes_work_on_byconsole(fleet: Fleet) -> None:
    fleet.start_byf_worker("byf-p", ["echo", "sum"])
    fleet.start_our_worker("wp", ["echo"])

    async def both_online() -> bool:
        k = fleet.keys
        return bool(
            await fleet.redis.exists(k.worker_online("byf-p"), k.worker_online("wp-r0")) == 2
        )

    await eventually(both_online, timeout=30)

    # The same write commands, spelled as for by-admin (short options included).
    for args in (
        ["worker", "suspend", "byf-p", "-r", "parity check"],
        ["type", "deny", "sum", "byf-p"],
        ["type", "deny", "echo", "wp-r0"],
        ["worker", "suspend", "wp-r0", "--reason", "ours too"],
        ["worker", "resume", "wp-r0"],
    ):
        done = fleet.byconsole(*args)
        assert done.returncode == 0, (args, done.stderr)

    # The reads change nothing: both programs' run side by side.
    reads: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
        "theirs list": (fleet.by_admin, ("worker", "list", "--json")),
        "ours list": (fleet.byconsole, ("worker", "list", "--json")),
        "theirs sum": (fleet.by_admin, ("worker", "list", "-t", "sum", "--json")),
        "ours sum": (fleet.byconsole, ("worker", "list", "-t", "sum", "--json")),
    }
    for wid in ("byf-p", "wp-r0"):
        reads[f"theirs info {wid}"] = (fleet.by_admin, ("worker", "info", wid, "--json"))
        reads[f"ours info {wid}"] = (fleet.byconsole, ("worker", "info", wid, "--json"))
    for agent_type in ("sum", "echo"):
        denylist = ("type", "denylist", agent_type, "--json")
        reads[f"theirs denylist {agent_type}"] = (fleet.by_admin, denylist)
        reads[f"ours denylist {agent_type}"] = (fleet.byconsole, denylist)
    outs = await asyncio.gather(*(asyncio.to_thread(run, *args) for run, args in reads.values()))
    got = {name: _json(done) for name, done in zip(reads, outs, strict=True)}

    # worker list --json: the same workers, by-admin's fields with the same values.
    theirs = {r["worker_id"]: _comparable(r) for r in got["theirs list"]}
    ours = {r["worker_id"]: _comparable(r) for r in got["ours list"]}
    assert set(theirs) == {"byf-p", "wp-r0"}
    assert ours == theirs
    assert theirs["byf-p"]["lifecycle_reason"] == "parity check"

    # --type / -t filters the same way.
    theirs_sum, ours_sum = got["theirs sum"], got["ours sum"]
    assert [r["worker_id"] for r in ours_sum] == [r["worker_id"] for r in theirs_sum] == ["byf-p"]

    # worker info --json: by-admin's fields at the top level.
    for wid in ("byf-p", "wp-r0"):
        assert _comparable(got[f"ours info {wid}"]) == _comparable(got[f"theirs info {wid}"])

    # type denylist --json: a plain list of worker ids, in both.
    for agent_type, expected in (("sum", ["byf-p"]), ("echo", ["wp-r0"])):
        assert got[f"theirs denylist {agent_type}"] == expected
        assert got[f"ours denylist {agent_type}"] == expected

    # allow and evict --force, as by-admin spells them.
    assert fleet.byconsole("type", "allow", "sum", "byf-p").returncode == 0
    assert _json(fleet.by_admin("type", "denylist", "sum", "--json")) == []
    assert fleet.byconsole("worker", "evict", "byf-p", "--force").returncode == 0
    assert fleet.error_lines() == {}
