"""Real by-framework processes beside ours, on one Redis: spawn, drive, collect logs.

Everything here runs real programs: by-framework workers and its admin from
``.venv-byf`` (see :mod:`tests.interop.byf_env`), ``worker-runtime run`` and
``byconsole`` from this project's venv. Each process writes its own log file under the
test's temporary directory; :meth:`Fleet.error_lines` reads them back so a test can
assert that no side logged an ERROR.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from worker_runtime.keys import Keys

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent

OUR_FAST_ENV = {
    "BYAI_HEARTBEAT_INTERVAL": "0.5",
    "BYAI_LEASE_TTL": "3",
    "BYAI_CLAIM_IDLE_MS": "600",
    "BYAI_BLOCK_MS": "200",
    "BYAI_GRACE_PERIOD": "5",
}

# by-framework logs "... - ERROR - ..." (text) or "level": "ERROR" (JSON); ours logs
# "ERROR" as the level name too. CRITICAL and tracebacks count as errors as well.
_ERROR = re.compile(r"\bERROR\b|\bCRITICAL\b|Traceback \(most recent call last\)")


@dataclass
class LoggedProcess:
    """A subprocess writing to its own log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    _log: IO[bytes] | None = None

    def alive(self) -> bool:
        """Whether the process is still running."""
        return self.proc.poll() is None

    def log(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Signal the process and wait for it (kill after ``timeout``)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.proc.returncode

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code once the process ends within ``timeout``, else ``None``."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None


@dataclass
class Fleet:
    """One Redis (single or cluster) with helpers to run both systems against it.

    Attributes:
        kind: ``"single"`` (v1 keys) or ``"cluster"`` (v2 keys).
        redis: our client on that Redis.
        keys: the key factory of the deployment.
        byf_python: the by-framework venv's interpreter.
        byf_env: by-framework's own variables for that Redis.
        our_env: this project's variables for that Redis.
        log_dir: where every process's log goes.
    """

    kind: str
    redis: Redis | RedisCluster
    keys: Keys
    byf_python: Path
    byf_env: dict[str, str]
    our_env: dict[str, str]
    log_dir: Path
    processes: list[LoggedProcess] = field(default_factory=list)

    # -- environment -----------------------------------------------------------------

    @staticmethod
    def _base_env() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}

    def byf_process_env(self, **extra: str) -> dict[str, str]:
        """Environment for a by-framework process: its Redis variables, logs to stdout."""
        env = {**self._base_env(), **self.byf_env, "LOG_FILE": "", "LOG_LEVEL": "INFO"}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    def our_process_env(self, **extra: str) -> dict[str, str]:
        """Environment for ``worker-runtime`` / ``byconsole``."""
        env = {**self._base_env(), **self.our_env, **OUR_FAST_ENV}
        env["XDG_CONFIG_HOME"] = str(self.log_dir / "config")
        env.pop("NO_COLOR", None)
        env.update(extra)
        return env

    # -- processes -------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], env: dict[str, str]) -> LoggedProcess:
        path = self.log_dir / f"{name}.log"
        out = open(path, "ab")  # noqa: SIM115 (closed by LoggedProcess.stop)
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
        logged = LoggedProcess(name, proc, path, out)
        self.processes.append(logged)
        return logged

    def start_byf_worker(self, worker_id: str, types: list[str], **env: str) -> LoggedProcess:
        """A real by-framework worker (stock runner, trivial echo agent)."""
        extra = {"BYF_WORKER_ID": worker_id, "BYF_AGENT_TYPES": ",".join(types), **env}
        return self._spawn(
            f"byf-{worker_id}",
            [str(self.byf_python), str(HERE / "byf_worker.py")],
            self.byf_process_env(**extra),
        )

    def start_our_worker(
        self,
        instance: str,
        types: list[str],
        handler: str = "tests.handlers:noop",
        replicas: int = 1,
        env: dict[str, str] | None = None,
    ) -> LoggedProcess:
        """``worker-runtime run``; its worker ids are ``{instance}-r{n}``."""
        args = [str(BIN / "worker-runtime"), "run", handler, "--instance", instance]
        args += ["--replicas", str(replicas)]
        for agent_type in types:
            args += ["--type", agent_type]
        return self._spawn(f"ours-{instance}", args, self.our_process_env(**(env or {})))

    def byf_admin(self, *args: str) -> dict[str, Any]:
        """by-framework's ``WorkerManager`` (see ``byf_admin.py``); its JSON result."""
        done = subprocess.run(
            [str(self.byf_python), str(HERE / "byf_admin.py"), *args],
            cwd=ROOT,
            env=self.byf_process_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        self._append_log("byf-admin", done)
        assert done.returncode == 0, done.stderr
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        return result

    def by_admin(self, *args: str) -> subprocess.CompletedProcess[str]:
        """by-framework's ``by-admin`` CLI (its Redis from the environment)."""
        done = subprocess.run(
            [str(self.byf_python.parent / "by-admin"), *args],
            cwd=ROOT,
            env=self.byf_process_env(COLUMNS="200"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        self._append_log("by-admin", done)
        return done

    def byconsole(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """This project's ``byconsole`` executable."""
        done = subprocess.run(
            [str(BIN / "byconsole"), *args],
            cwd=ROOT,
            env=self.our_process_env(**env),
            capture_output=True,
            text=True,
            timeout=60,
        )
        self._append_log("byconsole", done)
        return done

    def _append_log(self, name: str, done: subprocess.CompletedProcess[str]) -> None:
        with open(self.log_dir / f"{name}.log", "a") as log:
            log.write(f"$ {' '.join(str(a) for a in done.args)}\n{done.stdout}{done.stderr}")

    # -- checks ----------------------------------------------------------------------

    def error_lines(self) -> dict[str, list[str]]:
        """ERROR/CRITICAL lines and tracebacks of every log, by log name (empty: none)."""
        found: dict[str, list[str]] = {}
        for path in sorted(self.log_dir.glob("*.log")):
            text = path.read_text(errors="replace")
            lines = [line for line in text.splitlines() if _ERROR.search(line)]
            if lines:
                found[path.stem] = lines
        return found

    def stop_all(self) -> None:
        """Stop every process this fleet started (newest first)."""
        for logged in reversed(self.processes):
            logged.stop()


def wait_for(check: Any, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll a synchronous ``check`` until it returns something truthy."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s (last value: {last!r})")
