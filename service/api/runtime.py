"""What every request handler needs, built once per app: settings, store, plugins, workers, scheduler."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from service.api.job_views import JobViewIndex
from service.plugin_host import PluginHost
from service.scheduler import ScheduleRunner
from service.store import DEFAULT_DB_URL, Store
from service.workers.bell import EventBell
from service.workers.engine_process import SERVING_CPUS
from service.workers.metrics import ServiceMetrics
from service.workers.pool import JobWorkers, WorkerSettings

DEFAULT_MAX_BODY_BYTES = 1 << 20  # 1 MiB: a scenario is a few KiB; uploads of logs use their own limit
DEFAULT_MAX_UPLOAD_BYTES = 64 << 20


@dataclass(frozen=True)
class ServiceSettings:
    """How the service runs; `sglang-tuner serve` fills these from its flags."""

    db_url: str = DEFAULT_DB_URL
    host: str = "127.0.0.1"
    dev: bool = False
    open_reads: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    workers: WorkerSettings = field(default_factory=WorkerSettings)
    # CPUs kept free of simulated jobs' processes for serving requests (0: jobs may use every CPU).
    serving_cpus: int = SERVING_CPUS
    run_workers: bool = True
    run_scheduler: bool = True
    sse_poll_seconds: float = 1.0
    key_cache_seconds: float = 5.0
    # How often the views `GET /v1/jobs/{id}` answers from are refreshed for queued and running jobs, so how
    # stale such a view may be (0: no index, read the database every time).
    job_view_cache_seconds: float = 0.5
    # The URL clients use when it is not the bind address (behind a proxy): its host is accepted in the Host
    # header of /mcp and its origin in Origin, besides loopback.
    public_url: str | None = None
    allowed_origins: tuple[str, ...] = ()


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class DevModeRefusedError(ValueError):
    """`--dev` was asked for on an address reachable from other machines."""


def check_dev_mode(settings: ServiceSettings) -> None:
    """Refuse unauthenticated writes anywhere but loopback.

    Raises:
        DevModeRefusedError: dev mode on a non-loopback bind address.
    """
    if settings.dev and not is_loopback(settings.host):
        raise DevModeRefusedError(
            f"--dev allows unauthenticated writes and is only allowed on loopback, not {settings.host!r}; "
            "bind 127.0.0.1 or drop --dev and use API keys")


@dataclass
class ServiceRuntime:
    """The live parts of one app."""

    settings: ServiceSettings
    store: Store
    plugins: PluginHost
    workers: JobWorkers
    metrics: ServiceMetrics
    bell: EventBell
    scheduler: ScheduleRunner | None = None
    started: bool = False
    job_views: JobViewIndex = field(default_factory=lambda: JobViewIndex(0.0))
