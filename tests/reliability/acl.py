"""The minimal Redis ACL users of the README, and a password-protected server with them.

Three users, each limited to the product's keys (:attr:`Keys.acl_patterns`) and no
pub/sub channels:

* ``worker``: runs ``worker-runtime`` (and may submit tasks, as an application does).
  It reads every product key but writes none of the operator's
  (:attr:`Keys.acl_patterns_worker_writes`): not the fleet control stream, the scale
  targets or any admin hash (a selector lets it read those and ``DEL`` them: a worker
  that finished a drain clears its own), so ``byconsole worker suspend`` with it is
  refused by Redis;
* ``operator``: everything ``byconsole`` does, reads and admin writes, but cannot
  consume or acknowledge tasks;

For both, the audit stream is append-only: their write commands apply to every
product key except it (:attr:`Keys.acl_patterns_except_audit`), and a selector lets
them read it and ``XADD`` to it (capped with ``MAXLEN`` in the same command), never
DEL, XTRIM or XDEL it.
* ``viewer``: ``byconsole --snapshot`` / ``--read-only`` / the read subcommands;
  Redis refuses every write.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from redis import Redis as SyncRedis
from redis.asyncio import Redis

from tests.redis_server import RedisServer
from worker_runtime.keys import Keys

ADMIN_PASSWORD = "Adm1n-S3cret-pw"

_READ = ["-@all", "+@read", "+@connection", "+eval_ro", "+evalsha_ro"]
# +time: commands are stamped (and periods numbered) by Redis's clock inside scripts.
# +xdel: dead-letter requeue and purge delete by id (never the whole stream).
_ADMIN_WRITES = [
    "+hset",
    "+del",
    "+sadd",
    "+srem",
    "+xadd",
    "+xdel",
    "+eval",
    "+evalsha",
    "+time",
]
# The audit entry records who Redis authenticated (ACL WHOAMI, after -@dangerous).
_WHOAMI = "+acl|whoami"
ACL_RULES: dict[str, list[str]] = {
    # Exactly the rules of the README's ACL section; -@dangerous last but for WHOAMI.
    "viewer": [*_READ, "-@dangerous", _WHOAMI],
    # The admin API's writes: admin hash (a guarded EVAL), command and audit streams,
    # denylists and routing sets, scale targets, forget.
    "operator": [*_READ, *_ADMIN_WRITES, "-@dangerous", _WHOAMI],
    # Consumer groups, leases, executions, leader election and fencing (EVAL).
    "worker": [*_READ, "+@write", "+eval", "+evalsha", "+time", "-@dangerous", _WHOAMI],
}
APPEND_ONLY_AUDIT = ("operator", "worker")
"""Users whose key patterns leave the audit stream out (reached through a selector)."""
PASSWORDS = {user: f"{user.title()}-Pw-{n}x7" for n, user in enumerate(ACL_RULES)}


def setuser_args(user: str, keys: Keys | None = None) -> list[str]:
    """``ACL SETUSER`` arguments for one of the users."""
    keys = keys or Keys()
    if user not in APPEND_ONLY_AUDIT:
        patterns = [f"~{p}" for p in keys.acl_patterns]
        return [
            user,
            "reset",
            "on",
            f">{PASSWORDS[user]}",
            "resetchannels",
            *patterns,
            *ACL_RULES[user],
        ]
    return [user, "reset", "on", f">{PASSWORDS[user]}", *_rules(user, keys)]


def _rules(user: str, keys: Keys) -> list[str]:
    """Everything after the password: channels, key patterns, commands, selectors."""
    if user not in APPEND_ONLY_AUDIT:
        return ["resetchannels", *(f"~{p}" for p in keys.acl_patterns), *ACL_RULES[user]]
    if user == "worker":
        patterns = [f"%R~{keys.acl_patterns[0]}"]
        patterns += [f"~{p}" for p in keys.acl_patterns_worker_writes]
        selectors = [audit_selector(keys), worker_admin_selector(keys)]
    else:
        patterns = [f"~{p}" for p in keys.acl_patterns_except_audit]
        selectors = [audit_selector(keys)]
    return ["resetchannels", *patterns, *ACL_RULES[user], *selectors]


def readme_rule(user: str, keys: Keys | None = None) -> str:
    """The ``ACL SETUSER`` line the README shows for ``user`` (placeholder password)."""
    words = _rules(user, keys or Keys())
    quoted = [f'"{w}"' if w.startswith("(") else w for w in words]
    return " ".join(["ACL SETUSER", user, "on", f">{user.upper()}_PASSWORD", *quoted])


def worker_admin_selector(keys: Keys) -> str:
    """The selector that lets the worker read admin hashes and delete them, nothing else."""
    return f"(~{keys.acl_patterns_worker_admin} -@all +@read +del -@dangerous)"


def audit_selector(keys: Keys) -> str:
    """The selector that makes the audit stream append-only: reads and XADD only."""
    return f"(~{keys.audit_stream} -@all +@read +xadd -@dangerous)"


@dataclass
class Secured:
    """A redis-server with ``requirepass`` and the three ACL users."""

    server: RedisServer

    def url(self, user: str | None = None, password: str | None = None) -> str:
        """``redis://user:password@...``; the default user's password without a user."""
        secret = password or (PASSWORDS[user] if user else ADMIN_PASSWORD)
        who = user or ""
        return f"redis://{who}:{secret}@127.0.0.1:{self.server.port}/0"

    def admin(self) -> Redis:
        """A client with full rights (the default user)."""
        return Redis(port=self.server.port, password=ADMIN_PASSWORD, decode_responses=True)


def start_secured() -> Iterator[Secured]:
    """Start the server and create the users (a generator for a fixture)."""
    server = RedisServer(extra_args=["--requirepass", ADMIN_PASSWORD]).start()
    try:
        with SyncRedis(port=server.port, password=ADMIN_PASSWORD) as admin:
            for user in ACL_RULES:
                admin.execute_command("ACL", "SETUSER", *setuser_args(user))
        yield Secured(server)
    finally:
        server.cleanup()


SECRETS = [ADMIN_PASSWORD, *PASSWORDS.values()]
"""Every password in play: none may appear in any output, log, key or screenshot."""


async def dump_all(redis: Redis) -> dict[str, Any]:
    """Every key with its type and content: the whole state of the server."""
    state: dict[str, Any] = {}
    async for key in redis.scan_iter(count=1000):
        kind = str(await redis.type(key))
        readers: dict[str, Callable[[Any], Awaitable[Any]]] = {
            "string": redis.get,
            "hash": redis.hgetall,
            "set": redis.smembers,
            "zset": lambda k: redis.zrange(k, 0, -1, withscores=True),
            "list": lambda k: redis.lrange(k, 0, -1),
            "stream": redis.xrange,
        }
        state[key] = (kind, await readers[kind](key))
    return state
