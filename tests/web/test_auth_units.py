"""The parts of ``byconsole serve`` that decide who gets in, one at a time (no server)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from byconsole.styles import CellStyles
from byconsole.tui.views.events import event_cells
from byconsole.web.auth import FAILURE_WINDOW, LoginLimiter, Sessions, bearer_ok, load_tokens
from byconsole.web.options import is_loopback, parse_listen
from byconsole.web.users import Role, add_user, load_users, verify
from worker_runtime.audit import audit_fields
from worker_runtime.models import AdminAction, AuditEvent
from worker_runtime.settings import ConfigError


def test_failed_logins_lock_a_name_and_an_address_for_the_window() -> None:
    now = [0.0]
    limiter = LoginLimiter(clock=lambda: now[0])
    for _ in range(4):
        limiter.failed("olga", "10.0.0.1")
    assert limiter.retry_after("olga", "10.0.0.1") == 0
    limiter.failed("olga", "10.0.0.1")
    assert limiter.retry_after("olga", "10.0.0.9") == FAILURE_WINDOW  # the name, anywhere
    assert limiter.retry_after("vic", "10.0.0.1") == FAILURE_WINDOW  # the address, any name
    assert limiter.retry_after("vic", "10.0.0.9") == 0
    now[0] = FAILURE_WINDOW + 0.1  # the failures left the window
    assert limiter.retry_after("olga", "10.0.0.1") == 0
    for _ in range(3):
        limiter.failed("olga", "10.0.0.1")
    limiter.succeeded("olga")  # clears the name's count, not the address's
    for _ in range(2):
        limiter.failed("olga", "10.0.0.2")
    assert limiter.retry_after("olga", "10.0.0.2") == 0


def test_sessions_expire_and_end() -> None:
    now = [0.0]
    sessions = Sessions(lifetime=100.0, clock=lambda: now[0])
    session = sessions.create("vic", Role.VIEWER)
    assert len(session.sid) >= 43 and sessions.get(session.sid) is session
    assert sessions.get("forged") is None and sessions.get(None) is None
    now[0] = 100.0
    assert sessions.get(session.sid) is None
    other = sessions.create("olga", Role.OPERATOR)
    sessions.end(other.sid)
    assert sessions.get(other.sid) is None


def test_tokens(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# scrapers\n" + "a" * 40 + "\n\n" + "b" * 32 + "\n")
    tokens = load_tokens(path)
    assert tokens == ["a" * 40, "b" * 32]
    assert bearer_ok(tokens, "Bearer " + "b" * 32)
    for header in (None, "", "a" * 40, "Basic " + "a" * 40, "Bearer " + "a" * 39, "Bearer "):
        assert not bearer_ok(tokens, header)
    path.write_text("short\n")
    with pytest.raises(ConfigError, match=r"token 1 of .* is not valid: at least 32"):
        load_tokens(path)
    path.write_text("# nothing\n")
    with pytest.raises(ConfigError, match="holds no token"):
        load_tokens(path)


def test_the_users_file(tmp_path: Path) -> None:
    path = tmp_path / "users"
    assert add_user(path, "ann", Role.VIEWER, "first password!")
    assert not add_user(path, "ann", Role.OPERATOR, "second password!")  # replaced
    users = load_users(path)
    assert users["ann"].role is Role.OPERATOR
    assert verify(users, "ann", "second password!") == users["ann"]
    assert verify(users, "ann", "first password!") is None
    assert verify(users, "bob", "second password!") is None
    path.write_text(path.read_text() + "bob:admin:$argon2id$v=19$x\n")
    with pytest.raises(ConfigError, match="role 'admin' is not viewer or operator"):
        load_users(path)
    path.write_text("bob:viewer\n")
    with pytest.raises(ConfigError, match=r"users:1: expected name:role:argon2-hash"):
        load_users(path)
    path.write_text("bob:viewer:$argon2id$not-a-hash\n")
    assert verify(load_users(path), "bob", "anything at all") is None  # no exception


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_listen("[::1]:0") == ("::1", 0)
    for host in ("127.0.0.1", "127.3.2.1", "::1", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.1.2.3", "console.example.com"):
        assert not is_loopback(host), host
    with pytest.raises(argparse.ArgumentTypeError):
        parse_listen(":8765")


def test_the_audit_names_the_web_user_only_when_there_is_one() -> None:
    plain = audit_fields("ops@host", AdminAction.SUSPEND, "w1", "why", redis_user="default")
    assert "web_user" not in plain
    web = audit_fields("ops@host", AdminAction.SUSPEND, "w1", "why", "", "default", "olga")
    assert web["web_user"] == "olga" and web["operator"] == "ops@host"
    event = AuditEvent.parse("1-0", web)
    assert event.web_user == "olga"
    cells = event_cells(event, CellStyles())
    assert cells[1].plain == "olga (web) ops@host"
    assert event_cells(AuditEvent.parse("1-0", plain), CellStyles())[1].plain == "ops@host"
