"""A worker process for delivery tests: ``python -m tests.reliability.probe_worker TYPE``.

Runs a :class:`WorkerInstance` from the environment (``BYAI_*`` settings), with
optional fault injection into one core loop (``PROBE_FAULT``: ``batcher``, ``consumer``
or ``control``), and at exit writes the batcher's bookkeeping sizes as JSON to
``PROBE_SIZES`` (when set). Exits 3 when the instance stopped because a loop ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from bench.fault_handlers import noop, traced
from worker_runtime import instance as instance_module
from worker_runtime.batcher import Batcher
from worker_runtime.consumer import Reader
from worker_runtime.instance import WorkerInstance


def inject(fault: str) -> None:
    """Make one core loop fail once, as a bug in it would."""
    if fault == "batcher":
        flush = Batcher._flush
        fired: list[bool] = []

        async def failing_flush(self: Batcher) -> None:
            if not fired and self._pending.finishes:
                fired.append(True)
                raise RuntimeError("injected batcher fault")
            await flush(self)

        Batcher._flush = failing_flush  # type: ignore[method-assign]
    elif fault == "consumer":
        read = Reader._read_new
        calls: list[int] = []

        async def failing_read(self: Reader, streams: list[str]) -> None:
            calls.append(1)
            if len(calls) == 5:
                raise RuntimeError("injected consumer fault")
            await read(self, streams)

        Reader._read_new = failing_read  # type: ignore[method-assign]
    elif fault == "control":
        loop = instance_module.control_loop  # type: ignore[attr-defined]

        async def failing_control(*args: Any) -> None:
            task = asyncio.create_task(loop(*args))
            await asyncio.sleep(1.0)
            task.cancel()
            raise RuntimeError("injected control loop fault")

        instance_module.control_loop = failing_control  # type: ignore[attr-defined,assignment]


async def main(agent_type: str) -> int:
    """Run until SIGTERM (or a failure); returns the exit code."""
    inject(os.environ.get("PROBE_FAULT", ""))
    handler = noop if os.environ.get("PROBE_HANDLER") == "noop" else traced
    instance = WorkerInstance(handler, [agent_type])
    await instance.run()
    sizes_path = os.environ.get("PROBE_SIZES")
    if sizes_path and instance.ctx is not None:
        with open(sizes_path, "w", encoding="utf-8") as out:
            json.dump(instance.ctx.batcher.sizes(), out)
    return 3 if instance.failure else 0


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    sys.exit(asyncio.run(main(sys.argv[1])))
