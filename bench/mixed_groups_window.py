"""Tasks run twice when a TS ``WorkerRunner`` joins a type worker_runtime already serves.

A steady stream of by-framework ``ASK_AGENT`` tasks (execution record ``QUEUED`` first,
then the envelope, as ``GatewayClient.send_message`` writes them) goes to one type for
``--seconds``; a third of the way in, a TS ``WorkerRunner`` (simulated by
``tests/interop/foreign_consumer.py``) starts on the type and creates its own consumer
group at ``0``. Three runs, interleaved ``--rounds`` times:

* ``pinned``: ``BYAI_CONSUMER_GROUP`` set to the key factory's ``CONSUMER_GROUP`` keeps
  worker_runtime in its own group (what it did before it followed the fleet's group);
* ``instance``: only each instance's own check moves it (every second): the leader's
  check (``BYAI_GROUP_FOLLOW_INTERVAL``) set to a day, i.e. before the leader followed;
* ``follow``: the default: the leader parks worker_runtime's group within its cadence
  (200 ms) and the instance's readers switch at their own check.

Both workers record every run (``test:done``); the script prints, per run, the tasks
sent, those that ran more than once and those that never ran, once every group has
nothing pending. Usage: ``python -m bench.mixed_groups_window [--rate 100] [--seconds 6]
[--rounds 2] [--beat 1]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from redis.asyncio import Redis

from worker_runtime.embedded import RedisServer
from worker_runtime.keys import CONSUMER_GROUP, Keys

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TYPE = "window"
DONE = "test:done"
K = Keys()


def _env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    env.update(BYAI_REDIS_URL=url, **extra)
    return env


async def _send(redis: Redis, n: int) -> str:
    session, message = f"s-{uuid.uuid4().hex[:8]}", f"msg-{uuid.uuid4().hex[:12]}"
    eid = f"exec-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    record = {
        "execution_id": eid,
        "message_id": message,
        "session_id": session,
        "target_agent_type": TYPE,
        "status": "QUEUED",
        "created_at": now,
        "timeline": [{"status": "QUEUED", "timestamp": now}],
    }
    registry = K.session_registry(session)
    await redis.hset(
        registry, mapping={f"exec:{eid}": json.dumps(record), f"msg_map:{message}": eid}
    )
    header = {
        "message_id": message,
        "session_id": session,
        "trace_id": uuid.uuid4().hex,
        "target_agent_type": TYPE,
        "source_agent_type": "client",
    }
    envelope = {"action_type": "ASK_AGENT", "header": header, "body": {"content": f"n{n}"}}
    await redis.xadd(K.type_stream(TYPE), {"data": json.dumps(envelope)})
    return message


async def one_run(mode: str, rate: float, seconds: float, beat: float) -> tuple[int, int, int]:
    """(sent, ran more than once, never ran) for one run of ``mode``."""
    server = RedisServer().start()
    procs: list[subprocess.Popen[bytes]] = []
    redis = Redis.from_url(server.url, decode_responses=True)
    try:
        extra = {"BYAI_HEARTBEAT_INTERVAL": str(beat), "BYAI_LEASE_TTL": str(beat * 6)}
        if mode == "pinned":
            extra["BYAI_CONSUMER_GROUP"] = CONSUMER_GROUP
        elif mode == "instance":
            extra["BYAI_GROUP_FOLLOW_INTERVAL"] = "86400"
        ours = [str(BIN / "worker-runtime"), "run", "tests.interop.data_handlers:answer"]
        ours += ["--instance", "win", "--type", TYPE]
        procs.append(
            subprocess.Popen(
                ours,
                cwd=ROOT,
                env=_env(server.url, INTEROP_SLEEP="0.02", **extra),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        while not await redis.exists(K.worker_online("win-r0")):
            await asyncio.sleep(0.05)
        sent: list[str] = []
        start = time.monotonic()
        foreign_started = False
        while (elapsed := time.monotonic() - start) < seconds:
            if not foreign_started and elapsed >= seconds / 3:
                sim = [sys.executable, "-m", "tests.interop.foreign_consumer"]
                env = _env(
                    server.url,
                    FOREIGN_SDK="ts-runner",
                    FOREIGN_WORKER_ID="ts-1",
                    FOREIGN_TYPES=TYPE,
                    FOREIGN_SLEEP="0.02",
                )
                procs.append(
                    subprocess.Popen(
                        sim, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                )
                foreign_started = True
            sent.append(await _send(redis, len(sent)))
            await asyncio.sleep(max(0.0, start + len(sent) / rate - time.monotonic()))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            groups = await redis.xinfo_groups(K.type_stream(TYPE))
            undelivered = [g for g in groups if g.get("lag") not in (0, None)]
            if not undelivered and all(int(g["pending"]) == 0 for g in groups):
                break
        ran = Counter(await redis.lrange(DONE, 0, -1))
        return len(sent), sum(1 for m in sent if ran[m] > 1), sum(1 for m in sent if not ran[m])
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(20)
        await redis.aclose()
        server.cleanup()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float, default=100.0, help="tasks per second")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--beat", type=float, default=1.0, help="BYAI_HEARTBEAT_INTERVAL")
    args = parser.parse_args()
    modes = ("pinned", "instance", "follow")
    totals: dict[str, Counter[str]] = {mode: Counter() for mode in modes}
    for _ in range(args.rounds):
        for mode in modes:
            sent, twice, never = await one_run(mode, args.rate, args.seconds, args.beat)
            totals[mode].update(sent=sent, twice=twice, never=never)
            print(f"{mode}: sent {sent}, ran more than once {twice}, never ran {never}", flush=True)
    for mode, t in totals.items():
        share = t["twice"] / t["sent"] if t["sent"] else 0.0
        print(f"total {mode}: {t['twice']}/{t['sent']} ran twice ({share:.1%}), {t['never']} never")


if __name__ == "__main__":
    asyncio.run(main())
