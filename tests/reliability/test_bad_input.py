"""Every flag and environment variable with a wrong value: exit 2 and one clear line.

Both command lines, ``worker-runtime`` and ``byconsole``. The cases are derived from
the settings models and the argument parsers themselves, so a setting or flag added
later without a bad-value case fails :func:`test_every_valued_flag_has_a_bad_value_case`.
Most cases run in-process (fast); a few run the real executables to prove the process
exit code and that nothing else reaches the terminal.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any, cast

import annotated_types
import pytest
from pydantic.fields import FieldInfo
from redis.asyncio import Redis

from byconsole import cli as byconsole_cli
from tests.integration.cli_helpers import BYCONSOLE, add_worker
from tests.integration.runtime_helpers import BIN, ROOT
from tests.redis_server import env_with, free_port
from worker_runtime import cli as runtime_cli
from worker_runtime.models import Role
from worker_runtime.quota import MAX_SCALE
from worker_runtime.settings import RedisSettings, WorkerSettings

NOWHERE = f"redis://127.0.0.1:{free_port()}/0"
"""Nothing listens here: a case whose validation wrongly passes fails on connect."""

FREE_TEXT = {"BYAI_APP_VERSION", "REDIS_CLUSTER_HOST", "BYAI_REDIS_TLS_CA"}
"""Settings any text is valid for (a version label, a host name). TLS file paths are
checked where they are used, in tests/reliability/test_tls.py."""
FREE_TEXT |= {"BYAI_REDIS_TLS_CERT", "BYAI_REDIS_TLS_KEY"}
FREE_TEXT |= {"BYAI_REDIS_SENTINEL_USERNAME", "BYAI_REDIS_SENTINEL_PASSWORD"}


def _env_names(info: FieldInfo) -> list[str]:
    alias = info.validation_alias
    if isinstance(alias, str):
        return [alias]
    return [str(c) for c in getattr(alias, "choices", [])]


def _bad_values(name: str, info: FieldInfo) -> list[str]:
    """Wrong values for one setting, from its type and bounds."""
    annotation = info.annotation
    values: list[str] = []
    numeric = annotation in (int, float)
    if numeric:
        values += ["abc", "1e999" if annotation is float else "1.5", ""]
    for meta in info.metadata:
        if isinstance(meta, annotated_types.Gt):
            values.append(str(meta.gt))
        elif isinstance(meta, annotated_types.Ge):
            values.append(str(cast(float, meta.ge) - 1))
        elif isinstance(meta, annotated_types.Le):
            values.append(str(cast(float, meta.le) * 10 + 1))
    if annotation is float:
        values += ["nan", "inf", "-inf"]
    if annotation is bool:
        values += ["maybe", "2"]
    if annotation is Role:
        values += ["overlord", ""]
    if name == "schema_version":
        values += ["v9"]
    if name == "instance_id":
        values += ["has space", "x{y}", "a" * 201, "tab\there"]
    if name == "url":
        values += ["http://example.com", "redis://", "redis://h:99999/0", "localhost:6379"]
    if name == "mode":
        values += ["clustered", "sentinel"]
    if name == "cluster_nodes_env":
        values += ["h1:notaport", "h1:99999", "h1:6379,:7000"]
    if name == "consumer_group":
        values += ["tab\there", "a" * 201, " padded "]
    if name == "metrics_tiers":
        values += ["10s", "1m:30s", "x:1h", "1m:1h,10s:2h", "0s:1h"]
    if name == "sentinels":
        values += ["h1:notaport", "h1:99999", "h1:26379,:7000", ","]
    if name == "sentinel_master":
        values += ["main", "bad name"]  # no sentinels; not a name
    if name in ("url_file", "password_file", "sentinel_password_file"):
        values += ["/nonexistent/secret", "/"]  # missing, a directory
    return values


def _cases(model: type[Any]) -> list[tuple[str, str]]:
    cases = []
    for name, info in model.model_fields.items():
        for env in _env_names(info):
            if env in FREE_TEXT:
                continue
            values = _bad_values(name, info)
            assert values, f"no bad value known for {env}: add one to _bad_values"
            cases += [(env, v) for v in values]
    return cases


WORKER_ENV = _cases(WorkerSettings) + _cases(RedisSettings)
CONSOLE_ENV = _cases(RedisSettings)


def _one_line(err: str, prog: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(prog), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("BYAI_REDIS_URL", NOWHERE)
    return monkeypatch


@pytest.mark.parametrize(("env", "value"), WORKER_ENV)
def test_worker_runtime_env(
    env: str, value: str, clean: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if env == "REDIS_URL":
        clean.delenv("BYAI_REDIS_URL")  # it would win over REDIS_URL
    clean.setenv(env, value)
    code = runtime_cli.run_safely(["run", "bench.fault_handlers:noop", "--type", "t"])
    line = _one_line(capsys.readouterr().err, "worker-runtime: ")
    assert code == 2
    # Names what to fix: the variable (a bad URL may be masked, never echoed with a
    # password) and, when it is shown, the value.
    assert env in line or (env == "REDIS_URL" and "BYAI_REDIS_URL/REDIS_URL" in line), line


@pytest.mark.parametrize(("env", "value"), CONSOLE_ENV)
def test_byconsole_env(
    env: str, value: str, clean: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if env == "REDIS_URL":
        clean.delenv("BYAI_REDIS_URL")
    clean.setenv(env, value)
    code = byconsole_cli.main(["--snapshot"])
    captured = capsys.readouterr()
    line = _one_line(captured.err, "byconsole: error: ")
    assert code == 2 and captured.out == ""
    assert env in line or (env == "REDIS_URL" and "BYAI_REDIS_URL/REDIS_URL" in line), line


def test_lease_not_longer_than_the_heartbeat(
    clean: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clean.setenv("BYAI_HEARTBEAT_INTERVAL", "10")
    clean.setenv("BYAI_LEASE_TTL", "10")
    assert runtime_cli.run_safely(["run", "bench.fault_handlers:noop", "--type", "t"]) == 2
    line = _one_line(capsys.readouterr().err, "worker-runtime: ")
    assert "BYAI_LEASE_TTL (10) must be longer than BYAI_HEARTBEAT_INTERVAL (10)" in line


# -- flags -------------------------------------------------------------------------------

RUN = ["run", "bench.fault_handlers:noop", "--type", "t"]
SUBMIT = ["submit", "t", "{}"]
RUNTIME_FLAGS: list[tuple[list[str], str]] = [
    # (argv, what the one line must say)
    ([*RUN, "--replicas", "0"], "--replicas must be between 1 and 1000, not 0"),
    ([*RUN, "--replicas", "-3"], "--replicas must be between 1 and 1000, not -3"),
    ([*RUN, "--replicas", "1001"], "--replicas must be between 1 and 1000, not 1001"),
    ([*RUN, "--replicas", "10" * 30], "--replicas must be between 1 and 1000"),
    ([*RUN, "--replicas", "two"], "--replicas must be a whole number"),
    ([*RUN, "--concurrency", "0"], "--concurrency must be between 1 and 10000, not 0"),
    ([*RUN, "--concurrency", "10001"], "--concurrency must be between 1 and 10000"),
    ([*RUN, "--concurrency", "1.5"], "--concurrency must be a whole number"),
    ([*RUN, "--role", "overlord"], "BYAI_WORKER_ROLE 'overlord'"),
    ([*RUN, "--instance", "has space"], "'has space'"),
    ([*RUN, "--instance", "x" * 300], "at most 200 printable characters"),
    ([*RUN, "--redis-url", "http://example.com"], "must start with redis://, rediss://"),
    ([*RUN, "--redis-url", "redis://:pw@h:99999/0"], "invalid port"),
    ([*RUN, "--periodic", "report"], "--periodic takes TYPE:SECONDS"),
    ([*RUN, "--periodic", "report:0"], "--periodic takes TYPE:SECONDS"),
    ([*RUN, "--periodic", "report:-5"], "--periodic takes TYPE:SECONDS"),
    ([*RUN, "--periodic", ":5"], "--periodic takes TYPE:SECONDS"),
    (["run", "bench.fault_handlers:noop"], "--type"),
    (["run", "bench.fault_handlers:noop", "--type", "t", "--bogus"], "--bogus"),
    (["run", "nosuch.module:x", "--type", "t"], "cannot import 'nosuch.module'"),
    (["run", "bench.fault_handlers:JOURNAL_ENV", "--type", "t"], "must be an async function"),
    ([*SUBMIT, "--count", "0"], "--count must be between 1 and 10000000, not 0"),
    ([*SUBMIT, "--count", "-1"], "--count must be between 1 and 10000000, not -1"),
    ([*SUBMIT, "--count", "99999999999"], "--count must be between 1 and 10000000"),
    ([*SUBMIT, "--count", "x"], "--count must be a whole number"),
    (["submit", "t", "[]"], "JSON must be an object"),
    (["submit", "t", "{"], "JSON is not valid"),
    ([*SUBMIT, "--redis-url", "unix:"], "BYAI_REDIS_URL"),
    ([*SUBMIT, "--wait-replicas", "0"], "--wait-replicas must be between 1 and 100, not 0"),
    ([*SUBMIT, "--wait-replicas", "one"], "--wait-replicas must be a whole number"),
    ([*SUBMIT, "--wait-replicas-timeout", "-5"], "--wait-replicas-timeout must be between"),
    ([*SUBMIT, "--redis-url", "redis+sentinel://h:1/"], "names no master"),
    (["frob"], "invalid choice"),
    ([], "required"),
]


@pytest.mark.parametrize(("argv", "says"), RUNTIME_FLAGS)
def test_worker_runtime_flags(
    argv: list[str], says: str, clean: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    del clean
    code = runtime_cli.run_safely(argv)
    captured = capsys.readouterr()
    line = _one_line(captured.err, "worker-runtime")
    assert code == 2, line
    assert says in line, line
    assert "pw@" not in line and captured.out == ""


BOUND = f"0 to {MAX_SCALE}"
CONSOLE_FLAGS: list[tuple[list[str], str]] = [
    (["--refresh", "0"], "'0' must be more than 0"),
    (["--refresh", "-1"], "must be more than 0"),
    (["--refresh", "0.01"], "too fast: at least 0.1 s"),
    (["--refresh", "7200"], "at most 3600"),
    (["--refresh", "nan"], "'nan'"),
    (["--refresh", "soon"], "'soon' is not a number"),
    (["--snapshot", "--format", "xml"], "invalid choice: 'xml'"),
    (["--snapshot", "--type"], "expected one argument"),
    (["--snapshot", "--min-online", "-1"], "--min-online"),
    (["--snapshot", "--min-online", "chat=x"], "--min-online"),
    (["--snapshot", "--fail-on", "stale,frozen"], "unknown state frozen"),
    (["--snapshot", "--max-depth", "-1"], "'-1' must be 0 or more"),
    (["--snapshot", "--max-depth", "lots"], "'lots' is not a whole number"),
    (["--snapshot", "--max-age", "-5"], "'-5' must be 0 or more"),
    (["--snapshot", "--max-age", "nan"], "'nan' must be 0 or more"),
    (["--snapshot", "--max-age", "soon"], "'soon' is not a number of seconds"),
    (["--snapshot", "--redis-url", "http://example.com"], "--redis-url"),
    (["--snapshot", "--context", "nope"], "unknown context 'nope'"),
    (["--snapshot", "--config", "/nonexistent/byconsole.toml"], "does not exist"),
    (["worker", "suspend", "w1", "--wait", "--timeout", "0"], "must be more than 0"),
    (["worker", "suspend", "w1", "--wait", "--timeout", "x"], "'x' is not a number"),
    (["worker", "evict", "w1", "--timeout", "99999"], "at most 3600"),
    (["metrics", "history", "--limit", "0"], "'0' must be from 1 to 100000"),
    (["metrics", "history", "--limit", "100001"], "must be from 1 to 100000"),
    (["metrics", "history", "--limit", "ten"], "'ten' is not a whole number"),
    (["metrics", "history", "--range", "3w"], "invalid choice: '3w'"),
    (["scale", "chat", "-1"], f"scale count -1 is out of range: {BOUND}"),
    (["scale", "chat", "1001"], f"scale count 1001 is out of range: {BOUND}"),
    (["scale", "chat", "9" * 30], f"is out of range: {BOUND}"),
    (["scale", "chat", "1.5"], "'1.5' is not a whole number"),
    (["scale", "chat", "1e3"], "'1e3' is not a whole number"),
    (["scale", "chat", "many"], "'many' is not a whole number"),
    (["scale", "chat", "-1", "--instance", "host:1", "--force"], f"out of range: {BOUND}"),
    (["scale", "chat"], "required: N"),
    (["worker", "frob", "w1"], "invalid choice: 'frob'"),
    (["--demo", "--snapshot"], "cannot be combined"),
    # byconsole serve / exporter (README "byconsole in a browser").
    (["serve", "--listen", "8765"], "is not HOST:PORT"),
    (["serve", "--listen", "127.0.0.1:99999"], "the port must be from 0 to 65535"),
    (["serve", "--max-sessions", "0"], "must be from 1 to 1000"),
    (["serve", "--idle-timeout", "-1"], "must be from 0 (never)"),
    (["serve", "--refresh", "0"], "must be from 0.1 to 3600"),
    (["serve", "--public-origin", "console.example"], "is not an origin"),
    (["exporter", "--scrape-interval", "0"], "must be from 0.5 to 3600"),
    (
        ["serve", "--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"],
        "cannot load the TLS certificate or key",
    ),
    (["serve", "--tls-key", "/nonexistent/k.pem"], "--tls-cert and --tls-key go together"),
    (["exporter", "--token-file", "/nonexistent/tokens"], "cannot read the token file"),
    (["serve", "--users", "/nonexistent/users"], "no users in /nonexistent/users"),
    (["users", "add", "ann", "--role", "root"], "invalid choice: 'root'"),
    (["dead", "show", "chat", "1-0", "--cut", "-1"], "'-1' must be 0 or more"),
    (["dead", "show", "chat", "1-0", "--cut", "x"], "'x' is not a whole number"),
    (["type", "restart", "chat", "--max-unavailable", "0"], "'0' must be from 1 to 1000"),
    (["type", "restart", "chat", "--max-unavailable", "two"], "'two' is not a whole number"),
    (["type", "restart", "chat", "--instance", "a\x00b"], "instance id"),
]


@pytest.mark.parametrize(("argv", "says"), CONSOLE_FLAGS)
def test_byconsole_flags(
    argv: list[str], says: str, clean: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    del clean
    code = byconsole_cli.main(argv)
    captured = capsys.readouterr()
    line = _one_line(captured.err, "byconsole: error: ")
    assert code == 2, line
    assert says in line, line
    assert captured.out == ""


def _valued_options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option (in every subcommand) that takes a typed or restricted value."""
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _valued_options(sub)
        elif action.option_strings and (
            action.type is not None or action.choices or action.dest in _CHECKED_TEXT
        ):
            # The long spelling names the option (``-n`` is by-admin's alias of ``--limit``).
            found.add(max(action.option_strings, key=len))
    return found


# Free-text options whose value is still checked (they are settings in disguise).
_CHECKED_TEXT = {"role", "instance", "redis_url", "periodic", "context", "config"}


def test_every_valued_flag_has_a_bad_value_case() -> None:
    covered = {a for argv, _ in RUNTIME_FLAGS + CONSOLE_FLAGS for a in argv if a.startswith("--")}
    for parser in (runtime_cli.build_parser(), byconsole_cli.build_parser()):
        missing = _valued_options(parser) - covered
        assert not missing, f"no bad-value case for {sorted(missing)}"


# -- the real executables ------------------------------------------------------------------


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(
    ("command", "extra", "says"),
    [
        (["worker-runtime", *RUN], {"BYAI_CONCURRENCY": "0"}, "invalid BYAI_CONCURRENCY '0'"),
        (["worker-runtime", *RUN], {"BYAI_HEARTBEAT_INTERVAL": "inf"}, "BYAI_HEARTBEAT_INTERVAL"),
        (["worker-runtime", *SUBMIT, "--count", "0"], {}, "--count must be between 1"),
        (["byconsole", "scale", "chat", "-5"], {}, f"out of range: {BOUND}"),
        (["byconsole", "--snapshot"], {"REDIS_CLUSTER_PORT": "99999"}, "REDIS_CLUSTER_PORT"),
    ],
)
def test_real_processes_exit_2_with_one_line(
    command: list[str], extra: dict[str, str], says: str, tmp_path: Path
) -> None:
    exe = str(BIN / command[0]) if command[0] == "worker-runtime" else str(BYCONSOLE)
    env = env_with(NOWHERE, XDG_CONFIG_HOME=str(tmp_path), **extra)
    out = _run([exe, *command[1:]], env)
    assert out.returncode == 2, out.stderr
    assert out.stdout == ""
    line = out.stderr.strip()
    assert "\n" not in line and "Traceback" not in line and says in line, line


@pytest.mark.parametrize("columns", ["-5", "0", "abc", "99999999"])
async def test_snapshot_survives_any_columns(
    columns: str, redis: Redis, redis_url: str, tmp_path: Path
) -> None:
    # COLUMNS is not ours, but the table honours it when piped.
    await add_worker(redis, "w1", ["chat"])
    env = env_with(redis_url, XDG_CONFIG_HOME=str(tmp_path), COLUMNS=columns)
    out = _run([str(BYCONSOLE), "--snapshot"], env)
    assert out.returncode == 0, out.stderr
    assert "w1" in out.stdout and out.stderr == ""
