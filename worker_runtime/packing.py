"""Commands packed by hiredis: the bytes redis-py's packer writes, eight times faster.

redis-py's asyncio connection packs every argument in Python. A worker's flush sends a
few large arguments and many small ones per task (acks, results, history), and that
packing was 6% of a worker's time with task outputs stored; the console's fleet read
packs ~30,000 key names. hiredis (already the reply parser) packs in C. It refuses
what redis-py would encode differently or reject (a bool; text that is not valid UTF-8,
which the client encodes with ``errors="replace"``): such a command is packed by
redis-py, as before, and fails or succeeds as it did.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hiredis import pack_command
from redis.asyncio.connection import AbstractConnection


def pack_args(args: tuple[Any, ...]) -> bytes:
    """One command's protocol bytes.

    Raises:
        TypeError, ValueError: hiredis refuses an argument (see the module docstring).
    """
    name = args[0]
    if isinstance(name, str) and " " in name:
        # A command name of words (``XINFO GROUPS``) is sent as separate arguments,
        # as redis-py's own packer does; hiredis's takes the arguments as given.
        args = (*name.split(), *args[1:])
    packed: bytes = pack_command(args)
    return packed


class HiredisPacking(AbstractConnection):
    """Mixed into a redis-py connection class: its commands are packed by hiredis."""

    def pack_command(self, *args: Any) -> list[bytes]:
        """The command's bytes (redis-py's packer when hiredis refuses an argument)."""
        try:
            return [pack_args(args)]
        except (TypeError, ValueError):
            return super().pack_command(*args)

    def pack_commands(self, commands: Iterable[Iterable[Any]]) -> list[bytes]:
        """The commands' bytes, joined (one write)."""
        return [b"".join(b for command in commands for b in self.pack_command(*command))]


_MIXED: dict[type[AbstractConnection], type[AbstractConnection]] = {}


def hiredis_packing(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """``connection_class`` with :class:`HiredisPacking` mixed in (made once per class)."""
    if issubclass(connection_class, HiredisPacking):
        return connection_class
    mixed = _MIXED.get(connection_class)
    if mixed is None:
        mixed = _MIXED[connection_class] = type(
            f"HiredisPacking{connection_class.__name__}",
            (HiredisPacking, connection_class),
            {"__doc__": f"{connection_class.__name__} whose commands hiredis packs."},
        )
    return mixed
