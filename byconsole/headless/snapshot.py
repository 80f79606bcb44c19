"""The light half of the headless commands: the session, JSON output and ``--snapshot``.

``byconsole --snapshot`` in CI runs once per job, so its start-up is part of what it
costs. This module imports only what a snapshot needs (the fleet reader, the checks):
no layout (the table format is written by :mod:`byconsole.headless.plain_table`, imported
when asked for), no admin API, no Textual, no Rich. :mod:`byconsole.headless.commands` re-exports
everything here for the admin subcommands.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from byconsole.headless import checks as chk
from byconsole.text import safe_text
from worker_runtime.fleet import FleetReader
from worker_runtime.health import HealthPolicy
from worker_runtime.keys import Keys
from worker_runtime.settings import RedisSettings
from worker_runtime.snapshot import FleetSnapshot

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

    from byconsole.headless.plain_table import Output
    from worker_runtime.admin import WorkerManager


class NotFoundError(LookupError):
    """A named target (worker, type, instance) does not exist: exit code 1."""


class RefusedError(RuntimeError):
    """The target exists but the command does not apply to it now: exit code 1."""


@dataclass
class Session:
    """What a command needs: the client, the key factory and where to print.

    ``out`` and ``err`` are made on first use, so a path that prints no layout
    (``--snapshot --format json``) never imports it.
    """

    redis: Redis | RedisCluster
    keys: Keys
    settings: RedisSettings
    policy: HealthPolicy | None = None
    """Alert thresholds (the context's); by-framework's defaults when ``None``."""
    _outputs: dict[bool, Output] = field(default_factory=dict, init=False, repr=False)

    def _output(self, stderr: bool) -> Output:
        output = self._outputs.get(stderr)
        if output is None:
            from byconsole.headless.plain_table import Output

            output = self._outputs[stderr] = Output.to(stderr=stderr)
        return output

    @property
    def out(self) -> Output:
        """Where stdout is printed (colour only on a terminal)."""
        return self._output(False)

    @property
    def err(self) -> Output:
        """Where stderr is printed."""
        return self._output(True)

    def reader(self, **kwargs: Any) -> FleetReader:
        """A fleet reader on this session's client (reading no tier of our history: no
        headless output shows it; ``metrics history`` reads its range itself)."""
        kwargs.setdefault("history_range", None)
        kwargs.setdefault("policy", self.policy)
        return FleetReader(self.redis, self.keys, endpoint=self.settings.endpoint, **kwargs)

    def manager(self) -> WorkerManager:
        """The admin API on this session's client."""
        from worker_runtime.admin import WorkerManager

        return WorkerManager(self.redis, self.keys)


def print_json(doc: Any) -> None:
    """One JSON document on stdout (indented on a terminal, compact when piped)."""
    indent = 2 if sys.stdout.isatty() else None
    # ASCII escapes keep the document valid whatever the terminal encoding.
    sys.stdout.write(json.dumps(doc, indent=indent, ensure_ascii=True) + "\n")
    sys.stdout.flush()


def print_model_json(model: BaseModel) -> None:
    """One model as JSON on stdout, as :func:`print_json` would print its dump.

    Serialised by pydantic in one pass: dumping to Python objects and encoding those
    took 140 ms for a 10,000-worker snapshot, this 20. The bytes go to stdout as they
    are (ASCII): turning 6.6 MB into text and back cost another 10 ms. Text it cannot
    encode (a lone surrogate) takes the slow path, which escapes it.
    """
    indent = 2 if sys.stdout.isatty() else None
    try:
        data = model.__pydantic_serializer__.to_json(model, indent=indent, ensure_ascii=True)
    except PydanticSerializationError:
        print_json(model.model_dump(mode="json"))
        return
    # DEL is ASCII, so pydantic leaves it raw; json.dumps escapes it, and so do we.
    if b"\x7f" in data:
        data = data.replace(b"\x7f", b"\\u007f")
    sys.stdout.flush()  # anything written as text first stays first
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # a text-only stream (a test's StringIO)
        sys.stdout.write(data.decode("ascii") + "\n")
        sys.stdout.flush()
    else:
        buffer.write(data + b"\n")
        buffer.flush()


def fail(session: Session, message: str) -> None:
    """A one-line explanation of a failed check on stderr (plain: never wrapped)."""
    del session  # stderr lines are plain text so scripts can grep them
    line = " ".join(safe_text(message, 2000).split())
    sys.stderr.write(f"byconsole: {line}\n")
    sys.stderr.flush()


def warn_unreadable(session: Session, snapshot: FleetSnapshot) -> int:
    """Warn of index keys read as empty for their wrong type; 1 when there were any."""
    lines = chk.unreadable_keys(snapshot)
    for line in lines:
        fail(session, f"warning: {line}")
    return 1 if lines else 0


def _scoped(snapshot: FleetSnapshot, agent_type: str | None) -> FleetSnapshot:
    if agent_type is None:
        return snapshot
    workers = chk.in_scope(snapshot, agent_type)
    ids = {w.instance_id for w in workers}
    instances = [
        i
        for i in snapshot.instances
        if i.instance_id in ids or agent_type in i.replicas or agent_type in i.quota
    ]
    return snapshot.model_copy(
        update={
            "workers": workers,
            "types": chk.types_in_scope(snapshot, agent_type),
            "instances": instances,
            "alerts": [a for a in snapshot.alerts if a.agent_type in (None, agent_type)],
        }
    )


async def run_snapshot(session: Session, args: argparse.Namespace, checks: chk.Checks) -> int:
    """``byconsole --snapshot``: print the fleet, then run the checks."""
    snapshot = await session.reader().read()
    agent_type: str | None = args.snapshot_type
    scoped = _scoped(snapshot, agent_type)
    if args.format == "json":
        print_model_json(scoped)
    elif args.format == "prom":
        from byconsole.headless.render_prom import render_prom

        sys.stdout.write(render_prom(scoped, list(scoped.workers), list(scoped.types)))
    else:
        from byconsole.headless.plain_table import snapshot_view, write_block

        write_block(snapshot_view(scoped), sys.stdout)
    code = warn_unreadable(session, snapshot)
    if agent_type is not None and not scoped.types and not scoped.workers:
        fail(session, f"error: unknown agent type: {safe_text(agent_type)}")
        code = 1
    failures = chk.run_checks(snapshot, checks, agent_type)
    for line in failures:
        fail(session, f"check failed: {line}")
    return 1 if failures else code
