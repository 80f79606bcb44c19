"""``byconsole serve`` in a real browser: Debian's chromium, headless, driven by Playwright,
against a real serve process, real console processes, real workers and a real redis-server.

The console draws into a canvas; the tests read what it drew from the bytes the page
receives on its websocket (escape sequences removed, whitespace collapsed), tapped by a
script the test adds to the page before it loads.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from playwright.sync_api import Browser, Page, sync_playwright

from tests.e2e.test_console_tmux import until
from tests.integration.runtime_helpers import spawn_worker, stop_process
from tests.redis_server import RedisServer
from tests.web.conftest import PASSWORDS, ServeProcess, start_serve, stop_serve
from worker_runtime.keys import Keys

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
K = Keys()
WORKERS = ["web-a-r0", "web-a-r1"]
SCREENSHOTS = os.environ.get("BYCONSOLE_WEB_SCREENSHOTS")
"""Also save the screenshots there (``screenshots/`` when regenerating them)."""

TAP = r"""
window.__screen = "";
(function () {
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(url, protocols) {
      super(url, protocols);
      const decoder = new TextDecoder();
      this.addEventListener("message", (event) => {
        if (typeof event.data === "string") return;
        const text = decoder.decode(event.data, {stream: true})
          .replace(/\x1b\[[0-9;?<>=]*[ -\/]*[@-~]/g, " ")
          .replace(/\x1b\][^\x07\x1b]*(\x07|\x1b\\)/g, " ")
          .replace(/\s+/g, " ");
        window.__screen = (window.__screen + text).slice(-400000);
      });
    }
  };
})();
"""

pytestmark = pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason="chromium is missing (make installs Debian's)"
)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server with two live worker_runtime workers of one instance."""
    server = RedisServer().start()
    log = tmp_path_factory.mktemp("fleet") / "worker.log"
    worker = spawn_worker(server.url, "tests.handlers:noop", ["chat"], "web-a", 2, log_path=log)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    until(lambda: all(client.exists(K.worker_online(w)) for w in WORKERS), timeout=30)
    client.close()
    yield server
    stop_process(worker)
    server.cleanup()


@pytest.fixture(scope="module")
def served(
    fleet: RedisServer, users_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServeProcess]:
    serve = start_serve(fleet.url, users_file, tmp_path_factory.mktemp("serve"))
    yield serve
    stop_serve(serve)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 760})
    context.add_init_script(TAP)
    opened = context.new_page()
    yield opened
    context.close()


def _shot(page: Page, tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000  # a picture, not an empty page
    if SCREENSHOTS:
        shutil.copy(path, Path(SCREENSHOTS) / name)
    return path


def _seen(page: Page, *texts: str, timeout: float = 30) -> None:
    """Wait until the console has drawn every one of ``texts``."""
    page.wait_for_function(
        "texts => texts.every(t => window.__screen.includes(t))",
        arg=list(texts),
        timeout=timeout * 1000,
    )


def _log_in(page: Page, served: ServeProcess, name: str) -> None:
    page.goto(f"{served.url}/")
    assert page.url == f"{served.url}/login"
    page.fill("#user", name)
    page.fill("#password", PASSWORDS[name])
    page.click("button[type=submit]")
    page.wait_for_url(f"{served.url}/")


def _type_into_console(page: Page) -> None:
    """Give the terminal the keyboard (its hidden input), without clicking into the app."""
    page.focus(".xterm-helper-textarea")


def test_a_viewer_sees_the_workers_and_action_keys_say_why_not(
    page: Page, served: ServeProcess, fleet: RedisServer, tmp_path: Path
) -> None:
    page.goto(f"{served.url}/static/js/textual.js")  # an asset, without a session
    assert "log in first" in page.content()
    page.goto(f"{served.url}/")
    assert page.url.endswith("/login") and page.locator("#password").is_visible()
    _shot(page, tmp_path, "web-login.png")
    _log_in(page, served, "vic")
    assert page.locator("#who").inner_text() == "vic (viewer)"
    _seen(page, "1 Workers", "READ-ONLY", *WORKERS, "CONNECTED")
    _type_into_console(page)
    page.keyboard.press("s")
    # The toast wraps (its border between): the parts, each on one line.
    _seen(page, "read-only: suspend is disabled (signed in as vic")
    _shot(page, tmp_path, "web-console-viewer.png")
    client = redis.Redis.from_url(fleet.url, decode_responses=True)
    assert [client.hget(K.worker_admin(w), "lifecycle") for w in WORKERS] == [None, None]
    assert client.xlen(K.audit_stream) == 0
    client.close()
    # Logging out ends the session's console process too, and the page is the login again.
    assert len(served.children()) == 1
    page.click("header button")
    page.wait_for_url(f"{served.url}/login")
    until(lambda: not served.children(), timeout=30)
    page.goto(f"{served.url}/")
    assert page.url == f"{served.url}/login"


def test_an_operator_suspends_workers_through_the_confirm_dialog(
    page: Page, served: ServeProcess, fleet: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(fleet.url, decode_responses=True)
    try:
        _log_in(page, served, "olga")
        _seen(page, "1 Workers", *WORKERS, "CONNECTED")
        assert "READ-ONLY" not in page.evaluate("window.__screen")
        _type_into_console(page)
        page.keyboard.press(" ")  # mark web-a-r0, the cursor moves down
        page.keyboard.press(" ")  # mark web-a-r1
        page.keyboard.press("s")
        _seen(page, "Suspend 2 targets?")
        page.keyboard.type("web maintenance")
        _seen(page, "web maintenance")
        # At a person's pace (as tests/e2e does): each key lands after the last one's effect.
        page.wait_for_timeout(500)
        page.keyboard.press("Enter")  # reason -> the Suspend button
        page.wait_for_timeout(500)
        page.evaluate("window.__screen = ''")
        page.keyboard.press("Enter")
        _seen(page, "pending until the worker")

        def applied() -> bool:
            return all(client.hget(K.worker_admin(w), "lifecycle") == "suspended" for w in WORKERS)

        until(applied, timeout=30)
        _seen(page, "applied by the worker")
        _shot(page, tmp_path, "web-console-operator.png")
        entries: list[Any] = client.xrange(K.audit_stream) or []
        audit = [fields for _, fields in entries]
        assert sorted(a["target"] for a in audit) == WORKERS
        for entry in audit:
            assert (entry["action"], entry["reason"], entry["web_user"]) == (
                "suspend",
                "web maintenance",
                "olga",
            )
            assert entry["operator"] and entry["redis_user"] == "default"

        # The session's console process dies: the page says so.
        (console,) = served.children()
        os.kill(console, signal.SIGKILL)
        ended = page.locator("#ended")
        ended.wait_for(state="visible", timeout=15_000)
        assert ended.inner_text() == (
            "Session ended: the console process was killed (SIGKILL); see the server log"
        )
    finally:
        for w in WORKERS:  # leave the fleet as found for the other tests of the module
            subprocess.run(
                [str(Path(sys.executable).parent / "byconsole"), "worker", "resume", w],
                env={**os.environ, "BYAI_REDIS_URL": fleet.url},
                capture_output=True,
                check=False,
            )
        client.close()
