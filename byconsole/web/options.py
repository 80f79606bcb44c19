"""The command lines of ``byconsole serve``, ``byconsole exporter`` and ``byconsole users``.

Only argparse here: ``byconsole --help`` and ``--snapshot`` load none of the web stack.
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable
from pathlib import Path

from byconsole.config import default_config_path

DEFAULT_LISTEN = "127.0.0.1:8765"
DEFAULT_EXPORTER_LISTEN = "127.0.0.1:9765"
DEFAULT_MAX_SESSIONS = 8
DEFAULT_IDLE_TIMEOUT = 1800.0


def default_users_path() -> Path:
    """``users`` beside the config file (``~/.config/byconsole/users``)."""
    return default_config_path().parent / "users"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a host and a port."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8765)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the port is not a number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r}: the port must be from 0 to 65535")
    return host, port


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host`` (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere


def _sessions(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 1 to 1000")
    return value


def _seconds_from(low: float, high: float, bounds: str) -> Callable[[str], float]:
    """An argparse type: a number of seconds from ``low`` to ``high`` (said as ``bounds``)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} must be from {bounds}")
        return value

    return parse


_idle = _seconds_from(0, 7 * 86400, "0 (never) to 604800")
_interval = _seconds_from(0.5, 3600, "0.5 to 3600")
_refresh = _seconds_from(0.1, 3600, "0.1 to 3600")


def _origin(text: str) -> str:
    scheme, sep, rest = text.partition("://")
    if scheme not in ("http", "https") or not sep or not rest or "/" in rest.rstrip("/"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an origin (scheme://host[:port], e.g. https://console.example.com)"
        )
    return f"{scheme}://{rest.rstrip('/')}"


def _http_args(p: argparse.ArgumentParser, listen: str) -> None:
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        type=parse_listen,
        default=parse_listen(listen),
        help=f"address to listen on (default {listen})",
    )
    p.add_argument(
        "--token-file",
        metavar="PATH",
        type=Path,
        help="bearer tokens for machines (one per line) that may read /metrics",
    )
    p.add_argument("--tls-cert", metavar="PEM", type=Path, help="TLS certificate chain")
    p.add_argument("--tls-key", metavar="PEM", type=Path, help="TLS private key")
    p.add_argument(
        "--insecure-http",
        action="store_true",
        help="allow plain HTTP on a non-loopback address (passwords and cookies in clear)",
    )
    p.add_argument(
        "--scrape-interval",
        metavar="S",
        type=_interval,
        default=10.0,
        help="seconds one fleet read serves /metrics scrapes (default 10)",
    )


def add_serve_args(p: argparse.ArgumentParser) -> None:
    """``byconsole serve``'s own options."""
    _http_args(p, DEFAULT_LISTEN)
    p.add_argument(
        "--users",
        metavar="FILE",
        type=Path,
        default=None,
        help=f"users and password hashes (default {default_users_path()})",
    )
    p.add_argument(
        "--max-sessions",
        metavar="N",
        type=_sessions,
        default=DEFAULT_MAX_SESSIONS,
        help=f"console sessions at once, over all users (default {DEFAULT_MAX_SESSIONS})",
    )
    p.add_argument(
        "--idle-timeout",
        metavar="S",
        type=_idle,
        default=DEFAULT_IDLE_TIMEOUT,
        help=f"end a console nobody typed in for S seconds (default {DEFAULT_IDLE_TIMEOUT:g}; "
        "0: never)",
    )
    p.add_argument(
        "--public-origin",
        metavar="URL",
        type=_origin,
        help="the origin browsers see behind a reverse proxy (e.g. https://console.example.com)",
    )
    p.add_argument(
        "--refresh",
        metavar="SECONDS",
        type=_refresh,
        default=2.0,
        help="each console's refresh interval (default 2)",
    )
    p.set_defaults(handler=None, write=False)


def add_exporter_args(p: argparse.ArgumentParser) -> None:
    """``byconsole exporter``'s own options."""
    _http_args(p, DEFAULT_EXPORTER_LISTEN)
    p.set_defaults(handler=None, write=False)


def add_users_args(p: argparse.ArgumentParser) -> None:
    """``byconsole users add NAME --role R``."""
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = sub.add_parser(
        "add",
        help="add a user, or set an existing one's role and password",
        description="Add a user to the users file of byconsole serve. The password is read "
        "from the terminal (asked twice) or, when stdin is not a terminal, from its first line; "
        "never from the command line.",
    )
    add.add_argument("name", metavar="NAME")
    add.add_argument("--role", choices=("viewer", "operator"), required=True)
    add.add_argument(
        "--users",
        metavar="FILE",
        type=Path,
        default=None,
        help=f"the users file (default {default_users_path()})",
    )
    p.set_defaults(handler=None, write=False)
