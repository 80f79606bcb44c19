"""The pure rules behind the outage fixes: depth never trusts a lag alone, a stall is
noticed from the clock, and only a command that cannot have run is sent again."""

from __future__ import annotations

import time
from typing import Any

import fakeredis
import pytest
from redis.exceptions import BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from worker_runtime.messages import encode_task
from worker_runtime.models import Task
from worker_runtime.outage import never_ran, ride_out, submit_once, task_queued
from worker_runtime.replies import group_info, id_key, queue_health
from worker_runtime.stall import StallWatch, stall_threshold


def test_a_group_that_read_the_newest_entry_has_nothing_undelivered() -> None:
    # Redis 7.0 after an AOF rewrite + restart: lag 1635 on a fully consumed stream.
    groups = [{"name": "g", "lag": 1635, "pending": 0, "last-delivered-id": "9-3"}]
    assert group_info(groups, length=40, last_id="9-3").depth == 0
    assert group_info(groups, length=40, last_id="9-4").depth == 40  # bounded by the stream
    assert group_info(groups, length=40).depth == 40  # newest entry unknown: the bound
    assert group_info(groups, length=4000).depth == 1635


def test_the_script_reply_bounds_a_lag_by_what_the_stream_holds() -> None:
    reply: list[Any] = [1, None, 12, None, ["g", 2, 1635, "5-0", 10, 1, [["c", 2]]]]
    group, length, _ = queue_health(reply)
    assert (group.depth, length) == (12 - 2, 12)
    consumed: list[Any] = [1, None, 12, None, ["g", 0, 1635, None, -1, -1, []]]
    assert queue_health(consumed)[0].depth == 0


@pytest.mark.parametrize(
    ("raw", "key"),
    [("1-2", (1, 2)), ("7", (7, 0)), ("x-1", None), (None, None), ("1-", (1, 0)), (5, None)],
)
def test_entry_ids_compare_as_pairs(raw: Any, key: tuple[int, int] | None) -> None:
    assert id_key(raw) == key


def test_a_stall_is_seen_from_the_clock_before_the_watch_ticks() -> None:
    watch = StallWatch(threshold=0.05, tick=0.01)
    before = time.monotonic()
    assert not watch.since(before)
    watch.last_tick -= 1.0  # the loop did not run for a second
    assert watch.since(before) and watch.stalls == 1
    later = time.monotonic()
    assert not watch.since(later)  # that stall ended before "later"
    assert watch.since(before)


def test_only_a_command_that_cannot_have_run_is_sent_again() -> None:
    refused = RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    assert never_ran(refused) and never_ran(BusyLoadingError("loading"))
    assert not never_ran(RedisConnectionError("Connection closed by server."))
    assert not never_ran(RedisTimeoutError("Timeout reading from socket"))


async def test_a_lost_reply_is_looked_for_before_sending_again() -> None:
    redis = fakeredis.FakeAsyncRedis(decode_responses=True)
    task = Task(task_id="t1", agent_type="chat")
    sent: list[str] = []

    async def send() -> None:
        sent.append("xadd")
        await redis.xadd("s", encode_task(task))  # type: ignore[arg-type]
        if len(sent) == 1:
            raise RedisConnectionError("Connection closed by server.")  # the reply was lost

    async def queued() -> bool:
        return await task_queued(redis, ["s", "results"], "t1")

    await submit_once(send, queued, time.monotonic() + 5, "submitting t1")
    assert sent == ["xadd"] and await redis.xlen("s") == 1  # found, never sent twice


async def test_a_refusal_is_an_answer_not_an_outage() -> None:
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise ResponseError("NOPERM this user has no permissions")

    with pytest.raises(ResponseError):
        await ride_out(refused, time.monotonic() + 5, "reading")
    assert calls == 1


def test_the_stall_threshold_is_the_shortest_stall_that_may_cost_a_lease() -> None:
    assert stall_threshold(5.0, 15.0) == 5.0  # defaults: a heartbeat interval
    assert stall_threshold(1.5, 2.0) == 0.5  # the lease outlives a beat by 0.5 s only
    assert stall_threshold(1.0, 1.01) == 0.05


def test_the_documented_lag_is_never_above_what_the_stream_holds() -> None:
    from byconsole.headless.metrics_doc import _queue_row

    row = _queue_row("s", 10, [{"name": "g", "lag": 1635, "pending": 2}, {"name": "h"}])
    assert [g["lag"] for g in row["consumer_groups"]] == [8, None]
