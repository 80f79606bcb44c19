"""The live console: a Textual app over the fleet reader and the admin API.

Only this package imports Textual. It polls :class:`worker_runtime.fleet.FleetReader`
through :mod:`byconsole.tui.backend` (the one place holding a Redis client), shows
frozen snapshots in views diffed by key, and runs operator actions through
:class:`worker_runtime.admin.WorkerManager`.
"""
