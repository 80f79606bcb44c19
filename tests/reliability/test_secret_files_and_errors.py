"""Passwords stay off the command line; Redis refusals read as their reason (README, Security).

* ``--redis-url-file`` / ``BYAI_REDIS_URL_FILE`` / ``BYAI_REDIS_PASSWORD_FILE`` connect
  without a password in ``argv``; a password given in ``--redis-url`` still works but
  draws one warning line;
* a write refused because Redis is out of memory, or because the URL points at a
  read-only replica, is one line that names the reason first, with no Lua source and
  no pipeline dump.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from redis import Redis as SyncRedis

from tests.integration.cli_helpers import BYCONSOLE
from tests.integration.runtime_helpers import BIN, ROOT
from tests.redis_server import RedisServer
from tests.reliability.acl import PASSWORDS, Secured
from worker_runtime.keys import Keys

K = Keys()


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("BYAI_", "REDIS_"))}
    env["XDG_CONFIG_HOME"] = str(tmp)
    env.update(extra)
    return env


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_url_and_password_files_keep_the_password_off_argv(
    secured: Secured, tmp_path: Path
) -> None:
    url = secured.url("operator")
    url_file = tmp_path / "url"
    url_file.write_text(url + "\n")
    pw_file = tmp_path / "pw"
    pw_file.write_text(PASSWORDS["operator"] + "\n")
    no_pw = f"redis://operator@127.0.0.1:{secured.server.port}/0"
    runs = [
        _run(
            [str(BYCONSOLE), "worker", "list", "--json", "--redis-url-file", str(url_file)],
            _env(tmp_path),
        ),
        _run(
            [str(BYCONSOLE), "worker", "list", "--json"],
            _env(tmp_path, BYAI_REDIS_URL_FILE=str(url_file)),
        ),
        _run(
            [str(BYCONSOLE), "worker", "list", "--json"],
            _env(tmp_path, BYAI_REDIS_URL=no_pw, BYAI_REDIS_PASSWORD_FILE=str(pw_file)),
        ),
    ]
    for proc in runs:
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        assert PASSWORDS["operator"] not in proc.stdout
    worker_url = secured.url("worker")
    (tmp_path / "wurl").write_text(worker_url)
    submit = _run(
        [
            str(BIN / "worker-runtime"),
            "submit",
            "chat",
            "{}",
            "--redis-url-file",
            str(tmp_path / "wurl"),
        ],
        _env(tmp_path),
    )
    assert submit.returncode == 0, submit.stderr
    # A missing file: one line naming the setting, never a traceback.
    missing = _run(
        [str(BYCONSOLE), "worker", "list", "--redis-url-file", str(tmp_path / "nope")],
        _env(tmp_path),
    )
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1
    assert "BYAI_REDIS_URL_FILE" in missing.stderr and "cannot be read" in missing.stderr


def test_a_password_on_argv_draws_one_warning_and_is_never_shown(
    secured: Secured, tmp_path: Path
) -> None:
    url = secured.url("operator")
    for args in (
        [str(BYCONSOLE), "worker", "list", "--json", "--redis-url", url],
        [str(BIN / "worker-runtime"), "submit", "chat", "{}", "--redis-url", secured.url("worker")],
    ):
        proc = _run(args, _env(tmp_path))
        assert proc.returncode == 0, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "visible to every local user" in lines[0], proc.stderr
        assert "--redis-url-file" in lines[0]
        for secret in PASSWORDS.values():
            assert secret not in proc.stderr + proc.stdout


def _refused_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for dump in ("redis.call", "EVAL", "pipeline", "Traceback", "user_script", "local "):
        assert dump not in lines[0], lines[0]
    return lines[0]


def test_out_of_memory_and_read_only_replica_are_named_first(tmp_path: Path) -> None:
    primary = RedisServer().start()
    replica = RedisServer(extra_args=["--replicaof", "127.0.0.1", str(primary.port)]).start()
    try:
        with SyncRedis(port=primary.port, decode_responses=True) as admin:
            admin.sadd(K.workers, "w1")
            admin.sadd(K.worker_agent_types("w1"), "chat")
            admin.sadd(K.type_workers("chat"), "w1")
            with SyncRedis(port=replica.port, decode_responses=True) as rep:
                deadline = time.monotonic() + 10
                while not rep.sismember(K.workers, "w1") and time.monotonic() < deadline:
                    time.sleep(0.05)
            ro = _run(
                [str(BYCONSOLE), "worker", "suspend", "w1"],
                _env(tmp_path, BYAI_REDIS_URL=replica.url),
            )
            assert "this is a read-only replica" in _refused_line(ro)
            used = int(admin.info("memory")["used_memory"])
            admin.config_set("maxmemory-policy", "noeviction")
            admin.config_set("maxmemory", str(max(used // 2, 1)))
            oom = _run(
                [str(BYCONSOLE), "worker", "suspend", "w1"],
                _env(tmp_path, BYAI_REDIS_URL=primary.url),
            )
            line = _refused_line(oom)
            assert "Redis is out of memory (maxmemory)" in line
            assert line.index("out of memory") < 40  # the reason comes first
            # A refused command changes nothing: routing, admin state and audit untouched
            # (the admin hash is written first, alone; the rest only once it took).
            assert admin.sismember(K.type_workers("chat"), "w1")
            assert not admin.exists(K.worker_admin("w1"))
            assert not admin.exists(K.worker_stream("w1"))
            assert not admin.exists(K.audit_stream)
            submit = _run(
                [str(BIN / "worker-runtime"), "submit", "chat", "{}"],
                _env(tmp_path, BYAI_REDIS_URL=primary.url),
            )
            assert "Redis is out of memory (maxmemory)" in _refused_line(submit)
            admin.config_set("maxmemory", "0")
    finally:
        replica.cleanup()
        primary.cleanup()
