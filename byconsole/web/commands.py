"""``byconsole serve``, ``byconsole exporter`` and ``byconsole users add``.

Errors are one line (exit 2), as everywhere in byconsole; a refused listen address says
which flag would allow it.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import ssl
import sys
from collections.abc import Callable
from pathlib import Path

from byconsole.config import Context
from byconsole.config import health_policy as context_policy
from byconsole.web.auth import WebSession
from byconsole.web.identity import WEB_ROLE_ENV, WEB_USER_ENV
from byconsole.web.options import default_users_path, is_loopback
from byconsole.web.users import Role, add_user, load_users
from worker_runtime.settings import ConfigError, RedisSettings
from worker_runtime.snapshot import FleetSnapshot


def read_password() -> str:
    """The new password: asked twice on a terminal, else the first line of stdin."""
    if sys.stdin.isatty():
        first = getpass.getpass("password: ")
        if getpass.getpass("again: ") != first:
            raise ConfigError("the two passwords differ")
        return first
    line = sys.stdin.readline()
    return line.rstrip("\r\n")


def run_users(args: argparse.Namespace) -> int:
    """``byconsole users add NAME --role R``: write the users file."""
    path: Path = args.users or default_users_path()
    load_users(path)  # a malformed file is reported before a password is asked
    password = read_password()
    new = add_user(path, args.name, Role(args.role), password)
    verb = "added" if new else "updated"
    sys.stderr.write(f"byconsole: user {args.name} {verb} ({args.role}) in {path}\n")
    return 0


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together")
    if args.tls_cert is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(args.tls_cert, args.tls_key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the TLS certificate or key: {exc}") from None
    return context


def _check_listen(host: str, tls: bool, insecure: bool, command: str) -> None:
    if tls or is_loopback(host):
        return
    if not insecure:
        raise ConfigError(
            f"refusing to serve plain HTTP on {host}, reachable from other machines: "
            f"give --tls-cert/--tls-key (or --insecure-http behind a TLS proxy on this host)"
        )
    sys.stderr.write(
        f"byconsole {command}: warning: plain HTTP on {host}: passwords, cookies and "
        "tokens cross the network in clear\n"
    )


def console_argv(args: argparse.Namespace, read_only: bool) -> tuple[list[str], dict[str, str]]:
    """The console command line every session runs, and the environment it adds.

    The Redis URL given as ``--redis-url`` goes in the environment, not the argument
    list (other users of the machine can read argument lists).
    """
    argv = [sys.executable, "-m", "byconsole", "--refresh", f"{args.refresh:g}"]
    env: dict[str, str] = {}
    if args.config:
        argv += ["--config", args.config]
    if args.context:
        argv += ["--context", args.context]
    if args.redis_url_file:
        argv += ["--redis-url-file", args.redis_url_file]
    if args.redis_url:
        env["BYAI_REDIS_URL"] = args.redis_url
    if read_only:
        argv.append("--read-only")
    return argv, env


def session_command(
    argv: list[str], env: dict[str, str], *, read_only: bool
) -> Callable[[WebSession], tuple[list[str], dict[str, str]]]:
    """What each session runs: the console, ``--read-only`` for a viewer (or for everyone
    when the serve process itself is read-only), naming its web user."""

    def command(session: WebSession) -> tuple[list[str], dict[str, str]]:
        viewer = session.role is Role.VIEWER or read_only
        session_argv = [*argv, "--read-only"] if viewer else list(argv)
        return session_argv, {
            **env,
            WEB_USER_ENV: session.user,
            WEB_ROLE_ENV: session.role.value,
        }

    return command


def run_web(
    args: argparse.Namespace,
    settings: RedisSettings,
    context_name: str | None,
    context: Context | None,
    read_only: bool,
) -> int:
    """``byconsole serve`` / ``byconsole exporter`` until SIGTERM or Ctrl-C."""
    from aiohttp import web

    from byconsole.web.auth import load_tokens
    from byconsole.web.scrape import ScrapeCache
    from byconsole.web.server import ServeConfig, WebServer
    from worker_runtime.connection import create_redis, redis_error_line
    from worker_runtime.fleet import FleetReader

    serve = args.command == "serve"
    tls = _tls(args)
    host, port = args.listen
    _check_listen(host, tls is not None, args.insecure_http, args.command)
    tokens = load_tokens(args.token_file) if args.token_file else []
    where = f"context {context_name}" if context_name else settings.endpoint
    config = ServeConfig(where=where, tokens=tokens, tls=tls is not None)
    if serve:
        users_path: Path = args.users or default_users_path()
        users = load_users(users_path)
        if not users:
            raise ConfigError(
                f"no users in {users_path}: add one with "
                f"'byconsole users add NAME --role operator --users {users_path}'"
            )
        base_argv, base_env = console_argv(args, read_only=False)
        config.users_path = users_path
        config.console = session_command(base_argv, base_env, read_only=read_only)
        config.public_origin = args.public_origin
        config.max_sessions = args.max_sessions
        config.idle_timeout = args.idle_timeout

    logging.basicConfig(
        level=logging.INFO,
        format=f"byconsole {args.command}: %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def make_app() -> web.Application:
        client = create_redis(settings, retries=0)
        reader = FleetReader(
            client,
            settings.keys,
            endpoint=settings.endpoint,
            history_range=None,
            policy=context_policy(context),
        )

        async def read() -> FleetSnapshot:
            async with asyncio.timeout(10):
                return await reader.read()

        scrape = ScrapeCache(
            read,
            interval=args.scrape_interval,
            describe=lambda exc: redis_error_line(
                exc, endpoint=settings.endpoint, url=settings.url
            ),
        )
        app = WebServer(config, scrape).app()

        async def close_client(_: web.Application) -> None:
            await client.aclose()

        async def announce(_: web.Application) -> None:
            scheme = "https" if tls else "http"
            shown = f"[{host}]" if ":" in host else host
            sys.stderr.write(
                f"byconsole {args.command}: listening on {scheme}://{shown}:{port} ({where})\n"
            )
            sys.stderr.flush()

        app.on_startup.append(announce)
        app.on_cleanup.append(close_client)
        return app

    try:
        web.run_app(
            make_app(),
            host=host,
            port=port,
            ssl_context=tls,
            print=None,
            access_log=None,
            shutdown_timeout=10,
            handle_signals=True,
        )
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sys.stderr.write(f"byconsole {args.command}: stopped\n")
    return 0
