"""Hostile strings in every field ``byconsole --snapshot`` shows: literal, never obeyed.

Each displayed field gets its own hostile value: Rich markup (including a Textual
action link), ESC/CSI/OSC sequences, C1 controls, BEL, right-to-left overrides and
isolates, zero-width characters, and a 10 kB worker id. The table must show each
value as text (markup literal, controls as visible escapes, cut with an ellipsis),
carry no raw control or invisible character at all, and the JSON document must give
back every value exactly. (The TUI side is tests/tui/test_navigation.py.)
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from redis.asyncio import Redis

from byconsole.render.types import DENIED_LIMIT
from byconsole.render.workers import REASON_WIDTH
from byconsole.text import safe_text
from tests.integration.cli_helpers import BYCONSOLE, cli_env
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms

K = Keys()


def hostile(tag: str) -> str:
    """A value that would restyle, click, retitle, clear, reorder or hide if obeyed."""
    return (
        f"[bold red]{tag}[/][@click=app.quit]q[/]"
        "\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[31m\x9b1m\x85"
        f"\u202e{tag[::-1]}\u2066x\u2069\u200b\u200d\ufeff"
    )


LONG_ID = hostile("wid") + "W" * 10_000
FIELDS = {
    # field of a worker object -> (value, width the table cuts it to)
    "instance_id": (hostile("inst"), 60),
    "role": (hostile("role"), 20),
    "ip_address": (hostile("ip"), 45),
    "app_version": (hostile("ver"), 30),
    "reason": (hostile("why"), REASON_WIDTH),  # one cut for both front ends
    "lifecycle": (hostile("life"), 16),
}
TYPE = hostile("type")
OTHER = "w-plain"

# Nothing that changes what a terminal shows may reach it raw.
RAW_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)


async def _plant(redis: Redis) -> None:
    now = now_ms()
    values = {f: v for f, (v, _) in FIELDS.items()}
    lease = {
        "worker_id": LONG_ID,
        "instance_id": values["instance_id"],
        "hostname": hostile("host"),
        "role": values["role"],
        "ip_address": values["ip_address"],
        "app_version": values["app_version"],
        "agent_types": [TYPE],
        "last_seen": now,
        "heartbeat_interval": 5,
    }
    await redis.sadd(K.workers, LONG_ID, OTHER)
    await redis.sadd(K.agent_types, TYPE)
    await redis.sadd(K.worker_agent_types(LONG_ID), TYPE)
    await redis.set(K.worker_online(LONG_ID), json.dumps(lease), px=60_000)
    await redis.hset(
        K.worker_admin(LONG_ID),
        mapping={
            "lifecycle": values["lifecycle"],
            "reason": values["reason"],
            "updated_at": now,
            "updated_by": hostile("op"),
        },
    )
    # The hostile worker is denied for the hostile type; an instance override and a
    # leader named by hostile ids; the instance registry holds the hostile instance.
    await redis.sadd(K.type_denied(TYPE), LONG_ID)
    await redis.hset(K.scale_overrides(TYPE), values["instance_id"], "2")
    await redis.hset(K.scale_targets, TYPE, "3")
    await redis.zadd(K.instances, {values["instance_id"]: now})
    await redis.set(
        K.instance_online(values["instance_id"]),
        json.dumps(
            {"instance_id": values["instance_id"], "role": values["role"], "last_seen": now}
        ),
        px=60_000,
    )
    await redis.set(K.leader_lock, json.dumps({"instance_id": values["instance_id"], "epoch": 7}))


def _byconsole(args: list[str], env: dict[str, str]) -> str:
    out = subprocess.run(
        [str(BYCONSOLE), *args], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    return out.stdout


def _assert_inert(text: str) -> None:
    raw = RAW_CONTROL.findall(text.replace("\n", ""))
    assert not raw, sorted({hex(ord(c)) for c in raw})


async def test_snapshot_table_shows_every_field_literally(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    await _plant(redis)
    # Wide enough that no cell is folded: each one appears whole on its line.
    env = {**cli_env(redis_url, tmp_path), "COLUMNS": "3000"}
    table = _byconsole(["--snapshot"], env)
    _assert_inert(table)
    # Markup is text: the tags are there, Rich did not consume them.
    assert "[bold red]inst[/][@click=app.quit]q[/]" in table
    for field, (value, width) in FIELDS.items():
        assert safe_text(value, width) in table, field
    assert safe_text(LONG_ID, 80) in table  # the 10 kB id, cut with an ellipsis
    assert safe_text(TYPE, 80) in table
    assert safe_text(LONG_ID, DENIED_LIMIT) in table  # in the type's denylist column
    assert safe_text(FIELDS["instance_id"][0], 80) in table  # instances table and leader
    assert "\\x1b]52;c;cHduZWQ=\\x07" in table and "\\u202e" in table and "\\u200b" in table

    for args in (["worker", "list"], ["worker", "info", LONG_ID], ["type", "denylist", TYPE]):
        shown = _byconsole(args, env)
        _assert_inert(shown)
        assert "[bold red]" in shown, args


async def test_snapshot_json_gives_every_value_back_exactly(
    redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    await _plant(redis)
    out = _byconsole(["--snapshot", "--format", "json"], cli_env(redis_url, tmp_path))
    _assert_inert(out)  # JSON escapes them: the document itself is inert text
    doc: dict[str, Any] = json.loads(out)
    (worker,) = [w for w in doc["workers"] if w["worker_id"] != OTHER]
    assert worker["worker_id"] == LONG_ID and len(worker["worker_id"]) > 10_000
    for field, (value, _) in FIELDS.items():
        assert worker[field] == value, field
    assert worker["hostname"] == hostile("host")
    assert worker["agent_types"] == [TYPE]
    assert worker["denied_types"] == [TYPE]
    (type_,) = doc["types"]
    assert type_["name"] == TYPE and type_["denied"] == [LONG_ID]
    assert type_["overrides"] == {FIELDS["instance_id"][0]: 2}
    (instance,) = doc["instances"]
    assert instance["instance_id"] == FIELDS["instance_id"][0]
    assert instance["role"] == FIELDS["role"][0]
    detail = json.loads(
        _byconsole(["worker", "info", LONG_ID, "--json"], cli_env(redis_url, tmp_path))
    )
    assert detail["admin"]["updated_by"] == hostile("op")
