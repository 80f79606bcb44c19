"""Memory of a dead-letter listing over huge entries: excerpts against whole reads.

    python -m bench.huge_entries                 # six dead letters of 50 MB, 3 rounds
    python -m bench.huge_entries --mb 10 --count 4 --rounds 2

Writes ``--count`` dead letters of ``--mb`` MB each to a throwaway ``redis-server``,
then, interleaved round by round, runs

* ``byconsole dead list big`` (the real executable: excerpts, README "Dead letters");
* the peer: a Python process that reads the same listing the way ``dead list`` did
  before excerpts (``XREVRANGE`` of whole entries, each parsed into a dead letter);

and prints each process's peak resident memory (``ru_maxrss`` of the child, from
``os.wait4``), its wall time, the bytes Redis sent for it (``total_net_output_bytes``)
and the ratios.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from redis import Redis

from bench.common import machine
from worker_runtime.embedded import RedisServer

BIN = Path(sys.executable).parent
TYPE = "big"

PEER = """
import asyncio, sys
from worker_runtime.connection import create_redis
from worker_runtime.dead_letters import parse_dead_letter
from worker_runtime.keys import Keys
from worker_runtime.settings import RedisSettings

async def main() -> None:
    client = create_redis(RedisSettings(url=sys.argv[1]), retries=0)
    stream = Keys().dead_letter_stream(sys.argv[2])
    entries = await client.xrevrange(stream, count=20)
    letters = [parse_dead_letter(sys.argv[2], str(e), raw) for e, raw in entries]
    for d in letters:
        print(d.entry_id, d.task_id, d.error, d.one_line_payload()[:60])
    await client.aclose()

asyncio.run(main())
"""


FILL = """
import json, sys
from redis import Redis
from worker_runtime.keys import Keys
from worker_runtime.models import now_ms

client = Redis(port=int(sys.argv[1]))
count, size, agent_type = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
for i in range(count):
    task = {"task_id": f"t-{i}", "agent_type": agent_type,
            "payload": {"text": f"entry {i} " + "x" * size}}
    client.xadd(Keys().dead_letter_stream(agent_type), {
        "kind": "task", "data": json.dumps(task), "error": f"MemoryError: {i}",
        "worker_id": "w-1", "buried_at": str(now_ms())})
"""


def _fill(port: int, count: int, size: int) -> None:
    """Write the dead letters from another process.

    Linux counts in a child's ``ru_maxrss`` the parent's resident memory at the fork,
    before the ``exec``: a bench process that had built the 50 MB payloads itself
    would have every child measured at its size.
    """
    fill = [sys.executable, "-c", FILL, str(port), str(count), str(size), TYPE]
    subprocess.run(fill, check=True)


def _measure(args: list[str], env: dict[str, str], client: Redis) -> tuple[float, float, int, int]:
    """(peak RSS MiB, seconds, bytes Redis sent, bytes printed) of one process."""
    sent_before = int(client.info("stats")["total_net_output_bytes"])
    started = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{args[0]} exited {proc.returncode}")
    sent = int(client.info("stats")["total_net_output_bytes"]) - sent_before
    return usage.ru_maxrss / 1024, elapsed, sent, len(out)  # ru_maxrss: KiB on Linux


def main() -> None:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50, help="size of each dead letter (MB)")
    parser.add_argument("--count", type=int, default=6, help="how many dead letters")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    server = RedisServer(extra_args=["--proto-max-bulk-len", "1gb"]).start()
    try:
        client = Redis(port=server.port)
        _fill(server.port, args.count, args.mb * 1024 * 1024)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
        env["BYAI_REDIS_URL"] = server.url
        ours = [str(BIN / "byconsole"), "dead", "list", TYPE]
        peer = [sys.executable, "-c", PEER, server.url, TYPE]
        rows: dict[str, list[tuple[float, float, int, int]]] = {"excerpts": [], "whole": []}
        for _ in range(args.rounds):  # interleaved: both see the same machine state
            rows["excerpts"].append(_measure(ours, env, client))
            rows["whole"].append(_measure(peer, env, client))
        print(f"# {args.count} dead letters of {args.mb} MB · {args.rounds} rounds · {machine()}")
        print("| read | peak RSS MiB | seconds | bytes from Redis | bytes printed |")
        print("|---|---:|---:|---:|---:|")
        best: dict[str, tuple[float, float, int, int]] = {}
        for name, measured in rows.items():
            rss = min(m[0] for m in measured)
            secs = min(m[1] for m in measured)
            best[name] = (rss, secs, measured[-1][2], measured[-1][3])
            print(
                f"| {name} | {rss:.0f} | {secs:.2f} | {measured[-1][2]:,} | {measured[-1][3]:,} |"
            )
        ratio_rss = best["whole"][0] / best["excerpts"][0]
        ratio_time = best["whole"][1] / best["excerpts"][1]
        print(f"\nwhole / excerpts: RSS {ratio_rss:.1f}x, time {ratio_time:.1f}x (best of rounds)")
        client.close()
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
