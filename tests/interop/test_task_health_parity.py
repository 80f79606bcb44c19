"""``byconsole metrics snapshot --json`` and ``by-admin metrics snapshot --json``
agree on one mixed fleet with failing tasks.

A real by-framework worker and one of ours share a type; by-framework's own client sends
tasks, some of which fail on each runtime. Both programs then read the same Redis: every
field by-admin prints is in byconsole's document, and the alert codes, success ratio,
status counts, failures by error type and latency p95 are the same.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.runtime_helpers import eventually
from tests.interop.harness import HERE, ROOT, Fleet

OURS_ONLY = {"SEVERAL_CONSUMER_GROUPS", "OLDEST_TASK_AGE"}


def _json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _send(fleet: Fleet, agent_type: str, count: int, content: str) -> None:
    done = subprocess.run(
        [
            *(str(fleet.byf_python), str(HERE / "byf_client.py"), agent_type, str(count)),
            *("--content", content),
        ],
        cwd=ROOT,
        env=fleet.byf_process_env(),
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    # by-framework logs to stdout too: the document is the last line.
    messages = json.loads(done.stdout.strip().splitlines()[-1])["messages"]
    assert all(m["ends"] == 1 for m in messages), messages


def _missing(theirs: Any, ours: Any, path: str = "") -> list[str]:
    """Every key path of ``theirs`` (dicts, first element of lists) absent from ``ours``."""
    out: list[str] = []
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key, value in theirs.items():
            where = f"{path}.{key}" if path else key
            if key not in ours:
                out.append(where)
            elif key not in ("status_counts", "by_error_type", "recent_status_counts"):
                out += _missing(value, ours[key], where)
    elif isinstance(theirs, list) and isinstance(ours, list) and theirs and ours:
        keys_theirs = {k for row in theirs if isinstance(row, dict) for k in row}
        keys_ours = {k for row in ours if isinstance(row, dict) for k in row}
        out += [f"{path}[].{k}" for k in sorted(keys_theirs - keys_ours)]
    return out


def _families(text: str) -> dict[str, list[tuple[tuple[tuple[str, str], ...], float]]]:
    """Metric families by name: their samples as (sorted labels, value)."""
    lines = [line for line in text.splitlines() if line.startswith(("#", "by_", "byconsole"))]
    return {
        f.name: sorted((tuple(sorted(s.labels.items())), s.value) for s in f.samples)
        for f in text_string_to_metric_families("\n".join(lines) + "\n")
    }


def _codes(doc: dict[str, Any]) -> set[str]:
    return {a["code"] for a in doc["alerts"]}


@pytest.mark.parametrize("fleet", ["single"], indirect=True)
async def test_metrics_snapshot_matches_by_admin_on_a_failing_mixed_fleet(fleet: Fleet) -> None:
    fleet.start_byf_worker("byf-h", ["pa"])
    k = fleet.keys

    async def online(wid: str) -> bool:
        return bool(await fleet.redis.exists(k.worker_online(wid)))

    await eventually(lambda: online("byf-h"), timeout=30)
    # Ours joins the group by-framework's worker created; it runs a share of the tasks.
    fleet.start_our_worker(
        "oh", ["pa"], handler="tests.interop.data_handlers:flaky", env={"INTEROP_SLEEP": "0.05"}
    )
    await eventually(lambda: online("oh-r0"), timeout=30)
    _send(fleet, "pa", 7, "ok")
    _send(fleet, "pa", 3, "fail")

    def settled() -> dict[str, Any] | None:
        doc = _json(fleet.by_admin("metrics", "snapshot", "--json"))
        counts = doc["status_counts"]
        pending = doc["data_flow"]["summary"]["consumer_pending_total"]
        done = counts.get("COMPLETED", 0) + counts.get("FAILED", 0) == 10
        return doc if done and pending == 0 and doc["totals"]["active_executions"] == 0 else None

    theirs = await _settled(settled)
    ours = _json(fleet.byconsole("metrics", "snapshot", "--json"))
    with_slo = json.loads(
        subprocess.run(
            [str(fleet.byf_python), str(HERE / "byf_observe.py")],
            cwd=ROOT,
            env=fleet.byf_process_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )

    # Both runtimes ran some of the tasks, and some failed on each (the comparison is
    # about a mixed fleet).
    workers = {w["worker_id"]: w for w in theirs["workers"]}
    assert set(workers) == {"byf-h", "oh-r0"}
    assert all(w["counts"]["completed"] + w["counts"]["failed"] > 0 for w in workers.values())

    # Every field by-admin prints, under the same name.
    assert _missing(theirs, ours) == []

    # The same figures.
    assert ours["status_counts"] == theirs["status_counts"] == {"COMPLETED": 7, "FAILED": 3}
    assert ours["slo"]["success_ratio"] == pytest.approx(theirs["slo"]["success_ratio"]) == 0.7
    assert ours["slo"]["success_ratio_ppm"] == theirs["slo"]["success_ratio_ppm"]
    assert ours["slo"]["burn_rate"] == theirs["slo"]["burn_rate"]
    assert ours["failures"]["by_error_type"] == theirs["failures"]["by_error_type"]
    assert ours["failures"]["total"] == theirs["failures"]["total"] == 3
    for part in ("queue", "run", "total"):
        assert abs(ours["latency"][part]["p95_ms"] - theirs["latency"][part]["p95_ms"]) <= 1
        assert abs(ours["latency"][part]["p50_ms"] - theirs["latency"][part]["p50_ms"]) <= 1
    assert ours["slo"]["total_latency_p95_ms"] == pytest.approx(
        theirs["slo"]["total_latency_p95_ms"], abs=1
    )
    assert ours["totals"] == theirs["totals"]

    # The same alerts: by-admin raises no SLO alert (it passes no SLOPolicy); with its
    # default SLOPolicy by-framework raises the same SLO alerts as byconsole.
    assert _codes(theirs) == {"FAILED_EXECUTIONS"}
    assert {c for c in _codes(ours) if not c.startswith("SLO_")} - OURS_ONLY == _codes(theirs)
    assert (
        _codes(ours) - OURS_ONLY == _codes(with_slo) == {"FAILED_EXECUTIONS", "SLO_SUCCESS_RATIO"}
    )
    ours_slo = next(a for a in ours["alerts"] if a["code"] == "SLO_SUCCESS_RATIO")
    theirs_slo = next(a for a in with_slo["alerts"] if a["code"] == "SLO_SUCCESS_RATIO")
    for name in ("severity", "value", "threshold", "sli", "window", "burn_rate", "runbook_id"):
        assert ours_slo[name] == theirs_slo[name], name
    assert ours["health"] == with_slo["health"]

    # Prometheus: every family by-framework writes is in byconsole's textfile, and the
    # per-type stream depth and SLO burn rate say the same.
    prom_theirs = subprocess.run(
        [str(fleet.byf_python), str(HERE / "byf_observe.py"), "--prom"],
        cwd=ROOT,
        env=fleet.byf_process_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    prom_ours = fleet.byconsole("--snapshot", "--format", "prom")
    assert prom_ours.returncode == 0, prom_ours.stderr
    theirs_families = _families(prom_theirs)
    ours_families = _families(prom_ours.stdout)
    assert set(theirs_families) <= set(ours_families)
    for name in ("by_framework_slo_burn_rate", "by_framework_agent_workers"):
        assert ours_families[name] == theirs_families[name], name
    depth = "by_framework_agent_queue_depth"
    assert ours_families[depth] == theirs_families[depth]
    # by-framework's worker logs each failed task as an ERROR with its traceback (the
    # failures asked for); nothing else may log one.
    errors = fleet.error_lines()
    assert any("asked to fail" in line for line in errors.pop("byf-byf-h", []))
    assert errors == {}


async def _settled(check: Any, timeout: float = 30.0) -> Any:
    async def poll() -> Any:
        return check()

    return await eventually(poll, timeout=timeout, interval=0.5)
