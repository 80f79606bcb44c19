"""Who may reach ``byconsole serve``: browser sessions, failed-login limits, bearer tokens.

Sessions live in the serve process's memory only: a restart logs everyone out, and no
session id is ever written anywhere. A session has an absolute lifetime (the cookie's
``Max-Age`` and the server's own check agree) and ends early on logout.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from byconsole.web.users import Role
from worker_runtime.settings import ConfigError

SESSION_LIFETIME = 8 * 3600.0
"""Seconds a login lasts (a working day), whatever the activity."""

MAX_FAILURES = 5
"""Failed logins allowed per user name and per client address within the window."""

FAILURE_WINDOW = 15 * 60.0
"""Seconds over which failures count; a locked name or address waits until the oldest
failure leaves the window."""

MIN_TOKEN = 32
"""Shortest bearer token accepted from a token file (``openssl rand -hex 32`` gives 64)."""


@dataclass
class WebSession:
    """One logged-in browser."""

    sid: str
    user: str
    role: Role
    expires: float
    """Monotonic deadline."""


@dataclass
class Sessions:
    """The live sessions, by their random id (the cookie's value)."""

    lifetime: float = SESSION_LIFETIME
    clock: Callable[[], float] = time.monotonic
    _by_id: dict[str, WebSession] = field(default_factory=dict)

    def create(self, user: str, role: Role) -> WebSession:
        """A new session (256 random bits) for a user who just proved their password."""
        self._expire()
        session = WebSession(secrets.token_urlsafe(32), user, role, self.clock() + self.lifetime)
        self._by_id[session.sid] = session
        return session

    def get(self, sid: str | None) -> WebSession | None:
        """The live session of a cookie value, if any."""
        if not sid:
            return None
        session = self._by_id.get(sid)
        if session is None:
            return None
        if session.expires <= self.clock():
            del self._by_id[sid]
            return None
        return session

    def end(self, sid: str | None) -> None:
        """Log out."""
        if sid:
            self._by_id.pop(sid, None)

    def _expire(self) -> None:
        now = self.clock()
        for sid in [s for s, v in self._by_id.items() if v.expires <= now]:
            del self._by_id[sid]


@dataclass
class LoginLimiter:
    """Failed logins per user name and per client address (sliding window).

    Both count: a guesser spreading over many names from one address is stopped by the
    address, a botnet guessing one name by the name. Behind a reverse proxy every
    client has the proxy's address, so the name limit is what still holds there.
    """

    max_failures: int = MAX_FAILURES
    window: float = FAILURE_WINDOW
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, deque[float]] = field(default_factory=dict)

    def retry_after(self, name: str, address: str) -> float:
        """Seconds until a login may be tried again for this name from this address (0: now)."""
        now = self.clock()
        wait = 0.0
        for key in (f"user:{name}", f"addr:{address}"):
            times = self._recent(key, now)
            if len(times) >= self.max_failures:
                wait = max(wait, times[0] + self.window - now)
        return wait

    def failed(self, name: str, address: str) -> None:
        """Count one failed login."""
        now = self.clock()
        for key in (f"user:{name}", f"addr:{address}"):
            self._recent(key, now).append(now)
        if len(self._failures) > 100_000:  # bounded memory under a flood of names
            for key in [k for k, v in self._failures.items() if not v or v[-1] < now - 60]:
                del self._failures[key]

    def succeeded(self, name: str) -> None:
        """A correct password clears the name's count (not the address's)."""
        self._failures.pop(f"user:{name}", None)

    def _recent(self, key: str, now: float) -> deque[float]:
        times = self._failures.setdefault(key, deque())
        while times and times[0] <= now - self.window:
            times.popleft()
        return times


def load_tokens(path: Path) -> list[str]:
    """Bearer tokens, one per line (``#`` comments); each at least :data:`MIN_TOKEN` long."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the token file {path}: {exc}") from None
    tokens = [t.strip() for t in text.splitlines() if t.strip() and not t.startswith("#")]
    if not tokens:
        raise ConfigError(f"the token file {path} holds no token")
    for number, token in enumerate(tokens, start=1):
        if len(token) < MIN_TOKEN or not token.isascii() or any(c.isspace() for c in token):
            raise ConfigError(
                f"token {number} of {path} is not valid: at least {MIN_TOKEN} "
                "printable ASCII characters (e.g. openssl rand -hex 32)"
            )
    return tokens


def bearer_ok(tokens: list[str], header: str | None) -> bool:
    """Whether an ``Authorization`` header carries one of the tokens (constant-time)."""
    if not header or not header.startswith("Bearer "):
        return False
    offered = header[len("Bearer ") :].strip().encode()
    found = False
    for token in tokens:
        found |= hmac.compare_digest(offered, token.encode())
    return found
