"""``byconsole``: the live console, ``--snapshot`` for CI and the admin subcommands.

Exit codes everywhere: 0 success, 1 a check failed or the target does not exist,
2 usage error or Redis unreachable — always one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import sys
import textwrap
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from redis.exceptions import RedisClusterException, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from byconsole import memory
from byconsole.config import Context, default_config_path, load_config, resolve_settings
from byconsole.config import health_policy as context_policy
from byconsole.config import select_context as pick_context
from byconsole.headless import checks as chk
from byconsole.headless import snapshot as headless
from byconsole.text import safe_text
from byconsole.verbs import (
    ALL_RUNTIMES,
    MAX_UNAVAILABLE_HELP,
    Args,
    Verb,
    cli_flag_verb,
    cli_verbs,
    verb,
)
from worker_runtime.connection import create_redis, redis_error_line
from worker_runtime.history import RANGES
from worker_runtime.models import AdminAction
from worker_runtime.names import (
    InvalidNameError,
    check_agent_type,
    check_name,
    check_utf8,
    check_worker_id,
)
from worker_runtime.quota import MAX_SCALE
from worker_runtime.redact import one_line, redact
from worker_runtime.settings import ConfigError, RedisSettings, argv_password_warning

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2

Handler = Callable[[headless.Session, argparse.Namespace], Awaitable[int]]


class UsageError(Exception):
    """Bad flags or arguments: one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line (``byconsole: error: ...``), exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[_Parser]
else:  # not subscriptable at run time
    _SubParsers = argparse._SubParsersAction


class _Commands(_SubParsers):
    """The subcommands; with ``lazy``, a command's own arguments are added when it is chosen.

    Building every admin subcommand's arguments took longer than parsing ever does, and
    ``--snapshot`` (a CI job's whole run) needs none of them. The top-level help lists
    each command from its name and help line, which exist from the start.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fillers: dict[str, Callable[[], None]] = {}

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if isinstance(values, list) and values:
            fill = self.fillers.pop(str(values[0]), None)
            if fill is not None:
                fill()
        super().__call__(parser, namespace, values, option_string)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 and at most 3600")
    return value


def _checked(check: Callable[[str], str]) -> Callable[[str], str]:
    """An argparse ``type`` that validates a name where it enters (``worker_runtime.names``)."""

    def parse(text: str) -> str:
        try:
            return check(text)
        except InvalidNameError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


_AGENT_TYPE = _checked(check_agent_type)
_WORKER_ID = _checked(check_worker_id)
_ANY_ID = _checked(lambda text: check_utf8("worker id", text))
_LOOKUP_ID = _checked(lambda text: check_name("id", text, 512))


def _refresh(text: str) -> float:
    value = _positive_float(text)
    if value < 0.1:
        raise argparse.ArgumentTypeError(f"{text!r} is too fast: at least 0.1 s")
    return value


def _count(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def _non_negative(text: str) -> int:
    value = _count(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be 0 or more")
    return value


def _limit(text: str) -> int:
    value = _count(text)
    if not 1 <= value <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 1 to 100000")
    return value


def _positive_int(text: str) -> int:
    value = _count(text)
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 1 to 1000")
    return value


_FORMATTER = argparse.RawDescriptionHelpFormatter

_MAIN_EPILOG = """\
examples:
  byconsole                                   live console (Redis from BYAI_REDIS_URL / REDIS_URL)
  byconsole --redis-url-file /run/secrets/redis-url --read-only
  byconsole --context prod                    an endpoint from the config file
  byconsole --demo                            a small live fleet on an embedded Redis
  byconsole --snapshot --min-online chat=2 --fail-on stale,evicted --max-depth 1000
  byconsole --snapshot --format json | jq '.workers[] | select(.status != "online")'
  byconsole --snapshot --format prom > /var/lib/node_exporter/byconsole.prom
  byconsole worker list --type chat
  byconsole worker suspend worker-01 --reason "maintenance window" --wait

Redis URL precedence: --redis-url-file / BYAI_REDIS_URL_FILE > --redis-url > BYAI_REDIS_URL >
REDIS_URL > REDIS_HOST / REDIS_PORT (by-framework's) > --context > redis://localhost:6379/0
(REDIS_CLUSTER_HOST / REDIS_CLUSTER_PORT select Redis Cluster and key schema v2).
exit codes: 0 ok, 1 a check failed or the target does not exist, 2 usage error or Redis unreachable,
3 --wait on a worker that cannot confirm (a by-framework worker: the command was sent).
"""


def _common(parser: argparse.ArgumentParser, *, suppress: bool) -> None:
    """Connection options, accepted before or after a subcommand."""
    default: object = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--redis-url", metavar="URL", default=default, help="Redis URL (password never shown)"
    )
    parser.add_argument(
        "--redis-url-file",
        metavar="PATH",
        default=default,
        help="read the Redis URL from a file (keeps a password out of ps)",
    )
    parser.add_argument(
        "--context", metavar="NAME", default=default, help="a named endpoint of the config file"
    )
    parser.add_argument(
        "--config",
        metavar="PATH",
        default=default,
        help=f"config file (default {default_config_path()})",
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="refuse every write (console actions and write subcommands)",
    )


def _sub(
    group: argparse._SubParsersAction[_Parser],
    name: str,
    help_text: str,
    example: str,
    parents: Sequence[_Parser],
    warning: str = "",
) -> _Parser:
    return group.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=f"example:\n  {example}"
        + (
            f"\n\n{textwrap.fill('warning: ' + warning, 78, break_on_hyphens=False)}"
            if warning
            else ""
        ),
        formatter_class=_FORMATTER,
        parents=list(parents),
    )


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def _write_flags(parser: argparse.ArgumentParser, wait: bool = True) -> None:
    parser.add_argument(
        "--reason", "-r", metavar="R", help="why (written to the admin state and audit)"
    )
    _json_flag(parser)
    if wait:
        parser.add_argument(
            "--wait", action="store_true", help="wait until the worker confirms it applied"
        )
        parser.add_argument(
            "--timeout",
            metavar="S",
            type=_positive_float,
            default=10.0,
            help=(
                "seconds --wait waits (default 10); a timeout exits 1; a worker that "
                "cannot confirm (by-framework) exits 3 at once"
            ),
        )


def build_parser(*, lazy: bool = False) -> _Parser:
    """The whole command line (names as in the README, byconsole headless).

    Args:
        lazy: add a subcommand's own arguments only once it is chosen (``main`` does:
            parsing then builds only what the command line uses). The default builds
            the complete tree, for whatever walks it.
    """
    parser = _Parser(
        prog="byconsole",
        description="Operations console for worker_runtime fleets on Redis.",
        epilog=_MAIN_EPILOG,
        formatter_class=_FORMATTER,
    )
    _common(parser, suppress=False)
    common = _Parser(add_help=False)
    _common(common, suppress=True)
    parents = [common]

    parser.add_argument(
        "--refresh",
        metavar="SECONDS",
        type=_refresh,
        default=2.0,
        help="console refresh interval (default 2)",
    )
    parser.add_argument(
        "--demo", action="store_true", help="run a small live fleet on an embedded Redis"
    )
    snap = parser.add_argument_group("headless snapshot (for CI and scripts)")
    snap.add_argument("--snapshot", action="store_true", help="print the fleet once and exit")
    snap.add_argument(
        "--format",
        choices=("table", "json", "prom"),
        default=None,
        help="table (default), json (one document) or prom (Prometheus text format)",
    )
    snap.add_argument(
        "--type", dest="snapshot_type", metavar="T", help="only workers serving T; scopes checks"
    )
    snap.add_argument(
        "--min-online",
        metavar="N|T=N",
        action="append",
        default=[],
        help="fail unless at least N workers are online (T=N: serving type T; repeatable)",
    )
    snap.add_argument(
        "--fail-on",
        metavar="S1,S2",
        action="append",
        default=[],
        help=f"fail when any worker is in one of these states: {','.join(chk.FAIL_ON_NAMES)}",
    )
    snap.add_argument(
        "--max-depth",
        metavar="N",
        type=_non_negative,
        help="fail when any type's queue depth exceeds N",
    )
    snap.add_argument(
        "--max-age",
        metavar="SECONDS",
        type=_seconds,
        help="fail when any type's oldest undelivered or pending task is older than SECONDS",
    )
    snap.add_argument(
        "--fail-on-alert",
        metavar="CODE,CODE|any",
        action="append",
        default=[],
        help="fail when an alert with one of these codes is raised (any: every alert)",
    )

    group = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_Parser, action=_Commands
    )
    assert isinstance(group, _Commands)
    for name, help_text, example, fill in _COMMANDS:
        command = _sub(group, name, help_text, example, [])
        filler = functools.partial(fill, command, parents)
        if lazy:
            group.fillers[name] = filler
        else:
            filler()
    return parser


def _worker_commands(worker: _Parser, parents: list[_Parser]) -> None:
    wsub = worker.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _sub(
        wsub,
        "list",
        "list online workers (holding a lease), as by-admin; --all adds offline ones",
        "byconsole worker list --type chat --json",
        parents,
    )
    p.add_argument("--type", "-t", dest="worker_type", metavar="T", help="only workers serving T")
    p.add_argument(
        "--all",
        action="store_true",
        help="also list offline workers (registry and admin-state index)",
    )
    _json_flag(p)
    p.set_defaults(handler="worker_list", write=False)
    p = _sub(
        wsub,
        "info",
        "one worker: full lease, admin state, recent executions",
        "byconsole worker info worker-01",
        parents,
    )
    p.add_argument("worker_id", metavar="ID", type=_ANY_ID)
    _json_flag(p)
    p.set_defaults(handler="worker_info", write=False)
    # The write verbs come from the one verb table (byconsole/verbs.py).
    for v in cli_verbs("worker"):
        name = v.name
        example = f'byconsole worker {name} worker-01 --reason "maintenance window"'
        p = _sub(wsub, name, v.help, example, parents, _verb_warning(v))
        # forget must still reach oddly named entries other runtimes registered.
        p.add_argument("worker_id", metavar="ID", type=_ANY_ID if name == "forget" else _WORKER_ID)
        if name == "restart":
            _restart_flags(p, "wait until the replacement holds a lease")
            p.set_defaults(handler="worker_restart", write=True)
            continue
        _write_flags(p, wait=name != "forget")
        flag = cli_flag_verb("worker", name)
        if flag is not None and flag.cli_flag is not None:
            p.add_argument(flag.cli_flag, action="store_true", help=flag.help)
        elif name == "forget":
            p.add_argument(
                "--force", action="store_true", help="forget even while the worker holds a lease"
            )
        p.set_defaults(handler="worker_action", write=True)
    _worker_stop_args(wsub, parents)


def _restart_flags(parser: argparse.ArgumentParser, wait_help: str | None) -> None:
    """``--reason``, ``--json`` and the wait of a restart (README, "Restart, stop and
    pinned calls"): a replica finishes its tasks before it exits, so the wait is longer."""
    _write_flags(parser, wait=False)
    if wait_help is not None:
        parser.add_argument("--wait", action="store_true", help=wait_help)
    parser.add_argument(
        "--timeout",
        metavar="S",
        type=_positive_float,
        default=60.0,
        help="seconds to wait for each replacement (default 60); not confirmed: exit 1",
    )


def _type_restart_args(tsub: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """``type restart T``: the rolling form of ``worker restart`` (no verb row of its
    own: it writes the same audited ``restart`` per replica)."""
    v = verb(AdminAction.RESTART)
    p = _sub(
        tsub,
        "restart",
        "rolling restart of a type's replicas: one at a time per instance, each "
        "replacement online before the next goes",
        "byconsole type restart chat --instance host-a:4242 --max-unavailable 2",
        parents,
        _verb_warning(v),
    )
    p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
    p.add_argument(
        "--instance",
        "-i",
        metavar="I",
        type=_checked(lambda text: check_name("instance id", text, 512)),
        help="only the replicas of instance I",
    )
    p.add_argument(
        "--max-unavailable",
        metavar="N",
        type=_positive_int,
        default=1,
        help=MAX_UNAVAILABLE_HELP,
    )
    _restart_flags(p, None)
    p.set_defaults(handler="type_restart", write=True)


def _worker_stop_args(wsub: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """``worker stop ID``: a drain under the name an operator looks for (README,
    "Restart, stop and pinned calls"); audited as the drain it is."""
    p = _sub(
        wsub,
        "stop",
        "stop one replica for good: a drain (finish in-flight tasks, exit, not replaced)",
        "byconsole worker stop worker-01 --wait",
        parents,
        "The replica's slot stays empty until the next scale (worker restart replaces "
        "it instead); for every replica of a type use type stop T, which is scale T 0.",
    )
    p.add_argument("worker_id", metavar="ID", type=_WORKER_ID)
    _write_flags(p)
    p.set_defaults(handler="worker_stop", write=True)


def _type_stop_args(tsub: argparse._SubParsersAction[_Parser], parents: list[_Parser]) -> None:
    """``type stop T [--instance I]``: ``scale T 0`` (or ``scale T 0 --instance I``)."""
    p = _sub(
        tsub,
        "stop",
        "stop a type's replicas: scale T 0 (fleet-wide) or scale T 0 --instance I",
        "byconsole type stop chat --instance host-a:4242 --wait",
        parents,
        "Written as the scale it is (audited scale, target 0): every replica drains; a "
        "later scale T N starts them again. by-framework workers do not follow scale "
        "targets: stop them one by one with worker stop.",
    )
    p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
    p.add_argument(
        "--instance",
        "-i",
        metavar="I",
        type=_checked(lambda text: check_name("instance id", text, 512)),
        help="only instance I (its override set to 0; the instance stays up)",
    )
    _write_flags(p, wait=False)
    p.add_argument(
        "--wait", action="store_true", help="wait until no replica serves the type there"
    )
    p.add_argument(
        "--timeout",
        metavar="S",
        type=_positive_float,
        default=30.0,
        help="seconds --wait waits (default 30); replicas still serving: exit 1",
    )
    p.set_defaults(handler="type_stop", write=True)


def _verb_warning(v: Verb) -> str:
    """A verb's confirmation warning over every runtime, for its ``--help``."""
    warnings = [v.warning_for(ALL_RUNTIMES)]
    flag = cli_flag_verb(*v.cli) if v.cli else None
    if flag is not None:
        warnings.append(f"{flag.cli_flag}: {flag.warning_for(ALL_RUNTIMES)}")
    return " ".join(w for w in warnings if w)


def _type_commands(type_: _Parser, parents: list[_Parser]) -> None:
    tsub = type_.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _sub(
        tsub,
        "list",
        "every type: registered, or found from its task or dead-letter streams",
        "byconsole type list --json",
        parents,
    )
    _json_flag(p)
    p.set_defaults(handler="type_list", write=False)
    p = _sub(tsub, "denylist", "workers denied for a type", "byconsole type denylist chat", parents)
    p.add_argument("agent_type", metavar="T")
    _json_flag(p)
    p.set_defaults(handler="type_denylist", write=False)
    deny_allow = [v for v in cli_verbs("type") if v.args is Args.TYPE_WORKER]
    for v in deny_allow:
        name = v.name
        p = _sub(
            tsub, name, v.help, f"byconsole type {name} chat worker-01", parents, _verb_warning(v)
        )
        p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
        p.add_argument("worker_id", metavar="ID", type=_WORKER_ID)
        _write_flags(p)
        p.add_argument(
            "--force", action="store_true", help="even for a type no worker declares yet"
        )
        p.set_defaults(handler="type_deny_allow", write=True)
    examples = {
        "pause": 'byconsole type pause chat --reason "bad deploy" --wait',
        "resume": "byconsole type resume chat",
    }
    for v in (v for v in cli_verbs("type") if v.args is Args.TYPE):
        assert v.cli is not None
        sub = v.cli[1]
        p = _sub(tsub, sub, v.help, examples[sub], parents, _verb_warning(v))
        p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
        _write_flags(p)
        p.add_argument("--force", action="store_true", help="even for a type nothing names yet")
        p.set_defaults(handler="type_pause", write=True)
    p = _sub(
        tsub,
        "pending",
        "a type's pending entries over every consumer group: owner, idle time, deliveries, task",
        "byconsole type pending chat --limit 50",
        parents,
    )
    p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
    p.add_argument(
        "--limit",
        "-n",
        metavar="N",
        type=_limit,
        default=100,
        help="at most N, up to 1000 (default 100)",
    )
    p.add_argument("--cursor", metavar="C", help="the next page (printed after a full page)")
    _json_flag(p)
    p.set_defaults(handler="type_pending", write=False)
    _type_restart_args(tsub, parents)
    _type_stop_args(tsub, parents)
    v = verb(AdminAction.DEAD_LETTER)
    p = _sub(
        tsub,
        "dead-letter",
        v.help,
        'byconsole type dead-letter chat 1700000000000-0 --reason "hangs on a lock"',
        parents,
        _verb_warning(v),
    )
    p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
    p.add_argument("entry_id", metavar="ENTRY_ID")
    p.add_argument(
        "--reason", metavar="R", required=True, help="why (required; in the dead letter and audit)"
    )
    p.add_argument("--group", metavar="G", help="the consumer group (when several hold it)")
    _json_flag(p)
    p.set_defaults(handler="type_dead_letter", write=True)


def _scale_args(p: _Parser, parents: list[_Parser]) -> None:
    del parents  # a leaf command: the connection options are its own
    _common(p, suppress=True)
    p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
    p.add_argument("count", metavar="N", type=_count, help=f"replicas, 0 to {MAX_SCALE}")
    p.add_argument("--instance", metavar="ID", help="pin this instance to exactly N replicas")
    p.add_argument(
        "--force", action="store_true", help="set it even for a type or instance not seen yet"
    )
    _write_flags(p)
    p.set_defaults(handler="scale", write=True)


def _metrics_commands(metrics: _Parser, parents: list[_Parser]) -> None:
    msub = metrics.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _sub(
        msub, "snapshot", "live figures of the fleet", "byconsole metrics snapshot --json", parents
    )
    _json_flag(p)
    p.set_defaults(handler="metrics_snapshot", write=False)
    p = _sub(
        msub,
        "history",
        "the metrics collector's history points",
        "byconsole metrics history --range 24h",
        parents,
    )
    p.add_argument(
        "--limit",
        "-n",
        metavar="N",
        type=_limit,
        default=None,
        help="most recent N points (default 20; with --range: the whole range)",
    )
    p.add_argument(
        "--range",
        dest="history_range",
        choices=[name for name, _ in RANGES],
        default=None,
        help="our own history over this range, from the tier that covers it (default 15m)",
    )
    _json_flag(p)
    p.set_defaults(handler="metrics_history", write=False)


def _dead_commands(dead: _Parser, parents: list[_Parser]) -> None:
    dsub = dead.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _sub(
        dsub,
        "list",
        "why tasks died, newest first (no T: every type's, and by-framework's control plane)",
        "byconsole dead list chat   |   byconsole dead list",
        parents,
    )
    p.add_argument("agent_type", metavar="T", nargs="?")
    p.add_argument(
        "--limit", metavar="N", type=_limit, default=20, help="newest N (per type; default 20)"
    )
    _json_flag(p)
    p.set_defaults(handler="dead_list", write=False)
    p = _sub(dsub, "show", "one dead letter in full", "byconsole dead show chat 1-0", parents)
    p.add_argument("agent_type", metavar="T")
    p.add_argument("entry_id", metavar="ID")
    p.add_argument(
        "--cut",
        metavar="N",
        type=_non_negative,
        help="show at most N characters of the payload (default: the whole payload)",
    )
    _json_flag(p)
    p.set_defaults(handler="dead_show", write=False)
    for v in cli_verbs("dead"):
        assert v.cli is not None
        dead_verb = v.cli[1]
        example = f'byconsole dead {dead_verb} chat 1-0 --reason "fixed the bug"'
        p = _sub(dsub, dead_verb, v.help, example, parents, _verb_warning(v))
        p.add_argument("agent_type", metavar="T")
        p.add_argument("entry_ids", metavar="ID", nargs="*", help="entry ids (or --all)")
        p.add_argument("--all", action="store_true", help="every dead letter of the type")
        p.add_argument(
            "--reason", metavar="R", required=True, help="why (required; written to the audit)"
        )
        _json_flag(p)
        p.set_defaults(handler="dead_write", write=True)


def _find_args(p: _Parser, parents: list[_Parser]) -> None:
    del parents  # a leaf command: the connection options are its own
    _common(p, suppress=True)
    p.add_argument(
        "lookup_id",
        metavar="ID",
        type=_LOOKUP_ID,
        help="task, execution, message, session or trace id",
    )
    _json_flag(p)
    p.set_defaults(handler="find", write=False)


def _session_args(p: _Parser, parents: list[_Parser]) -> None:
    del parents  # a leaf command: the connection options are its own
    _common(p, suppress=True)
    p.add_argument("session_id", metavar="ID", type=_LOOKUP_ID, help="session id")
    _json_flag(p)
    p.set_defaults(handler="session_timeline", write=False)


def _serve_args(p: _Parser, parents: list[_Parser]) -> None:
    del parents  # a leaf command: the connection options are its own
    _common(p, suppress=True)
    from byconsole.web.options import add_serve_args

    add_serve_args(p)


def _exporter_args(p: _Parser, parents: list[_Parser]) -> None:
    del parents  # a leaf command: the connection options are its own
    _common(p, suppress=True)
    from byconsole.web.options import add_exporter_args

    add_exporter_args(p)


def _users_args(p: _Parser, parents: list[_Parser]) -> None:
    del parents  # the users file only: no Redis
    from byconsole.web.options import add_users_args

    add_users_args(p)


def _setting(text: str) -> tuple[str, Any]:
    """``key=value``: the value as JSON when it parses (``3``, ``true``, ``{"a": 1}``),
    else the text itself (README, "Type configuration")."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not key=value")
    try:
        parsed: Any = json.loads(value)
    except ValueError:
        parsed = value
    return key, parsed


def _config_commands(config: _Parser, parents: list[_Parser]) -> None:
    csub = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    p = _sub(
        csub,
        "get",
        "a type's runtime configuration: its keys, version and last writer",
        "byconsole config get chat --json",
        parents,
    )
    p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
    _json_flag(p)
    p.set_defaults(handler="config_get", write=False)
    v = verb(AdminAction.CONFIG_SET)
    p = _sub(
        csub,
        "set",
        v.help,
        "byconsole config set chat temperature=0.2 greeting=hello --unset old --wait",
        parents,
        _verb_warning(v),
    )
    p.add_argument("agent_type", metavar="T", type=_AGENT_TYPE)
    p.add_argument(
        "settings",
        metavar="KEY=VALUE",
        nargs="*",
        type=_setting,
        help="a key to set; the value is JSON when it parses, else text",
    )
    p.add_argument(
        "--unset", metavar="K", action="append", default=[], help="remove key K (repeatable)"
    )
    _write_flags(p, wait=False)
    p.add_argument(
        "--wait", action="store_true", help="wait until every replica reports applied or failed"
    )
    p.add_argument(
        "--timeout",
        metavar="S",
        type=_positive_float,
        default=10.0,
        help="seconds --wait waits (default 10); a failed or unreported replica exits 1",
    )
    p.set_defaults(handler="config_set", write=True)


def _contexts_args(p: _Parser, parents: list[_Parser]) -> None:
    del parents  # a leaf command: the connection options are its own
    _common(p, suppress=True)
    _json_flag(p)
    p.set_defaults(handler=None, write=False)


_COMMANDS: tuple[tuple[str, str, str, Callable[[_Parser, list[_Parser]], None]], ...] = (
    ("worker", "list, inspect and control workers", "byconsole worker list", _worker_commands),
    ("type", "per-type denylists", "byconsole type denylist chat", _type_commands),
    (
        "scale",
        verb(AdminAction.SCALE).help,
        "byconsole scale chat 6   |   byconsole scale chat 2 --instance host-a:4242",
        _scale_args,
    ),
    ("metrics", "cluster figures", "byconsole metrics snapshot", _metrics_commands),
    ("dead", "dead letters of a type", "byconsole dead list chat", _dead_commands),
    ("contexts", "list the named contexts", "byconsole contexts", _contexts_args),
    (
        "config",
        "a type's runtime configuration (get, set)",
        "byconsole config get chat",
        _config_commands,
    ),
    (
        "find",
        "what an id is: task, execution, message (stream entry), session or trace",
        "byconsole find 1712345678901-0   |   byconsole find 9f3a... --json",
        _find_args,
    ),
    (
        "session",
        "a session's executions in order: queue wait and run, parent/child, traces",
        "byconsole session s-42",
        _session_args,
    ),
    (
        "serve",
        "the console in a browser, behind a login (and /metrics, /healthz)",
        "byconsole serve --listen 0.0.0.0:8765 --tls-cert cert.pem --tls-key key.pem",
        _serve_args,
    ),
    (
        "exporter",
        "the fleet's Prometheus text over HTTP (/metrics, /healthz)",
        "byconsole exporter --listen 127.0.0.1:9765 --token-file /run/secrets/scrape-token",
        _exporter_args,
    ),
    (
        "users",
        "the users of byconsole serve (password from a prompt or stdin)",
        "byconsole users add alice --role operator",
        _users_args,
    ),
)
"""The top level's commands: name, help line, example, what adds their arguments."""


def _check_modes(args: argparse.Namespace) -> chk.Checks:
    """Reject flag combinations that make no sense; parse the snapshot checks."""
    snapshot_only = {
        "--format": args.format is not None,
        "--type": args.snapshot_type is not None,
        "--min-online": bool(args.min_online),
        "--fail-on": bool(args.fail_on),
        "--max-depth": args.max_depth is not None,
        "--max-age": args.max_age is not None,
        "--fail-on-alert": bool(args.fail_on_alert),
    }
    given = [flag for flag, present in snapshot_only.items() if present]
    if args.command is not None and (args.snapshot or args.demo):
        raise UsageError(
            f"{'--snapshot' if args.snapshot else '--demo'} cannot be combined with "
            f"the '{args.command}' command"
        )
    if args.demo and args.snapshot:
        raise UsageError("--demo and --snapshot cannot be combined")
    if given and not args.snapshot:
        where = f" (put it before '{args.command}')" if args.command else ""
        raise UsageError(f"{given[0]} needs --snapshot{where}")
    try:
        min_online, by_type = chk.parse_min_online(args.min_online)
        fail_on = chk.parse_fail_on(args.fail_on)
        fail_on_alert = chk.parse_fail_on_alert(args.fail_on_alert)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return chk.Checks(
        min_online=min_online,
        min_online_by_type=by_type,
        fail_on=fail_on,
        max_depth=args.max_depth,
        max_age=args.max_age,
        fail_on_alert=fail_on_alert,
    )


def _say(message: str, prefix: str = "byconsole: error: ") -> None:
    line = one_line(safe_text(message, 1000))
    sys.stderr.write(f"{prefix}{line}\n")
    sys.stderr.flush()


def _scrub(message: str, settings: RedisSettings | None) -> str:
    """Remove the password from a message, whatever the library put in it."""
    if settings is None:
        return message
    return redact(message, settings.url, shown=settings.endpoint)


async def _with_client(
    settings: RedisSettings,
    run: Callable[[headless.Session], Awaitable[int]],
    context: Context | None = None,
) -> int:
    client = create_redis(settings, retries=0)
    session = headless.Session(redis=client, keys=settings.keys, settings=settings)
    session.policy = context_policy(context)
    try:
        return await run(session)
    finally:
        # Closing a client whose connection failed must not mask the real error.
        with contextlib.suppress(Exception):
            await client.aclose()


def _resolve(handler: Handler | str) -> Handler:
    """A subcommand's handler; named by a string so the parser need not import it.

    The admin subcommands (and their Rich output) load only when one of them runs:
    ``--snapshot`` and ``--help`` start without them.
    """
    if not isinstance(handler, str):
        return handler
    from byconsole.headless import commands

    resolved: Handler = getattr(commands, handler)
    return resolved


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``byconsole``; returns the exit code (the console script passes it to exit).

    Args:
        argv: arguments without the program name (``sys.argv[1:]`` by default).
    """
    if argv is None:
        # Before anything else: a password on the command line leaves ps at once
        # (README "Security: TLS, ACL users, secrets").
        from worker_runtime.proctitle import hide_secret_arguments

        hide_secret_arguments(sys.argv)
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        return 130


def run() -> NoReturn:
    """The ``byconsole`` executable: :func:`main`, then exit with its code.

    What is still alive at exit is frozen first (:func:`byconsole.memory.freeze_at_exit`).
    """
    code = main()
    memory.freeze_at_exit()
    sys.exit(code)


def _main(argv: list[str]) -> int:
    parser = build_parser(lazy=True)
    try:
        args = parser.parse_args(argv)
        checks = _check_modes(args)
    except UsageError as exc:
        _say(str(exc))
        return EXIT_ERROR
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else EXIT_OK

    settings: RedisSettings | None = None
    try:
        config = load_config(args.config)
        if args.command == "contexts":
            path = args.config or str(default_config_path())
            from byconsole.headless import commands

            return commands.list_contexts(
                dict(config.contexts), config.default_context, path, args.json
            )
        if args.command == "users":
            from byconsole.web.commands import run_users

            return run_users(args)
        selected = pick_context(config, args.context)
        context_name, context = selected if selected else (None, None)
        settings = resolve_settings(args.redis_url, context, redis_url_file=args.redis_url_file)
        # After validation: a rejected URL is one error line, not a warning plus one.
        warning = argv_password_warning(args.redis_url)
        if warning:
            _say(warning, prefix="byconsole: ")
        read_only = bool(args.read_only or (context and context.read_only))
        if args.command in ("serve", "exporter"):
            from byconsole.web.commands import run_web

            return run_web(args, settings, context_name, context, read_only)

        if args.demo or (args.command is None and not args.snapshot):
            # Long-running: the collector the one-shot launch turned off is needed.
            memory.collector_on_for_long_run()
        if args.demo:
            # Imported here: the console stack (Textual) is only loaded when needed.
            from byconsole.tui.demo import run_demo

            problem = console_terminal_problem()
            if problem:
                _say(problem)
                return EXIT_ERROR
            return int(run_demo(read_only=read_only, refresh=args.refresh))
        if args.command is None and not args.snapshot:
            # The flag only: the console follows the context it is switched to, and
            # says which of the two made it read-only.
            return _run_tui(settings, args, bool(args.read_only), context_name)
        if args.snapshot:
            return asyncio.run(
                _with_client(settings, lambda s: headless.run_snapshot(s, args, checks), context)
            )
        if args.write and read_only:
            _say(_read_only_message(args, context_name, context))
            return EXIT_ERROR
        handler: Handler = _resolve(args.handler)
        return asyncio.run(_with_client(settings, lambda s: handler(s, args), context))
    except ConfigError as exc:
        message = str(exc)
        if args.redis_url is not None:
            message = message.replace("BYAI_REDIS_URL/REDIS_URL", "--redis-url")
        _say(_scrub(message, settings))
        return EXIT_ERROR
    except _target_errors() as exc:
        _say(str(exc.args[0] if exc.args else exc))
        return EXIT_FAILED
    except ValueError as exc:  # e.g. a scale count out of bounds
        _say(str(exc))
        return EXIT_ERROR
    except (RedisError, RedisClusterException, OSError) as exc:
        assert settings is not None  # no Redis call happens before settings exist
        if getattr(args, "format", None) == "prom":
            from byconsole.headless.render_prom import render_prom_down

            sys.stdout.write(render_prom_down())
        line = redis_error_line(exc, endpoint=settings.endpoint, url=settings.url)
        if getattr(args, "write", False) and isinstance(exc, RedisTimeoutError | TimeoutError):
            line += f"; {UNANSWERED_WRITE}"
        if getattr(args, "format", None) == "json":
            _print_down_json(line, settings)
        _say(line)
        return EXIT_ERROR
    except Exception as exc:  # a bug must still not dump a traceback on an operator
        if os.environ.get("BYCONSOLE_DEBUG"):
            traceback.print_exc()
        _say(_scrub(f"internal error: {type(exc).__name__}: {exc}", settings))
        return EXIT_ERROR


UNANSWERED_WRITE = (
    "Redis did not answer: a write it already received applies when it answers again "
    "(check with --snapshot or worker info before sending it again)"
)
"""After a write command timed out: whether it was written is unknown (a frozen or
partitioned Redis answers nothing), so the operator is told how to find out."""


def _print_down_json(line: str, settings: RedisSettings) -> None:
    """``--format json`` with Redis unreachable: still one JSON document on stdout, so a
    pipe into ``jq`` reads why instead of nothing (as ``prom`` prints ``byconsole_up 0``)."""
    headless.print_json({"up": False, "error": line, "redis": {"endpoint": settings.endpoint}})


def _target_errors() -> tuple[type[Exception], ...]:
    """The errors meaning the target does not exist or refused: exit code 1.

    The admin API's own are among them once it is loaded; only it raises them, so
    ``--snapshot`` runs without importing it.
    """
    admin = sys.modules.get("worker_runtime.admin")
    found: tuple[type[Exception], ...] = (headless.NotFoundError, headless.RefusedError)
    if admin is not None:
        found += (admin.UnknownWorkerError, admin.CommandLostError)
    return found


def _read_only_message(
    args: argparse.Namespace, context_name: str | None, context: Context | None
) -> str:
    why = (
        f"context {context_name!r} is read-only"
        if context is not None and context.read_only and not args.read_only
        else "--read-only is set"
    )
    what = " ".join(p for p in (args.command, getattr(args, "action", None)) if p)
    return f"'{what}' changes the fleet and {why}"


STDERR_NOT_A_TERMINAL = (
    "the console draws on stderr (Textual's terminal driver writes there), and stderr is not "
    "a terminal here: run it without 2>…, or use --snapshot / a subcommand for output to a file"
)
"""Why the console refuses to start with stderr redirected (README, "Running the console")."""


def console_terminal_problem() -> str | None:
    """Why the live console cannot draw here, if it cannot.

    Textual's terminal driver draws on the process's stderr (no option draws on
    ``/dev/tty``), so ``byconsole 2>file`` would paint the screen into the file and leave
    the terminal blank. At a terminal (stdout one) with stderr redirected, say so instead.
    ``TEXTUAL_DRIVER`` set (``byconsole serve`` runs the console in a web driver) draws
    elsewhere.
    """
    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    out, err = sys.__stdout__, sys.__stderr__
    if out is None or err is None or not out.isatty() or err.isatty():
        return None
    return STDERR_NOT_A_TERMINAL


def _run_tui(
    settings: RedisSettings, args: argparse.Namespace, read_only: bool, context: str | None
) -> int:
    problem = console_terminal_problem()
    if problem:
        _say(problem)
        return EXIT_ERROR
    try:
        from byconsole.tui.app import run_tui
    except ImportError as exc:
        _say(f"the console UI is unavailable: {exc}")
        return EXIT_ERROR
    return int(
        run_tui(
            settings,
            refresh=args.refresh,
            read_only=read_only,
            context=context,
            config_path=args.config,
        )
    )


if __name__ == "__main__":  # pragma: no cover
    run()
