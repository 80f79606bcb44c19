"""The aiohttp application of ``byconsole serve`` and ``byconsole exporter``.

Deny by default: one middleware decides for every request before any handler runs;
only the login page (and its stylesheet), ``/healthz`` and ``/metrics`` (with its own
check) are reachable without a session. The console page, textual-serve's assets and
the websocket all need a live session cookie, and the websocket also a same-origin
``Origin`` header, so another site cannot drive a console with a visitor's cookie.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import textual_serve
from aiohttp import WSMsgType, web

from byconsole.web.auth import LoginLimiter, Sessions, WebSession, bearer_ok
from byconsole.web.consoles import ConsoleService, exit_line
from byconsole.web.pages import console_page, login_page
from byconsole.web.scrape import ScrapeCache
from byconsole.web.users import User, load_users, verify

log = logging.getLogger("byconsole.web")

STATIC = Path(__file__).parent / "static"
TEXTUAL_STATIC = Path(textual_serve.__file__).parent / "static"

WATCH_EVERY = 1.0
"""Seconds between checks of a console's idle time and its login."""

CLOSE_ENDED = 4000
"""Websocket close code of a console that ended for a reason the page shows."""

SESSION = web.RequestKey("web_session", WebSession)
"""The request's session, set by the access check for the handlers behind it."""

_PUBLIC = frozenset({"/login", "/web/login.css", "/healthz", "/favicon.ico"})

_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""xterm.js adds style elements of its own, hence 'unsafe-inline' for styles only."""

ConsoleCommand = Callable[[WebSession], tuple[list[str], dict[str, str]]]
"""The console process's argument list and extra environment for a session."""


@dataclass
class ServeConfig:
    """What the server needs besides the fleet reader.

    Args:
        where: the Redis endpoint or context shown on the pages (never a password).
        users_path: the users file; None for the exporter (no console, no login).
        tokens: bearer tokens allowed to read /metrics.
        console: the console command for a session (None for the exporter).
        tls: the server speaks HTTPS itself.
        public_origin: the origin browsers use (behind a reverse proxy).
        max_sessions: console sessions at once.
        idle_timeout: seconds without input before a console ends (0: never).
    """

    where: str
    users_path: Path | None = None
    tokens: list[str] = field(default_factory=list)
    console: ConsoleCommand | None = None
    tls: bool = False
    public_origin: str | None = None
    max_sessions: int = 8
    idle_timeout: float = 1800.0


@dataclass(eq=False)
class LiveConsole:
    """A browser session's running console."""

    session: WebSession
    ws: web.WebSocketResponse
    service: ConsoleService
    last_input: float
    end_reason: str | None = None


class WebServer:
    """Routes, the access check and the live consoles.

    Args:
        config: users, tokens, limits.
        scrape: the shared /metrics text.
        clock: monotonic seconds.
    """

    def __init__(
        self,
        config: ServeConfig,
        scrape: ScrapeCache,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.scrape = scrape
        self.clock = clock
        self.sessions = Sessions(clock=clock)
        self.limiter = LoginLimiter(clock=clock)
        self.live: set[LiveConsole] = set()
        self._users: dict[str, User] = {}
        self._users_mtime: float | None = None
        self.cookie = "__Host-byconsole" if self.secure_cookies else "byconsole_session"

    @property
    def secure_cookies(self) -> bool:
        """HTTPS as the browser sees it: our own TLS, or a TLS proxy in front."""
        origin = self.config.public_origin
        return self.config.tls or bool(origin and origin.startswith("https://"))

    # -- the application -----------------------------------------------------------------

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application(middlewares=[self._guard], client_max_size=64 * 1024)
        app.on_response_prepare.append(self._headers)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/metrics", self.metrics)
        if self.config.console is not None:
            app.router.add_get("/login", self.login_form)
            app.router.add_post("/login", self.login)
            app.router.add_post("/logout", self.logout)
            app.router.add_get("/", self.index)
            app.router.add_get("/ws", self.websocket)
            app.router.add_static("/web", STATIC, show_index=False, follow_symlinks=False)
            app.router.add_static(
                "/static", TEXTUAL_STATIC, show_index=False, follow_symlinks=False
            )
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _headers(self, request: web.Request, response: web.StreamResponse) -> None:
        """Every response, errors and the websocket handshake included, as it is sent."""
        del request
        headers = response.headers
        headers.setdefault("Content-Security-Policy", _CSP)
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("X-Frame-Options", "DENY")
        # same-origin, not no-referrer: with no-referrer a form POST carries "Origin: null".
        headers.setdefault("Referrer-Policy", "same-origin")
        headers.setdefault("Cache-Control", "no-store")
        if self.secure_cookies:
            headers.setdefault("Strict-Transport-Security", "max-age=31536000")

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        path = request.path
        if path in _PUBLIC or path == "/metrics":  # /metrics checks for itself
            return await handler(request)
        if self.config.console is None:  # the exporter: nothing else exists (404)
            return await handler(request)
        session = self.session_of(request)
        if session is None:
            if path == "/" and request.method in ("GET", "HEAD"):
                raise web.HTTPSeeOther("/login")
            raise web.HTTPUnauthorized(
                text="log in first (/login)\n", headers={"WWW-Authenticate": "Cookie"}
            )
        request[SESSION] = session
        return await handler(request)

    def session_of(self, request: web.Request) -> WebSession | None:
        """The live session of the request's cookie, if any."""
        return self.sessions.get(request.cookies.get(self.cookie))

    def origin_ok(self, request: web.Request, *, required: bool) -> bool:
        """Whether the request comes from a page of this server (the ``Origin`` header)."""
        origin = request.headers.get("Origin")
        if origin is None:
            return not required
        if self.config.public_origin is not None:
            return origin == self.config.public_origin
        parts = urlsplit(origin)
        scheme = "https" if self.config.tls else "http"
        return parts.scheme == scheme and parts.netloc == request.host and not parts.path

    # -- login -------------------------------------------------------------------------

    def users(self) -> dict[str, User]:
        """The users file, read again when it changed (``users add`` needs no restart)."""
        path = self.config.users_path
        assert path is not None
        try:
            mtime = path.stat().st_mtime
        except OSError:
            mtime = None
        if mtime != self._users_mtime:
            self._users = load_users(path)
            self._users_mtime = mtime
        return self._users

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        """GET /login: the form (or the console, when already logged in)."""
        if self.session_of(request) is not None:
            raise web.HTTPSeeOther("/")
        return self._login_response("")

    def _login_response(self, error: str, status: int = 200) -> web.Response:
        return web.Response(
            text=login_page(self.config.where, error), content_type="text/html", status=status
        )

    async def login(self, request: web.Request) -> web.StreamResponse:
        """POST /login: check the password, limit failures, start a session."""
        if not self.origin_ok(request, required=False):
            log.warning("login refused: foreign origin from %s", request.remote)
            raise web.HTTPForbidden(text="cross-origin login refused\n")
        form = await request.post()
        name = str(form.get("user", ""))[:64]
        password = str(form.get("password", ""))
        address = request.remote or "?"
        shown = ascii(name)
        wait = self.limiter.retry_after(name, address)
        if wait > 0:
            log.warning("login refused for %s from %s: rate-limited", shown, address)
            minutes = max(1, round(wait / 60))
            return self._login_response(
                f"Too many failed logins: try again in about {minutes} min.", status=429
            )
        users = self.users()
        # argon2 takes tens of milliseconds of CPU: off the loop, which relays consoles.
        user = await asyncio.get_running_loop().run_in_executor(None, verify, users, name, password)
        if user is None:
            self.limiter.failed(name, address)
            log.warning("login failed for %s from %s", shown, address)
            return self._login_response("Wrong user name or password.", status=401)
        self.limiter.succeeded(name)
        session = self.sessions.create(user.name, user.role)
        log.info("login: %s (%s) from %s", user.name, user.role.value, address)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            self.cookie,
            session.sid,
            max_age=int(self.sessions.lifetime),
            path="/",
            secure=self.secure_cookies,
            httponly=True,
            samesite="Strict",
        )
        raise response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """POST /logout: end the session (its consoles end within a second)."""
        if not self.origin_ok(request, required=False):
            raise web.HTTPForbidden(text="cross-origin logout refused\n")
        session = request[SESSION]
        self.sessions.end(session.sid)
        log.info("logout: %s", session.user)
        response = web.HTTPSeeOther("/login")
        response.del_cookie(self.cookie, path="/")
        raise response

    # -- the console -------------------------------------------------------------------

    def _base_url(self, request: web.Request, scheme: str) -> str:
        if self.config.public_origin is not None:
            origin = urlsplit(self.config.public_origin)
            secure = origin.scheme == "https"
            return f"{scheme}{'s' if secure else ''}://{origin.netloc}"
        return f"{scheme}{'s' if self.config.tls else ''}://{request.host}"

    async def index(self, request: web.Request) -> web.StreamResponse:
        """GET /: the console page."""
        session = request[SESSION]
        page = console_page(
            self.config.where,
            session.user,
            session.role.value,
            f"{self._base_url(request, 'ws')}/ws",
        )
        return web.Response(text=page, content_type="text/html")

    async def websocket(self, request: web.Request) -> web.StreamResponse:
        """GET /ws: a console process for this session, relayed both ways."""
        session = request[SESSION]
        if not self.origin_ok(request, required=True):
            log.warning(
                "websocket refused for %s: origin %s",
                session.user,
                ascii(request.headers.get("Origin", "")[:100]),
            )
            raise web.HTTPForbidden(text="websocket origin refused\n")
        assert self.config.console is not None
        ws = web.WebSocketResponse(heartbeat=15, max_msg_size=64 * 1024)
        await ws.prepare(request)
        if len(self.live) >= self.config.max_sessions:
            log.warning("console refused for %s: %d sessions open", session.user, len(self.live))
            await _close(
                ws,
                f"too many console sessions (at most {self.config.max_sessions}): "
                "close another one and start again",
            )
            return ws
        width = _clamp(request.query.get("width"), 80, 20, 500)
        height = _clamp(request.query.get("height"), 24, 5, 300)
        argv, env = self.config.console(session)
        service = ConsoleService(
            argv, env, write_bytes=ws.send_bytes, write_str=ws.send_str, close=_nothing
        )
        try:
            await service.start(width, height)
        except OSError as exc:
            log.error("console for %s could not start: %s", session.user, exc)
            await _close(ws, "the console process could not start (see the server log)")
            return ws
        live = LiveConsole(session, ws, service, self.clock())
        self.live.add(live)
        log.info("console started for %s (%s)", session.user, session.role.value)
        await self._run(live)
        return ws

    async def _run(self, live: LiveConsole) -> None:
        inbox = asyncio.ensure_future(self._relay_input(live))
        watch = asyncio.ensure_future(self._watch(live))
        relay = live.service.relay
        waiting: set[asyncio.Future[Any]] = {inbox, watch}
        if relay is not None:
            waiting.add(relay)
        code: int | None = None
        try:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if relay in done and live.end_reason is None:
                process = live.service.process
                code = await process.wait() if process is not None else None
                if code == 0:
                    live.end_reason = "the console was quit"
                else:
                    live.end_reason = f"{exit_line(code)}; see the server log"
                    log.error("console of %s ended: %s", live.session.user, exit_line(code))
        finally:
            for task in (inbox, watch):
                task.cancel()
            code = await live.service.shutdown()
            self.live.discard(live)
            log.info("console of %s ended (exit %s)", live.session.user, code)
            if not live.ws.closed:
                await _close(live.ws, live.end_reason or "the browser closed the console")

    async def _relay_input(self, live: LiveConsole) -> None:
        """Browser -> process: keys, resizes, pings, focus (textual-serve's envelopes)."""
        service = live.service
        async for message in live.ws:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
                kind, data = envelope[0], envelope[1] if len(envelope) > 1 else None
            except (ValueError, TypeError, IndexError, KeyError):
                continue  # not textual.js: ignored, as textual-serve would not do
            if kind == "stdin" and isinstance(data, str):
                live.last_input = self.clock()
                await service.send_bytes(data.encode("utf-8"))
            elif kind == "resize" and isinstance(data, dict):
                width = _clamp(data.get("width"), 80, 20, 500)
                height = _clamp(data.get("height"), 24, 5, 300)
                await service.set_terminal_size(width, height)
            elif kind == "ping":
                await live.ws.send_json(["pong", data])
            elif kind == "blur":
                await service.blur()
            elif kind == "focus":
                await service.focus()

    async def _watch(self, live: LiveConsole) -> None:
        """End the console when its login ends or nobody typed in it for too long."""
        while True:
            await asyncio.sleep(WATCH_EVERY)
            idle = self.config.idle_timeout
            if self.sessions.get(live.session.sid) is None:
                live.end_reason = "your login ended (logged out or expired): log in again"
                return
            if idle and self.clock() - live.last_input >= idle:
                live.end_reason = f"idle for {idle:g} s"
                log.info("console of %s ended: idle", live.session.user)
                return

    async def _on_shutdown(self, app: web.Application) -> None:
        """SIGTERM: tell every page why, then stop every console process."""
        del app
        lives = list(self.live)
        for live in lives:
            live.end_reason = "the server is shutting down"
        await asyncio.gather(
            *(_close(live.ws, "the server is shutting down") for live in lives),
            *(live.service.shutdown() for live in lives),
            return_exceptions=True,
        )

    # -- machines ----------------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.StreamResponse:
        """GET /healthz: the server runs (says nothing about the fleet: /metrics does)."""
        del request
        return web.Response(text="ok\n")

    async def metrics(self, request: web.Request) -> web.StreamResponse:
        """GET /metrics: a bearer token, or a logged-in browser; open on an exporter
        started without a token file."""
        tokens = self.config.tokens
        allowed = bearer_ok(tokens, request.headers.get("Authorization"))
        if not allowed and self.config.console is not None:
            allowed = self.session_of(request) is not None
        elif not allowed and not tokens:
            allowed = True  # an exporter without --token-file
        if not allowed:
            log.warning("metrics refused from %s: no valid token", request.remote)
            raise web.HTTPUnauthorized(
                text="a bearer token is required\n", headers={"WWW-Authenticate": "Bearer"}
            )
        text = await self.scrape.text()
        return web.Response(
            text=text, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}
        )


async def _nothing() -> None:
    """textual-serve's close callback: the relay's end is handled by :meth:`WebServer._run`."""


async def _close(ws: web.WebSocketResponse, reason: str) -> None:
    """Close a websocket with a reason the page shows (at most 123 bytes, as RFC 6455 allows)."""
    data = reason.encode("utf-8")[:120]
    with contextlib.suppress(Exception):
        await ws.close(code=CLOSE_ENDED, message=data.decode("utf-8", "ignore").encode())


def _clamp(value: object, default: int, low: int, high: int) -> int:
    try:
        number = int(str(value))
    except ValueError:
        return default
    return max(low, min(high, number))
