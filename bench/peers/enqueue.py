"""``python -m bench.peers.enqueue NAME URL COUNT``: queue no-op tasks for one peer."""

from __future__ import annotations

import importlib
import os
import sys
import time


def main() -> int:
    """Queue the tasks; print the seconds it took."""
    name, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.environ["BENCH_REDIS_URL"] = url  # the app modules read it when imported
    module = importlib.import_module(f"bench.peers.{name}_app")
    started = time.perf_counter()
    module.enqueue(url, count)
    print(f"{time.perf_counter() - started:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
