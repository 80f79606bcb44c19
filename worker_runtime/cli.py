"""``worker-runtime``: run a handler as a managed worker, or submit tasks.

    worker-runtime run MODULE:CALLABLE --type T [--type T2] [--replicas N] [--instance ID]
                   [--role all|leader|consumer] [--concurrency N] [--redis-url-file PATH]
    worker-runtime submit TYPE JSON [--count N] [--worker ID | --instance ID]
                   [--redis-url-file PATH]

A password belongs in a file (``--redis-url-file`` / ``BYAI_REDIS_URL_FILE``, or
``BYAI_REDIS_PASSWORD_FILE``), not on the command line where ``ps`` shows it.

Exit codes: 0 success, 1 the target does not exist / nobody can take the task,
2 usage error or Redis unreachable, 3 a worker stopped because one of its core loops
ended unexpectedly — always one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import inspect
import json
import logging
import sys
import time
import uuid
from collections.abc import Awaitable
from typing import Any, NoReturn

from worker_runtime.connection import REDIS_ERRORS, create_redis, redis_error_line
from worker_runtime.context import Handler
from worker_runtime.instance import WorkerInstance
from worker_runtime.names import InvalidNameError
from worker_runtime.outage import RETRYABLE, submit_once, task_queued
from worker_runtime.proctitle import hide_secret_arguments
from worker_runtime.producer import NoOnlineWorkerError, NotReplicatedError, Producer
from worker_runtime.registry import WorkerIdInUseError
from worker_runtime.scheduler import parse_periodic
from worker_runtime.settings import (
    ConfigError,
    RedisSettings,
    WorkerSettings,
    argv_password_warning,
    load,
)

PROG = "worker-runtime"


class UsageError(Exception):
    """Bad command-line input (exit 2)."""


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and exit 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message} (see --help)")


def _positive(name: str, upper: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number") from None
        if not 1 <= value <= upper:
            raise argparse.ArgumentTypeError(f"{name} must be between 1 and {upper}, not {value}")
        return value

    return parse


def build_parser() -> OneLineParser:
    """The argument parser for ``worker-runtime``."""
    parser = OneLineParser(
        prog=PROG,
        description="Run managed workers on Redis Streams, or submit tasks to them.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = sub.add_parser(
        "run",
        help="run a handler as a managed worker process",
        epilog="example: worker-runtime run myapp.handlers:chat --type chat --replicas 2",
    )
    run.add_argument("target", metavar="MODULE:CALLABLE", help="async def handler(task)")
    run.add_argument(
        "--type", dest="types", action="append", required=True, help="agent type (repeatable)"
    )
    run.add_argument("--replicas", type=_positive("--replicas", 1000), default=1)
    run.add_argument("--instance", help="instance id (default hostname:pid)")
    run.add_argument("--role", help="all (default), leader or consumer")
    run.add_argument("--concurrency", type=_positive("--concurrency", 10_000))
    run.add_argument("--redis-url", help="default: BYAI_REDIS_URL, REDIS_URL, localhost")
    run.add_argument(
        "--redis-url-file", metavar="PATH", help="read the URL from a file (keeps passwords off ps)"
    )
    run.add_argument("--app-version", help="shown in the console")
    run.add_argument(
        "--periodic",
        action="append",
        default=[],
        metavar="TYPE:SECONDS",
        help="submit an empty task to TYPE every SECONDS (leader only; repeatable)",
    )

    submit = sub.add_parser(
        "submit",
        help="submit tasks to an agent type or one worker",
        epilog='example: worker-runtime submit chat \'{"text": "hi"}\' --count 10',
    )
    submit.add_argument("agent_type", metavar="TYPE")
    submit.add_argument("payload", metavar="JSON", help="a JSON object")
    submit.add_argument("--count", type=_positive("--count", 10_000_000), default=1)
    target = submit.add_mutually_exclusive_group()
    target.add_argument("--worker", help="send to this worker's own stream")
    target.add_argument(
        "--instance",
        metavar="ID",
        help="pin to one instance's replicas (in turn); offline: exit 1, never another",
    )
    submit.add_argument("--session", help="session id (results go to its data stream)")
    submit.add_argument(
        "--require-online", action="store_true", help="fail unless an online worker serves it"
    )
    submit.add_argument("--redis-url", help="default: BYAI_REDIS_URL, REDIS_URL, localhost")
    submit.add_argument(
        "--redis-url-file", metavar="PATH", help="read the URL from a file (keeps passwords off ps)"
    )
    submit.add_argument(
        "--wait-replicas",
        type=_positive("--wait-replicas", 100),
        metavar="N",
        help="after the submit, wait until N replicas hold it (Redis WAIT); fewer exit 1",
    )
    submit.add_argument(
        "--wait-replicas-timeout",
        type=_positive("--wait-replicas-timeout", 600_000),
        default=1000,
        metavar="MS",
        help="how long --wait-replicas waits (default 1000 ms)",
    )
    submit.add_argument(
        "--wait",
        action="store_true",
        help="wait for the result (or error) on the session stream and print it",
    )
    submit.add_argument(
        "--timeout",
        type=_positive("--timeout", 3600),
        default=30,
        help="seconds --wait waits (default 30); a timeout or a failure exits 1",
    )
    return parser


def load_handler(target: str) -> Handler:
    """Import ``module:callable`` and check it is an async function."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"handler must look like module:callable, not {target!r}")
    sys.path.insert(0, ".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise UsageError(f"cannot import {module_name!r}: {exc}") from None
    handler: Any = module
    for part in attr.split("."):
        handler = getattr(handler, part, None)
        if handler is None:
            raise UsageError(f"{module_name!r} has no attribute {attr!r}")
    if not inspect.iscoroutinefunction(handler):
        raise UsageError(f"{target} must be an async function: async def handler(task)")
    return handler  # type: ignore[no-any-return]


async def _submit(args: argparse.Namespace, redis_settings: RedisSettings) -> int:
    try:
        payload = json.loads(args.payload)
    except ValueError as exc:
        raise UsageError(f"JSON is not valid: {exc}") from None
    if not isinstance(payload, dict):
        raise UsageError('JSON must be an object, e.g. \'{"text": "hi"}\'')
    if args.wait and args.session is None:
        # The result travels on a session stream: without one, make one for this wait.
        args.session = f"submit-{uuid.uuid4().hex[:12]}"
    redis = create_redis(redis_settings, retries=0)
    try:
        try:
            producer = Producer(
                redis,
                redis_settings.keys,
                wait_replicas=args.wait_replicas or 0,
                wait_timeout_ms=args.wait_replicas_timeout,
            )
        except ValueError as exc:
            raise UsageError(f"--wait-replicas: {exc}") from None
        if args.wait:
            deadline = time.monotonic() + args.timeout
            ids = await _submit_riding_out(producer, redis_settings, args, payload, deadline)
            print(ids[0] if args.count == 1 else f"submitted {len(ids)} task(s) to {_to(args)}")
            return await _wait_results(producer, args.session, ids, args.timeout, deadline)
        if args.count == 1 or args.require_online or args.instance:
            ids = [
                await producer.submit(
                    args.agent_type,
                    payload,
                    session_id=args.session,
                    worker_id=args.worker,
                    require_online_worker=args.require_online,
                    instance_id=args.instance,
                )
            ]
            for _ in range(args.count - 1):
                ids.append(
                    await producer.submit(
                        args.agent_type,
                        payload,
                        session_id=args.session,
                        worker_id=args.worker,
                        instance_id=args.instance,
                    )
                )
        else:
            ids = []
            remaining = args.count
            while remaining:
                batch = min(remaining, 1000)
                ids += await producer.submit_many(
                    args.agent_type,
                    [payload] * batch,
                    worker_id=args.worker,
                    session_id=args.session,
                )
                remaining -= batch
        if args.count == 1:
            print(ids[0], flush=True)
        else:
            print(f"submitted {len(ids)} task(s) to {_to(args)}", flush=True)
    finally:
        await redis.aclose()
    return 0


def _to(args: argparse.Namespace) -> str:
    """Where ``submit`` sent its tasks, for the line it prints."""
    if args.instance:
        return f"{args.agent_type} on instance {args.instance}"
    return str(args.worker or args.agent_type)


async def _submit_riding_out(
    producer: Producer,
    redis_settings: RedisSettings,
    args: argparse.Namespace,
    payload: dict[str, Any],
    deadline: float,
) -> list[str]:
    """Submit ``--count`` tasks for ``--wait``, through a Redis outage until ``deadline``.

    Each task is sent exactly once (see ``worker_runtime.outage``): its id is chosen
    here, and a send whose reply was lost is looked for before it is sent again.
    """
    keys = redis_settings.keys
    if args.instance:
        # A send whose reply was lost may have reached any replica of the instance.
        pinned = await producer.instance_replicas(args.agent_type, args.instance)
        streams = [keys.worker_stream(w) for w in pinned]
    elif args.worker:
        streams = [keys.worker_stream(args.worker)]
    else:
        streams = [keys.type_stream(args.agent_type)]
    streams.append(keys.session_data_stream(args.session))
    ids: list[str] = []
    for n in range(args.count):
        task_id = uuid.uuid4().hex

        def send(task_id: str = task_id, first: bool = n == 0) -> Awaitable[str]:
            return producer.submit(
                args.agent_type,
                payload,
                session_id=args.session,
                worker_id=args.worker,
                require_online_worker=args.require_online and first,
                task_id=task_id,
                instance_id=args.instance,
            )

        def queued(task_id: str = task_id) -> Awaitable[bool]:
            return task_queued(producer.redis, streams, task_id)

        await submit_once(send, queued, deadline, f"submitting task {task_id}")
        ids.append(task_id)
    return ids


async def _wait_results(
    producer: Producer, session: str, ids: list[str], timeout: float, deadline: float | None = None
) -> int:
    """Print each task's result (or error) as it arrives on the session.

    Read the way by-framework's clients read it (:meth:`Producer.results`), so a task
    run by a by-framework worker is read too. A failed attempt that is retried sends
    nothing: only the last attempt's outcome is printed. A Redis outage within the wait
    is ridden out (reads are sent again until the deadline; see ``worker_runtime.outage``).
    The exit code is 0 when every task succeeded in time, else 1.
    """
    waiting, failed = set(ids), False
    try:
        async for result in producer.results(session, ids, timeout, deadline=deadline):
            waiting.discard(result.task_id)
            if result.succeeded:
                text = "null" if result.result is None else result.result
                print(f"{result.task_id} result: {text}", flush=True)
            else:
                failed = True
                print(f"{result.task_id} error: {result.error}", flush=True)
    except RETRYABLE:
        pass  # Redis never came back within the wait: reported below
    for task_id in sorted(waiting):
        failed = True
        print(f"{task_id} no result within {timeout:g} s (session {session})", file=sys.stderr)
    return 1 if failed else 0


def run(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Every setting is validated before any connection is attempted.
    redis_settings = load(RedisSettings, url=args.redis_url, url_file=args.redis_url_file)
    warning = argv_password_warning(args.redis_url)
    if warning:  # once, after validation (a rejected URL is a single error line)
        print(f"{PROG}: {warning}", file=sys.stderr)
    if args.command == "submit":
        return asyncio.run(_submit(args, redis_settings))
    settings = load(
        WorkerSettings,
        role=args.role,
        instance_id=args.instance,
        concurrency=args.concurrency,
        app_version=args.app_version,
    )
    handler = load_handler(args.target)
    try:
        periodic = [parse_periodic(spec) for spec in args.periodic]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    instance = WorkerInstance(
        handler,
        args.types,
        replicas=args.replicas,
        settings=settings,
        redis_settings=redis_settings,
        periodic=periodic,
    )
    settle_collector()
    asyncio.run(instance.run())
    if instance.failure is not None:
        print(f"{PROG}: stopped: {instance.failure}", file=sys.stderr)
        return 3
    return 1 if instance.failed else 0


YOUNG_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation (Python's default: 700)."""


def settle_collector() -> None:
    """Tune the cyclic collector for a worker process, once start-up is done.

    Everything start-up made (modules, classes, validators) lives as long as the
    process: it is frozen out of the collector's way (``gc.freeze``), so a full
    collection no longer walks it. A task allocates a dozen short-lived containers
    (its asyncio task, models, dicts), almost all freed by reference counting: with
    the default threshold the youngest generation was collected ~100 times a second
    at 10,000 tasks/s, and the collector took 7% of the worker's CPU (``gc.callbacks``
    timing a 150,000-task drain with outputs stored). Cycles are still collected,
    only in larger steps.
    """
    gc.collect()
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    if argv is None:
        # Before anything else: a password on the command line leaves ps at once.
        hide_secret_arguments(sys.argv)
    sys.exit(run_safely(argv))


def run_safely(argv: list[str] | None = None) -> int:
    """:func:`run` with every expected failure turned into one line and an exit code."""
    try:
        return run(argv)
    except (UsageError, ConfigError, InvalidNameError) as exc:
        print(f"{PROG}: {exc}" if not str(exc).startswith(PROG) else str(exc), file=sys.stderr)
        return 2
    except REDIS_ERRORS as exc:
        print(f"{PROG}: {redis_error_line(exc)}", file=sys.stderr)
        return 2
    except (NoOnlineWorkerError, WorkerIdInUseError, NotReplicatedError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
