"""The console's memory policy: when the cyclic collector runs, and which fleets are
large enough to be handled off the event loop.

Every figure and switch of that policy is here, so the relations between them are
visible in one place and tested (``tests/unit/test_memory_policy.py``):

* a one-shot run (``--snapshot``, an admin subcommand) frees everything when it exits:
  the launcher turns the cyclic collector off (:func:`collector_off_for_one_shot`) and
  the exit freezes what is left (:func:`freeze_at_exit`);
* the live console and the demo run for hours and turn it back on
  (:func:`collector_on_for_long_run`);
* a large fleet (:data:`LARGE_FLEET` workers or more) has its snapshot frozen as it is
  read (:data:`FREEZE_FROM`, the fleet reader's ``freeze_from``), its rows prepared in a
  thread (:data:`ROWS_OFF_LOOP_FROM`), its replaced snapshot freed after the paint
  (:data:`RELEASE_AFTER_PAINT_FROM`), and after each of its refreshes the Workers view
  settles the collector (:func:`settle_after_large_refresh`), thawing every
  :data:`GC_THAW_EVERY` of them;
* the header counts a snapshot in a thread from :data:`COUNT_OFF_LOOP_FROM` workers.

The fleet reader, in the runtime, has its own threshold for building views in a thread
(``worker_runtime.fleet.BUILD_OFF_LOOP_FROM``) and pauses the collector during a read;
it leaves a collector the application turned off alone. Measured costs behind these
figures are in BENCHMARKS.md (``bench/console_stall.py``; the fleet read alone:
``git show baccccc:bench/read_stall.py``, a one-off script since removed).

Standard library only: the launcher imports this before anything heavy.
"""

from __future__ import annotations

import gc

LARGE_FLEET = 2_000
"""Workers from which a fleet is large: below it every step of a refresh is short
enough for the event loop, and a thread hand-off or a freeze would cost more than it
saves."""

ROWS_OFF_LOOP_FROM = LARGE_FLEET
"""Fleets at least this large have the Workers view's rows prepared in a thread; smaller
ones are prepared at once, on the loop. Only these refreshes call
:func:`settle_after_large_refresh`."""

FREEZE_FROM = LARGE_FLEET
"""Fleets from this size on have each read's snapshot frozen as it is read (the fleet
reader's ``freeze_from``): the first collections after a large read would otherwise walk
the whole snapshot while holding the loop. What a freeze keeps alive is thawed only by
:func:`settle_after_large_refresh`, which runs for refreshes of
:data:`ROWS_OFF_LOOP_FROM` rows or more: so never below that."""

RELEASE_AFTER_PAINT_FROM = LARGE_FLEET
"""A replaced snapshot of at least this many workers is freed a moment after the new
one is painted (``byconsole.tui.release``), not when the views let go of it: freeing
a large snapshot is one long C call that would delay the paint."""

COUNT_OFF_LOOP_FROM = 1_000
"""Snapshots of at least this many workers are counted for the header in a thread before
they are shown; counting in the paint would delay the keys pressed meanwhile."""

GC_THAW_EVERY = 50
"""Large refreshes between two full collections (see :func:`settle_after_large_refresh`).
More than one: a thaw and collection after every refresh would be the full collection
the freeze avoids."""

_settled = 0


def collector_off_for_one_shot() -> None:
    """Turn the cyclic collector off for a run that frees everything when it exits.

    Its passes over the objects the imports create (pydantic's and redis-py's) and over
    a large snapshot after the read only cost such a run time.
    """
    gc.disable()


def collector_on_for_long_run() -> None:
    """Turn the cyclic collector back on: the live console and the demo run for hours."""
    gc.enable()


def freeze_at_exit() -> None:
    """Move what is still alive at exit to the collector's permanent generation.

    The interpreter's final collections would otherwise walk every object pydantic and
    redis-py made only to free them as the process ends. Nothing is left to finalise:
    the Redis client is closed and the output flushed by then.
    """
    gc.freeze()


def settle_after_large_refresh() -> None:
    """Move every object alive now out of the collector's way (``gc.freeze``).

    A large snapshot is about a hundred container objects per worker; a full
    collection walks all of them and, every few refreshes, would stall the event loop.
    Frozen objects are still freed by reference counting when the next snapshot
    replaces them (snapshots and rows hold no reference cycles). What a freeze does
    keep is cyclic garbage from objects alive at that moment: so every
    :data:`GC_THAW_EVERY` large refreshes everything is thawed and collected once,
    which bounds that memory at the price of one full collection per that many
    refreshes instead of one every few.
    """
    global _settled
    _settled += 1
    if _settled % GC_THAW_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()
