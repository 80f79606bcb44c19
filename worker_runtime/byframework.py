"""Formats this runtime shares with by-framework (``by-framework==0.2.2.dev17``).

by-framework's readers (``by-admin metrics snapshot``, its metrics read client, its
dashboard) read a worker's status hash and execution snapshots whoever wrote them, so
this runtime writes them the way by-framework does:

* the status hash (``registry:worker:status:{id}``) holds the counters
  ``total_count``, ``active_count``, ``{status}_count`` (lower-cased upper-case status,
  e.g. ``running_count``, ``completed_count``) and the stamps ``last_updated_at``,
  ``last_started_at``, ``last_finished_at`` (ms); our ``runtime_status`` field is an
  extension by-framework ignores;
* an execution snapshot is JSON with by-framework's fields (``status`` in upper case,
  ``message_id``, ``target_agent_type``, ``created_at`` … ``updated_at``,
  ``error_message``) next to ours.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from worker_runtime.jsontext import compact_json
from worker_runtime.keys import Keys
from worker_runtime.models import Execution, ExecutionState

SESSION_TTL_S = 7 * 24 * 3600
"""by-framework's ``DEFAULT_SESSION_TTL``: its per-worker counters and snapshots live this long."""

RUNTIME_STATUS_FIELD = "runtime_status"
"""Our field in the status hash (idle/busy/suspended/draining); by-framework ignores it."""

STATUS_OF_STATE: dict[str, str] = {
    ExecutionState.RUNNING: "RUNNING",
    ExecutionState.SUCCEEDED: "COMPLETED",
    ExecutionState.FAILED: "FAILED",
    ExecutionState.CANCELLED: "CANCELLED",
}
"""Our execution state -> by-framework's execution status."""

_TERMINAL = {"COMPLETED", "FAILED", "CANCELLED"}


def status_of(state: str) -> str:
    """by-framework's status for one of our states (unknown states upper-cased)."""
    # The members are str: a plain state string finds its member's entry directly.
    return STATUS_OF_STATE.get(state) or state.upper()


def count_field(status: str) -> str:
    """The status hash counter of a status (``RUNNING`` -> ``running_count``)."""
    return f"{status.lower()}_count"


def snapshot(execution: Execution, updated_at: int) -> dict[str, Any]:
    """An execution snapshot both runtimes read: our fields plus by-framework's."""
    # A model keeps its field values in its __dict__ (what iterating over it yields):
    # for these flat fields the same as model_dump(exclude_none=True), at a sixth of
    # the cost, and this runs once per finished task.
    data: dict[str, Any] = {k: v for k, v in execution.__dict__.items() if v is not None}
    data.update(
        # A plain str: an enum member costs pydantic-core's encoder 4 us more.
        state=str(execution.state),
        message_id=execution.task_id,
        target_agent_type=execution.agent_type,
        status=status_of(execution.state),
        created_at=execution.created_at or execution.started_at or 0,
        started_at=execution.started_at or 0,
        finished_at=execution.finished_at or 0,
        updated_at=updated_at,
        error_message=execution.error or "",
    )
    if execution.error:
        # by-framework's readers group failures by it (the exception's class name).
        data["error_type"] = execution.error.partition(":")[0]
    return data


def snapshot_json(execution: Execution, updated_at: int) -> str:
    """:func:`snapshot` as the JSON stored in the snapshot hashes.

    Always encodable as UTF-8 (:func:`compact_json`): a field holding a lone
    surrogate is stored escaped, or the whole flush would fail to encode.
    """
    return compact_json(snapshot(execution, updated_at))


def queue_status_counters(
    pipe: Any,
    keys: Keys,
    worker_id: str,
    started: Iterable[Execution],
    finished: Iterable[tuple[Execution, bool]],
    now: int,
) -> None:
    """Queue the status-hash counter updates of one flush for one worker.

    Counts exactly as by-framework does per status change: a new execution adds to
    ``total_count``; ``RUNNING`` and ``active_count`` go up when its running state is
    written and down when it ends; the terminal status counter goes up when it ends.
    An execution whose start was never written (start and end in one flush) goes
    straight to its terminal status.

    Args:
        pipe: the pipeline to queue into.
        keys: the key factory.
        worker_id: the worker.
        started: executions whose running state this flush writes.
        finished: (execution, whether its running state was written earlier).
        now: the flush time (ms).
    """
    deltas: dict[str, int] = {}

    def add(name: str, value: int) -> None:
        deltas[name] = deltas.get(name, 0) + value

    last_started = 0
    last_finished = 0
    for execution in started:
        add("total_count", 1)
        add(count_field("RUNNING"), 1)
        add("active_count", 1)
        last_started = max(last_started, execution.started_at or 0)
    for execution, was_running in finished:
        status = status_of(execution.state)
        if was_running:
            add(count_field("RUNNING"), -1)
            add("active_count", -1)
        else:
            add("total_count", 1)
            last_started = max(last_started, execution.started_at or 0)
        if status in _TERMINAL:
            add(count_field(status), 1)
        last_finished = max(last_finished, execution.finished_at or 0)
    key = keys.worker_status(worker_id)
    for name, value in deltas.items():
        if value:
            pipe.hincrby(key, name, value)
    stamps: dict[str, int] = {"last_updated_at": now}
    if last_started:
        stamps["last_started_at"] = last_started
    if last_finished:
        stamps["last_finished_at"] = last_finished
    pipe.hset(key, mapping=stamps)
    pipe.expire(key, SESSION_TTL_S)
