"""One console process per browser session, relayed over its websocket.

textual-serve's :class:`~textual_serve.app_service.AppService` speaks the Textual web
driver's packet protocol to the process; this subclass only changes how the process
starts: an argument list (no shell: a path or context name is never parsed by one) with
the session's own environment (its web user, ``--read-only`` for a viewer).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from asyncio.subprocess import PIPE, Process
from collections.abc import Awaitable, Callable, Mapping, Sequence

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

STOP_GRACE = 5.0
"""Seconds a console process has to quit when asked, before it is killed."""


class ConsoleService(AppService):
    """A console process for one browser session.

    Args:
        argv: the console command line (``python -m byconsole …``).
        env: variables added to the serve process's environment for this process.
        write_bytes / write_str / close: the session's websocket.
    """

    def __init__(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        write_bytes: Callable[[bytes], Awaitable[None]],
        write_str: Callable[[str], Awaitable[None]],
        close: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(
            " ".join(argv),
            write_bytes=write_bytes,
            write_str=write_str,
            close=close,
            download_manager=DownloadManager(),
        )
        self.argv = list(argv)
        self.extra_env = dict(env)

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        environment = self._build_environment(width=width, height=height)
        environment.update(self.extra_env)
        self._process = process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=environment
        )
        assert process.stdin is not None
        self._stdin = process.stdin
        return process

    @property
    def process(self) -> Process | None:
        """The console process (None before :meth:`start`)."""
        return self._process

    @property
    def relay(self) -> asyncio.Task[None] | None:
        """The task relaying the process's output; it ends when the process closes it."""
        return self._task

    async def shutdown(self) -> int | None:
        """Ask the console to quit, kill it if it does not in time; its exit code."""
        process = self._process
        if process is None:
            return None
        with contextlib.suppress(TimeoutError, OSError):
            await asyncio.wait_for(self.stop(), STOP_GRACE)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGKILL)
        return await process.wait()


def exit_line(code: int | None) -> str:
    """How a console process ended, in words for the page."""
    if code is None:
        return "the console process did not start"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the console process was killed ({name})"
    return f"the console process exited with code {code}"
