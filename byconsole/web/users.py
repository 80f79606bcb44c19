"""The users file of ``byconsole serve``: one ``name:role:argon2-hash`` line per user.

Passwords are hashed with argon2id (argon2-cffi's defaults, RFC 9106's low-memory
profile); the file holds no password and is written with mode 0600, atomically, so a
crash while adding a user never leaves it half written.
"""

from __future__ import annotations

import contextlib
import enum
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from worker_runtime.settings import ConfigError

MIN_PASSWORD = 12
"""Shortest password ``users add`` accepts (NIST SP 800-63B asks for at least 8)."""

MAX_PASSWORD = 1024
"""Longest one hashed: argon2 would take any length, a login form need not."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,63}")


class Role(enum.StrEnum):
    """What a web user may do: look (the ``--read-only`` console), or act too."""

    VIEWER = "viewer"
    OPERATOR = "operator"


@dataclass(frozen=True)
class User:
    """One line of the users file."""

    name: str
    role: Role
    password_hash: str


_HASHER = PasswordHasher()

_DUMMY_HASH = _HASHER.hash("byconsole: a name nobody has")
"""Verified against for an unknown name, so a login costs the same whether it exists."""


def check_user_name(name: str) -> str:
    """A user name as the file and the audit stream can hold it (letters, digits, ``._@-``)."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"user name {name[:80]!r} is not valid: 1-64 letters, digits or ._@- "
            "(starting with a letter or digit)"
        )
    return name


def hash_password(password: str) -> str:
    """The argon2id hash of a password that is long enough."""
    if len(password) < MIN_PASSWORD:
        raise ConfigError(f"the password must have at least {MIN_PASSWORD} characters")
    if len(password) > MAX_PASSWORD:
        raise ConfigError(f"the password must have at most {MAX_PASSWORD} characters")
    return _HASHER.hash(password)


def load_users(path: Path) -> dict[str, User]:
    """Read a users file; a missing file holds no users, a malformed line is an error."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the users file {path}: {exc}") from None
    users: dict[str, User] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(":")
        if len(parts) != 3 or not parts[2].startswith("$argon2"):
            raise ConfigError(f"{path}:{number}: expected name:role:argon2-hash")
        name, role, password_hash = parts
        check_user_name(name)
        try:
            users[name] = User(name, Role(role), password_hash)
        except ValueError:
            raise ConfigError(
                f"{path}:{number}: role {role[:20]!r} is not viewer or operator"
            ) from None
    return users


def save_users(path: Path, users: dict[str, User]) -> None:
    """Write the users file atomically, readable by its owner only."""
    lines = ["# byconsole serve users: name:role:argon2id-hash (byconsole users add)"]
    lines += [f"{u.name}:{u.role.value}:{u.password_hash}" for u in users.values()]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def add_user(path: Path, name: str, role: Role, password: str) -> bool:
    """Add a user or replace one's role and password; True when the name was new."""
    users = load_users(path)
    new = name not in users
    users[name] = User(check_user_name(name), role, hash_password(password))
    save_users(path, users)
    return new


def verify(users: dict[str, User], name: str, password: str) -> User | None:
    """The user whose password this is, else None; as slow for an unknown name."""
    user = users.get(name)
    candidate = password[:MAX_PASSWORD]
    try:
        _HASHER.verify(user.password_hash if user else _DUMMY_HASH, candidate)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return None
    return user
