"""worker_runtime: what every managed worker process runs, plus the operator's admin API.

The public API, importable from the package itself::

    from worker_runtime import Task, WorkerInstance, Producer, WorkerManager, FleetReader

Names load lazily (PEP 562): ``import worker_runtime.keys`` stays as cheap as it was,
a worker that never touches the admin API never imports it, and the console loads only
what it uses. Everything else is internal and may move between modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads these
    from worker_runtime.admin import (
        ActionResult,
        UnknownWorkerError,
        WorkerManager,
        WorkerOnlineError,
    )
    from worker_runtime.connection import create_redis
    from worker_runtime.context import Handler, RuntimeContext
    from worker_runtime.fleet import FleetReader
    from worker_runtime.instance import WorkerInstance
    from worker_runtime.keys import Keys
    from worker_runtime.models import (
        AdminState,
        Execution,
        InstanceLease,
        Lease,
        Lifecycle,
        Role,
        Status,
        Task,
    )
    from worker_runtime.producer import NoOnlineWorkerError, NotReplicatedError, Producer
    from worker_runtime.scheduler import Periodic, periodic
    from worker_runtime.settings import ConfigError, RedisSettings, WorkerSettings
    from worker_runtime.snapshot import FleetSnapshot, WorkerDetail, WorkerView

_HOMES: dict[str, str] = {
    # running workers
    "WorkerInstance": "instance",
    "Handler": "context",
    "RuntimeContext": "context",
    "Task": "models",
    "periodic": "scheduler",
    "Periodic": "scheduler",
    # submitting work
    "Producer": "producer",
    "NoOnlineWorkerError": "producer",
    "NotReplicatedError": "producer",
    # operating the fleet
    "WorkerManager": "admin",
    "ActionResult": "admin",
    "UnknownWorkerError": "admin",
    "WorkerOnlineError": "admin",
    "FleetReader": "fleet",
    "FleetSnapshot": "snapshot",
    "WorkerView": "snapshot",
    "WorkerDetail": "snapshot",
    # the shared models
    "Lease": "models",
    "AdminState": "models",
    "InstanceLease": "models",
    "Execution": "models",
    "Lifecycle": "models",
    "Status": "models",
    "Role": "models",
    # connecting
    "RedisSettings": "settings",
    "WorkerSettings": "settings",
    "ConfigError": "settings",
    "create_redis": "connection",
    "Keys": "keys",
}

__all__ = [
    "ActionResult",
    "AdminState",
    "ConfigError",
    "Execution",
    "FleetReader",
    "FleetSnapshot",
    "Handler",
    "InstanceLease",
    "Keys",
    "Lease",
    "Lifecycle",
    "NoOnlineWorkerError",
    "NotReplicatedError",
    "Periodic",
    "Producer",
    "RedisSettings",
    "Role",
    "RuntimeContext",
    "Status",
    "Task",
    "UnknownWorkerError",
    "WorkerDetail",
    "WorkerInstance",
    "WorkerManager",
    "WorkerOnlineError",
    "WorkerSettings",
    "WorkerView",
    "create_redis",
    "periodic",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its home module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'worker_runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"worker_runtime.{home}"), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
