"""``byconsole serve`` over HTTP: nothing without a login, cookies, Origin, rate limits,
bearer tokens, /metrics, session limits (README "byconsole in a browser")."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from byconsole import cli as byconsole_cli
from byconsole.web.auth import MAX_FAILURES
from tests.redis_server import env_with, free_port
from tests.web.conftest import PASSWORDS, Web, make_web, start_serve, stop_serve

BYCONSOLE = str(Path(sys.executable).parent / "byconsole")
TOKEN = "t" * 40


async def test_nothing_but_the_login_page_without_a_session(web: Web) -> None:
    client = web.client
    response = await client.get("/", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/login"
    page = await client.get("/login")
    assert page.status == 200 and 'name="password"' in await page.text()
    assert "Content-Security-Policy" in page.headers
    assert (await client.get("/web/login.css")).status == 200
    for path in ("/static/js/textual.js", "/static/css/xterm.css", "/web/console.js", "/x"):
        assert (await client.get(path)).status == 401, path
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await client.ws_connect("/ws", headers={"Origin": web.origin})
    assert refused.value.status == 401
    assert (await client.get("/metrics")).status == 401
    health = await client.get("/healthz")
    assert health.status == 200
    assert not web.server.live  # no console process was started
    # Every answer, refusals included, carries the same protective headers.
    for response in (page, health, await client.get("/static/js/textual.js")):
        assert response.headers["X-Frame-Options"] == "DENY"
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]


async def test_login_sets_a_strict_http_only_expiring_cookie(web: Web) -> None:
    response = await web.client.post(
        "/login",
        data={"user": "vic", "password": PASSWORDS["vic"]},
        headers={"Origin": web.origin},
        allow_redirects=False,
    )
    assert response.status == 303
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith("byconsole_session=")
    for attribute in ("HttpOnly", "SameSite=Strict", "Max-Age=28800", "Path=/"):
        assert attribute in cookie
    assert "Secure" not in cookie  # plain HTTP on loopback: a Secure cookie would not return
    page = await web.client.get("/")
    assert page.status == 200 and "vic (viewer)" in await page.text()
    assert (await web.client.get("/static/js/textual.js")).status == 200
    # Logging out ends the session: the same cookie opens nothing any more.
    jar = {c.key: c.value for c in web.client.session.cookie_jar}
    out = await web.client.post("/logout", headers={"Origin": web.origin}, allow_redirects=False)
    assert out.status == 303
    again = await web.client.get("/static/js/textual.js", cookies=jar)
    assert again.status == 401


async def test_the_cookie_is_secure_behind_tls(redis_url: str, users_file: Path) -> None:
    async with make_web(redis_url, users_file, public_origin="https://console.example") as web:
        response = await web.client.post(
            "/login",
            data={"user": "vic", "password": PASSWORDS["vic"]},
            headers={"Origin": "https://console.example"},
            allow_redirects=False,
        )
        cookie = response.headers["Set-Cookie"]
        assert cookie.startswith("__Host-byconsole=") and "Secure" in cookie
        assert "max-age" in response.headers["Strict-Transport-Security"]
        # A login posted from another site is refused.
        foreign = await web.client.post(
            "/login",
            data={"user": "vic", "password": PASSWORDS["vic"]},
            headers={"Origin": "https://evil.example"},
            allow_redirects=False,
        )
        assert foreign.status == 403


async def test_the_websocket_refuses_a_foreign_origin(web: Web) -> None:
    assert await web.login("olga") == 303
    for origin in ("http://evil.example", "null", f"{web.origin}.evil.example"):
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await web.client.ws_connect("/ws", headers={"Origin": origin})
        assert refused.value.status == 403, origin
    with pytest.raises(aiohttp.WSServerHandshakeError) as missing:
        await web.client.ws_connect("/ws")  # no Origin at all
    assert missing.value.status == 403
    assert not web.server.live


async def test_five_wrong_passwords_are_rate_limited_and_logged(
    web: Web, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "byconsole.web")
    for _ in range(MAX_FAILURES):
        assert await web.login("olga", "wrong password!") == 401
    # The right password no longer helps, for that name and from that address.
    assert await web.login("olga") == 429
    assert await web.login("vic") == 429
    page = await web.client.post(
        "/login", data={"user": "olga", "password": "x"}, headers={"Origin": web.origin}
    )
    assert "Too many failed logins" in await page.text()
    failed = [r.getMessage() for r in caplog.records if "login failed" in r.getMessage()]
    assert failed == ["login failed for 'olga' from 127.0.0.1"] * MAX_FAILURES
    assert any("rate-limited" in r.getMessage() for r in caplog.records)
    assert not any(PASSWORDS["olga"] in r.getMessage() for r in caplog.records)


async def test_an_unknown_name_is_refused_like_a_wrong_password(web: Web) -> None:
    assert await web.login("olga", "") == 401
    response = await web.client.post(
        "/login",
        data={"user": "mallory\x1b[2J", "password": "whatever"},
        headers={"Origin": web.origin},
    )
    assert response.status == 401 and "Wrong user name or password" in await response.text()


async def test_metrics_need_a_token_or_a_session_and_parse(
    redis_url: str, users_file: Path
) -> None:
    async with make_web(redis_url, users_file, tokens=[TOKEN]) as web:
        assert (await web.client.get("/metrics")).status == 401
        wrong = await web.client.get("/metrics", headers={"Authorization": f"Bearer {'u' * 40}"})
        assert wrong.status == 401
        response = await web.client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        families = {f.name: f for f in text_string_to_metric_families(await response.text())}
        assert families["byconsole_up"].samples[0].value == 1
        assert {"byconsole_workers", "byconsole_type_depth"} <= set(families)
        # A logged-in browser may read them too (the same cached text).
        assert await web.login("vic") == 303
        assert (await web.client.get("/metrics")).status == 200
        assert len(web.reads) == 1


async def test_a_hundred_concurrent_scrapes_make_one_fleet_read_per_interval(
    redis_url: str, users_file: Path
) -> None:
    now = [1000.0]
    async with make_web(redis_url, users_file, clock=lambda: now[0], tokens=[TOKEN]) as web:
        headers = {"Authorization": f"Bearer {TOKEN}"}

        async def scrape() -> str:
            response = await web.client.get("/metrics", headers=headers)
            assert response.status == 200
            return await response.text()

        first = await asyncio.gather(*(scrape() for _ in range(100)))
        assert len(web.reads) == 1 and len(set(first)) == 1
        now[0] += 9.9  # within the interval: still the cached text
        await asyncio.gather(*(scrape() for _ in range(100)))
        assert len(web.reads) == 1
        now[0] += 0.2  # the interval has passed: the next scrapes share one new read
        await asyncio.gather(*(scrape() for _ in range(100)))
        assert len(web.reads) == 2
        assert web.scrape.reads == 2


async def _first_bytes(ws: aiohttp.ClientWebSocketResponse) -> None:
    """Wait until the console process drew something."""
    async with asyncio.timeout(30):
        while True:
            message = await ws.receive()
            if message.type == aiohttp.WSMsgType.BINARY and len(message.data) > 10:
                return
            assert message.type not in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)


async def _close_reason(ws: aiohttp.ClientWebSocketResponse) -> str:
    async with asyncio.timeout(30):
        while True:
            message = await ws.receive()
            if message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                return str(message.extra or "")


async def test_session_limit_and_idle_end(redis_url: str, users_file: Path) -> None:
    async with make_web(redis_url, users_file, max_sessions=1, idle_timeout=0) as web:
        assert await web.login("vic") == 303
        first = await web.client.ws_connect("/ws", headers={"Origin": web.origin})
        await _first_bytes(first)
        assert len(web.server.live) == 1
        # At the limit: a second console is refused, and told why.
        second = await web.client.ws_connect("/ws", headers={"Origin": web.origin})
        assert "too many console sessions (at most 1)" in await _close_reason(second)
        # Nobody typed: with an idle limit, the first ends, its process stopped.
        web.server.config.idle_timeout = 1.5
        (live,) = web.server.live
        process = live.service.process
        assert process is not None
        assert await _close_reason(first) == "idle for 1.5 s"
        assert process.returncode is not None
        assert not web.server.live


async def test_logout_ends_the_console_and_a_dead_one_is_reported(
    redis_url: str, users_file: Path
) -> None:
    async with make_web(redis_url, users_file) as web:
        assert await web.login("olga") == 303
        ws = await web.client.ws_connect("/ws", headers={"Origin": web.origin})
        await _first_bytes(ws)
        # Logged out elsewhere (another tab): this console ends too, and says why.
        await web.client.post("/logout", headers={"Origin": web.origin}, allow_redirects=False)
        reason = await _close_reason(ws)
        assert reason == "your login ended (logged out or expired): log in again"
        assert not web.server.live
        assert await web.login("olga") == 303
        ws = await web.client.ws_connect("/ws", headers={"Origin": web.origin})
        await _first_bytes(ws)
        (live,) = web.server.live
        assert live.service.process is not None
        os.kill(live.service.process.pid, signal.SIGKILL)
        reason = await _close_reason(ws)
        assert reason == "the console process was killed (SIGKILL); see the server log"
        assert not web.server.live


def test_users_add_reads_the_password_from_stdin_never_argv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "users"
    add = ["users", "add", "ann", "--role", "viewer", "--users", str(path)]
    # The real executable, the password on its stdin.
    done = subprocess.run(
        [BYCONSOLE, *add], input="a long enough password\n", capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"byconsole: user ann added (viewer) in {path}\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    text = path.read_text()
    assert "ann:viewer:$argon2id$" in text and "a long enough password" not in text
    for argv, stdin, says in (
        (add, "short\n", "the password must have at least 12 characters"),
        ([*add, "--password", "x" * 20], "", "unrecognized arguments: --password"),
        (["users", "add", "a:b", "--role", "viewer"], "long enough pw!\n", "'a:b' is not valid"),
    ):
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        assert byconsole_cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("byconsole: error: ") and says in err and err.count("\n") == 1
    assert path.read_text() == text  # nothing written by the refused ones


def test_plain_http_beyond_loopback_is_refused_unless_asked(
    redis_url: str, users_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    serve = ["--redis-url", redis_url, "serve", "--users", str(users_file)]
    serve += ["--listen", "192.0.2.1:8765"]
    assert byconsole_cli.main(serve) == 2
    refused = capsys.readouterr().err
    assert refused.startswith("byconsole: error: refusing to serve plain HTTP on 192.0.2.1")
    assert refused.count("\n") == 1
    # --insecure-http warns, then tries (192.0.2.1 is not this machine's: cannot listen).
    assert byconsole_cli.main([*serve, "--insecure-http"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("byconsole serve: warning: plain HTTP on 192.0.2.1")
    assert lines[-1].startswith("byconsole: error: cannot listen on 192.0.2.1:8765")


async def test_over_tls_then_sigterm_stops_the_consoles_and_exits_cleanly(
    redis_url: str, users_file: Path, tmp_path: Path
) -> None:
    served = await asyncio.to_thread(start_serve, redis_url, users_file, tmp_path, tls=True)
    assert served.tls is not None
    connector = aiohttp.TCPConnector(ssl=served.tls)
    jar = aiohttp.CookieJar(unsafe=True)
    try:
        async with aiohttp.ClientSession(connector=connector, cookie_jar=jar) as http:
            login = await http.post(
                f"{served.url}/login",
                data={"user": "vic", "password": PASSWORDS["vic"]},
                headers={"Origin": served.url},
                allow_redirects=False,
            )
            assert login.status == 303
            cookie = login.headers["Set-Cookie"]
            assert cookie.startswith("__Host-byconsole=") and "Secure" in cookie
            page = await http.get(f"{served.url}/")
            assert f'data-session-websocket-url="wss://127.0.0.1:{served.port}/ws"' in (
                await page.text()
            )
            ws = await http.ws_connect(f"{served.url}/ws", headers={"Origin": served.url})
            await _first_bytes(ws)
            (console,) = served.children()
            os.kill(served.proc.pid, signal.SIGTERM)
            assert await _close_reason(ws) == "the server is shutting down"
        assert await asyncio.to_thread(served.proc.wait, 20) == 0
        assert not await asyncio.to_thread(Path(f"/proc/{console}").exists)
        log = await asyncio.to_thread(served.log.read_text)
        assert log.rstrip().endswith("byconsole serve: stopped")
    finally:
        stop_serve(served)


async def test_the_exporter_serves_metrics_and_health_only(
    redis_url: str, users_file: Path
) -> None:
    async with make_web(redis_url, users_file, console=None) as web:
        # Without a token file the exporter is open (as node_exporter is) ...
        response = await web.client.get("/metrics")
        families = {f.name for f in text_string_to_metric_families(await response.text())}
        assert response.status == 200 and "byconsole_up" in families
        assert (await web.client.get("/healthz")).status == 200
        # ... and serves nothing else.
        for path in ("/", "/login", "/ws", "/static/js/textual.js"):
            assert (await web.client.get(path)).status == 404, path


async def test_byconsole_exporter_with_a_token(redis_url: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN + "\n")
    port = free_port()
    args = [BYCONSOLE, "exporter", "--listen", f"127.0.0.1:{port}", "--token-file", str(tokens)]
    log = tmp_path / "exporter.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env_with(redis_url), stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        async with aiohttp.ClientSession() as http:
            async with asyncio.timeout(30):
                while True:
                    try:
                        refused = await http.get(url)
                        break
                    except aiohttp.ClientConnectionError:
                        assert proc.poll() is None, "the exporter exited"
                        await asyncio.sleep(0.1)
            assert refused.status == 401
            ok = await http.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
            families = {f.name: f for f in text_string_to_metric_families(await ok.text())}
            assert families["byconsole_up"].samples[0].value == 1
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
