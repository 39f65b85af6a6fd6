"""Litestar app factory: `create_app(settings)` builds the service; the init plugin wires it."""

from __future__ import annotations

from litestar import Litestar

from service.api.job_views import JobViewIndex
from service.api.plugin import TunerPlugin
from service.api.runtime import ServiceRuntime, ServiceSettings, check_dev_mode
from service.plugin_host import PluginHost
from service.scheduler import ScheduleRunner
from service.store import Store, open_store
from service.workers.bell import EventBell
from service.workers.engine_executor import EngineExecutor
from service.workers.engine_process import ProcessEngineExecutor
from service.workers.executor import JobExecutor
from service.workers.metrics import ServiceMetrics
from service.workers.pool import JobWorkers


def create_app(settings: ServiceSettings | None = None, *, plugins: PluginHost | None = None,
               executor: JobExecutor | None = None, store: Store | None = None) -> Litestar:
    """Build the service's ASGI app.

    Args:
        settings: how to run; defaults to the SQLite file in the working directory, API keys required.
        plugins: the plugin host; defaults to every installed `sglang_tuner` plugin.
        executor: runs tuning jobs; defaults to the tuning engine, in a niced child process per simulated job
            when the plugins are the installed ones (so CPU-bound rounds never slow the API), else on threads.
        store: the persistence; defaults to `open_store(settings.db_url)`.

    Raises:
        DevModeRefusedError: `settings.dev` on a non-loopback host.
    """
    settings = settings or ServiceSettings()
    check_dev_mode(settings)
    store = store or open_store(settings.db_url)
    installed = plugins is None
    plugins = plugins or PluginHost()
    if executor is None:
        # A child process loads the installed plugins itself; a host built in code cannot cross over.
        executor = (ProcessEngineExecutor(plugins, serving_cpus=settings.serving_cpus) if installed
                    else EngineExecutor(plugins))
    metrics, bell = ServiceMetrics(), EventBell()
    workers = JobWorkers(store, executor, settings=settings.workers, metrics=metrics, bell=bell)
    runtime = ServiceRuntime(settings=settings, store=store, plugins=plugins, workers=workers, metrics=metrics,
                             bell=bell, job_views=JobViewIndex(settings.job_view_cache_seconds))
    runtime.scheduler = ScheduleRunner(store, plugins, workers=workers, metrics=metrics, owner=workers.owner)
    # The body limit is a constructor argument: Litestar reads it before init plugins run.
    return Litestar(plugins=[TunerPlugin(runtime)], request_max_body_size=settings.max_body_bytes)
