"""The console's restart, stop and configuration verbs against real running replicas
(README, "Restart, stop and pinned calls" and "Type configuration"): ``t`` on the
Types / Instances view rolls the selection's replicas with a progress panel fed the
runtime's own progress events; ``K`` stops a replica (a drain) or a type (``scale T 0``)
after a confirmation that says so; ``c`` opens a type's JSON editor that checks the text
by the runtime's rule as it is typed, saves through the one dispatch and shows each
replica's report; the scale plan says a drained slot stays empty; a type no instance
serves says nothing can scale it."""

from __future__ import annotations

import json
from typing import Any

from redis.asyncio import Redis
from textual.widgets import Input, Static, TextArea

from byconsole.tui.app import ConsoleApp
from byconsole.tui.backend import RedisBackend
from byconsole.tui.screens.config_editor import ConfigEditorScreen
from byconsole.tui.screens.confirm import ConfirmScreen
from byconsole.tui.screens.prompt import CountScreen
from byconsole.tui.widgets.restart_progress import RestartProgress
from tests.integration.runtime_helpers import make_instance
from tests.tui.conftest import KEYS, toasts, until, until_async
from worker_runtime.models import Task, now_ms
from worker_runtime.settings import RedisSettings


async def _noop(task: Task) -> None:
    return None


class _Configured:
    """A handler with configuration hooks (README, "Writing a worker"): ``on_init``
    fails when the configuration says ``fail``."""

    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []

    async def __call__(self, task: Task) -> None:
        return None

    async def on_init(self, config: dict[str, Any]) -> None:
        if config.get("fail"):
            raise ValueError("asked to fail")
        self.applied.append(config)

    async def on_cleanup(self) -> None:
        return None


def _text(app: ConsoleApp, selector: str) -> str:
    return str(app.screen.query_one(selector, Static).render())


async def _audit(redis: Redis) -> list[dict[str, str]]:
    entries: list[Any] = await redis.xrange(KEYS.audit_stream) or []
    return [fields for _, fields in entries]


async def _on_types(app: ConsoleApp, pilot: Any, agent_type: str) -> None:
    await pilot.press("3")
    table = app.main_screen.types_view.table
    await until(pilot, lambda: agent_type in table.ordered_keys())
    table.move_to(agent_type)


async def test_t_on_the_types_view_rolls_every_replica_with_progress(redis_url: str) -> None:
    settings = RedisSettings(url=redis_url)
    instance = make_instance(settings, _noop, ["roll"], "roll-a", replicas=2)
    await instance.start()
    try:
        before = set(instance.worker_ids)
        app = ConsoleApp(RedisBackend(settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 2)
            await _on_types(app, pilot, "roll")
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            screen = app.screen
            assert isinstance(screen, ConfirmScreen)
            assert sorted(screen.targets) == sorted(before)
            assert "one replica at a time" in screen.warning
            screen.query_one("#confirm").press()  # type: ignore[attr-defined]
            await until(pilot, lambda: bool(app.main_screen.query(RestartProgress)))
            panel = app.main_screen.query_one(RestartProgress)
            # The UI is not blocked while it runs: the views still switch.
            await pilot.press("1")
            assert app.main_screen.active_view == "workers"
            await until(pilot, lambda: panel.ended is not None, timeout=40)
            assert panel.ended == "done", panel.progress.summary()
            assert panel.progress.replaced == 2 and panel.progress.total == 2
            shown = str(panel.render())
            assert "2/2 replaced" in shown and "done" in shown
            for old in before:
                new = panel.progress.latest[old].replacement
                assert new and new not in before
                assert f"{old} -> {new}: replaced" in shown
            assert set(instance.worker_ids).isdisjoint(before)
            await until(
                pilot,
                lambda: any("Restart roll: 2 of 2 replica(s) replaced" in t for t in toasts(app)),
            )
    finally:
        await instance.stop()


async def test_t_on_the_instances_view_rolls_that_instances_replicas(redis_url: str) -> None:
    settings = RedisSettings(url=redis_url)
    instance = make_instance(settings, _noop, ["rolli"], "rolli-a", replicas=1)
    await instance.start()
    try:
        (first,) = instance.worker_ids
        app = ConsoleApp(RedisBackend(settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 1)
            await pilot.press("2")
            view = app.main_screen.instances_view
            await until(pilot, lambda: view.selected() is not None)
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            assert "on rolli-a" in app.screen.verb  # type: ignore[attr-defined]
            app.screen.query_one("#confirm").press()  # type: ignore[attr-defined]
            await until(pilot, lambda: bool(app.main_screen.query(RestartProgress)))
            panel = app.main_screen.query_one(RestartProgress)
            await until(pilot, lambda: panel.ended is not None, timeout=30)
            assert panel.ended == "done" and panel.progress.replaced == 1
            assert first not in instance.worker_ids
    finally:
        await instance.stop()


async def test_k_stops_a_type_as_scale_to_zero_and_a_replica_as_a_drain(
    redis: Redis, redis_url: str
) -> None:
    settings = RedisSettings(url=redis_url)
    instance = make_instance(settings, _noop, ["halt"], "halt-a", replicas=2)
    await instance.start()
    try:
        app = ConsoleApp(RedisBackend(settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            table = app.main_screen.workers_view.table
            await until(pilot, lambda: table.row_count == 2)
            one = sorted(instance.worker_ids)[0]
            table.move_to(one)
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            warning = app.screen.warning  # type: ignore[attr-defined]
            assert "each drains" in warning and "nothing replaces them" in warning
            assert "scale T 0 is the fleet-wide form of stop" in warning
            app.screen.query_one("#confirm").press()  # type: ignore[attr-defined]

            async def drained() -> bool:
                return one not in instance.worker_ids

            await until_async(drained, timeout=15)
            audited = [(e["action"], e["target"]) for e in await _audit(redis)]
            assert audited[0] == ("drain", one)  # the stop is audited as the drain it is
            await pilot.pause(1.0)
            assert len(instance.worker_ids) == 1  # not replaced: the slot stays empty

            await _on_types(app, pilot, "halt")
            await pilot.press("K")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            warning = app.screen.warning  # type: ignore[attr-defined]
            assert "every replica of halt fleet-wide: scale halt 0" in warning
            assert await redis.hget(KEYS.scale_targets, "halt") is None  # asked first
            app.screen.query_one("#confirm").press()  # type: ignore[attr-defined]

            async def stopped() -> bool:
                return not instance.worker_ids

            await until_async(stopped, timeout=15)
            assert await redis.hget(KEYS.scale_targets, "halt") == "0"
            scales = [e for e in await _audit(redis) if e["action"] == "scale"]
            assert [(e["target"], e["details"]) for e in scales] == [("halt", "count=0")]
    finally:
        await instance.stop()


async def test_c_edits_a_types_configuration_checked_as_typed_with_each_replicas_report(
    redis: Redis, redis_url: str
) -> None:
    settings = RedisSettings(url=redis_url)
    handler = _Configured()
    instance = make_instance(settings, handler, ["cfg"], "cfg-a", replicas=3)
    await instance.start()
    try:
        app = ConsoleApp(RedisBackend(settings), refresh=0.2)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 3)
            await _on_types(app, pilot, "cfg")
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ConfigEditorScreen))
            editor = app.screen.query_one("#config-text", TextArea)
            await until(pilot, lambda: editor.text == "{}" and not editor.read_only)

            checks = {
                '{"replicas": 4}': "'replicas' is reserved: routing and loading settings",
                '{"greeting": ': "not JSON: line 1",
                "[1, 2]": "the configuration must be a JSON object",
            }
            for text, why in checks.items():
                editor.load_text(text)

                def refused(why: str = why) -> bool:
                    return why in _text(app, "#config-status")

                await until(pilot, refused)
            await pilot.press("ctrl+s")  # refused: nothing written
            await pilot.pause(0.2)
            assert await redis.get(KEYS.type_config("cfg")) is None

            editor.load_text('{"greeting": "hi", "temperature": 0.2}')
            valid = "valid JSON object, 2 key(s)"
            await until(pilot, lambda: valid in _text(app, "#config-status"))
            app.screen.query_one("#config-reason", Input).value = "launch"
            await pilot.press("ctrl+s")
            await until(
                pilot,
                lambda: (
                    "version 1 saved · 3/3 replica(s) reported" in _text(app, "#config-reports")
                ),
                timeout=15,
            )
            reports = _text(app, "#config-reports")
            for wid in instance.worker_ids:
                assert f"{wid}: applied" in reports
            assert handler.applied[-1] == {"greeting": "hi", "temperature": 0.2}
            entry = (await _audit(redis))[-1]
            assert (entry["action"], entry["target"], entry["reason"]) == (
                "config-set",
                "cfg",
                "launch",
            )
            assert 'v1: +greeting="hi"; +temperature=0.2' in entry["details"]

            # Every replica's hook fails: each says so, with the hook's error.
            editor.load_text('{"fail": true, "greeting": "hi"}')
            await until(pilot, lambda: "+fail=true" in _text(app, "#config-status"))
            await pilot.press("ctrl+s")
            await until(
                pilot,
                lambda: "version 2 saved · 3/3" in _text(app, "#config-reports"),
                timeout=15,
            )
            reports = _text(app, "#config-reports")
            assert reports.count("failed (ValueError: asked to fail)") == 3
            stored = json.loads(await redis.get(KEYS.type_config("cfg")) or "{}")
            assert stored["config"] == {"fail": True, "greeting": "hi"}  # temperature unset
    finally:
        await instance.stop()


async def test_scale_says_a_drained_slot_stays_empty_and_nothing_scales_a_by_framework_type(
    redis: Redis, redis_url: str
) -> None:
    settings = RedisSettings(url=redis_url)
    instance = make_instance(settings, _noop, ["plan"], "plan-a", replicas=2)
    await instance.start()
    await redis.sadd(KEYS.workers, "bf-1")
    await redis.sadd(KEYS.worker_agent_types("bf-1"), "legacy")
    await redis.sadd(KEYS.agent_types, "legacy")
    await redis.sadd(KEYS.type_workers("legacy"), "bf-1")
    lease = {"version": 1, "token": "t", "last_seen": now_ms(), "ip_address": "10.0.0.9"}
    await redis.set(KEYS.worker_online("bf-1"), json.dumps(lease), px=600_000)
    try:
        app = ConsoleApp(RedisBackend(settings), refresh=0.2)
        async with app.run_test(size=(120, 36), notifications=True) as pilot:
            await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 3)
            await _on_types(app, pilot, "plan")
            await pilot.press("S")
            await until(pilot, lambda: isinstance(app.screen, CountScreen))
            app.screen.query_one("#count", Input).value = "1"
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            warning = _text(app, "#dialog-warning")
            assert "plan-a: 2 running -> 1 (1 replica drains)" in warning
            assert "plan-a: 1 drained, not rebuilt: the slot stays empty" in warning
            assert "restart: it exits and its instance replaces it under a new id" in warning
            await pilot.press("escape")

            await _on_types(app, pilot, "legacy")
            await pilot.press("S")
            await until(pilot, lambda: any("nothing can scale legacy" in t for t in toasts(app)))
            toast = next(t for t in toasts(app) if "nothing can scale legacy" in t)
            assert "by-framework" in toast and "bf-1" in toast
            assert not isinstance(app.screen, CountScreen)
            assert await redis.hget(KEYS.scale_targets, "legacy") is None

            # K (stop) on it is scale legacy 0: refused with the same sentence.
            app.clear_notifications()
            await pilot.press("K")
            await until(pilot, lambda: any("nothing can scale legacy" in t for t in toasts(app)))
            assert next(t for t in toasts(app) if "nothing can scale legacy" in t) == toast
            assert not isinstance(app.screen, ConfirmScreen)
            assert await redis.hget(KEYS.scale_targets, "legacy") is None
    finally:
        await instance.stop()


class _RecordingBackend(RedisBackend):
    """The live backend, keeping what each rolling restart was asked and yielded."""

    def __init__(self, settings: RedisSettings) -> None:
        super().__init__(settings)
        self.asked: list[int] = []
        self.events: list[tuple[str, str]] = []

    async def rolling_restart(self, request: Any) -> Any:
        self.asked.append(request.max_unavailable)
        async for outcome in super().rolling_restart(request):
            self.events.append((outcome.worker_id, outcome.state.value))
            yield outcome


async def test_t_asks_for_max_unavailable_refuses_bad_values_and_rolls_that_many_at_once(
    redis_url: str,
) -> None:
    settings = RedisSettings(url=redis_url)
    instance = make_instance(settings, _noop, ["mu"], "mu-a", replicas=2)
    await instance.start()
    try:
        before = set(instance.worker_ids)
        backend = _RecordingBackend(settings)
        app = ConsoleApp(backend, refresh=0.2)
        async with app.run_test(size=(120, 40), notifications=True) as pilot:
            await until(pilot, lambda: app.main_screen.workers_view.table.row_count == 2)
            await _on_types(app, pilot, "mu")
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            screen = app.screen
            field = screen.query_one("#max-unavailable", Input)
            assert field.value == "1"
            for bad, why in (
                ("0", "a whole number of 1 or more"),
                ("x", "a whole number of 1 or more"),
                ("3", "exceeds the largest instance's 2 replica(s)"),
            ):
                field.value = bad
                screen.query_one("#confirm").press()  # type: ignore[attr-defined]
                await pilot.pause()
                assert app.screen is screen  # stays in the dialog
                error = _text(app, "#max-unavailable-error")
                assert why in error and "\n" not in error
            field.focus()
            field.value = ""
            await pilot.press("2", "enter")  # typed, Enter moves on to the reason
            assert not _text(app, "#max-unavailable-error")
            screen.query_one("#confirm").press()  # type: ignore[attr-defined]
            await until(pilot, lambda: bool(app.main_screen.query(RestartProgress)))
            panel = app.main_screen.query_one(RestartProgress)
            await until(pilot, lambda: panel.ended is not None, timeout=40)
            assert panel.ended == "done" and panel.progress.replaced == 2
            assert backend.asked == [2]
            # Both replicas of the one instance were sent before either was replaced.
            states = [state for _, state in backend.events]
            assert states[:2] == ["sent", "sent"], backend.events
            assert set(instance.worker_ids).isdisjoint(before)
    finally:
        await instance.stop()
