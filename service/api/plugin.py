"""The one init plugin: wires routes, dependencies, errors, OpenAPI and the lifespan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from importlib.metadata import PackageNotFoundError, version

from litestar import Litestar
from litestar.config.app import AppConfig
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin, YamlRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins import InitPluginProtocol

from service.api.admission import admission
from service.api.auth import KeyCache, scope_guard
from service.api.mcp_mount import STATE_KEY, build_mcp_endpoint, mcp_mount
from service.api.problems import problem_response
from service.api.routes.agents import agent_handlers
from service.api.routes.calculators import calculators_router
from service.api.routes.calibrations import calibrations_router
from service.api.routes.catalogue import catalogue_router
from service.api.routes.deps import provide_runtime
from service.api.routes.diagnoses import create_diagnosis
from service.api.routes.events import stream_events
from service.api.routes.frontier import get_frontier
from service.api.routes.health import health_handlers
from service.api.routes.jobs import jobs_router
from service.api.routes.profiles import create_profile
from service.api.routes.scenarios import decode_scenario
from service.api.routes.schedules import schedules_router
from service.api.routes.ui import ui_handlers
from service.api.runtime import ServiceRuntime
from service.api.timing import request_timing
from service.logs import get_logger

log = get_logger(__name__)


def _service_version() -> str:
    try:
        return version("sglang-tuner")
    except PackageNotFoundError:
        return "0.0.0"


class TunerPlugin(InitPluginProtocol):
    """Everything the app needs beyond Litestar's defaults, one small `_configure_x` each."""

    def __init__(self, runtime: ServiceRuntime) -> None:
        self.runtime = runtime

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        self._configure_routes(app_config)
        self._configure_dependencies(app_config)
        self._configure_timing(app_config)
        self._configure_errors(app_config)
        self._configure_openapi(app_config)
        self._configure_lifespan(app_config)
        return app_config

    def _configure_routes(self, app_config: AppConfig) -> None:
        app_config.route_handlers.extend(
            [*health_handlers, catalogue_router, jobs_router([stream_events, get_frontier]), schedules_router, calculators_router,
             calibrations_router,
             create_profile, create_diagnosis, decode_scenario, *agent_handlers, *ui_handlers, mcp_mount])

    def _configure_dependencies(self, app_config: AppConfig) -> None:
        app_config.dependencies["runtime"] = Provide(provide_runtime, sync_to_thread=False)
        app_config.state = State({"runtime": self.runtime,
                                  "key_cache": KeyCache(self.runtime.settings.key_cache_seconds)})
        app_config.guards.append(scope_guard)
        app_config.signature_namespace["ServiceRuntime"] = ServiceRuntime

    def _configure_timing(self, app_config: AppConfig) -> None:
        app_config.middleware.append(request_timing(self.runtime.metrics))
        app_config.middleware.append(admission(self.runtime.settings))

    def _configure_errors(self, app_config: AppConfig) -> None:
        app_config.exception_handlers[Exception] = problem_response

    def _configure_openapi(self, app_config: AppConfig) -> None:
        app_config.openapi_config = OpenAPIConfig(
            title="sglang-tuner", version=_service_version(), path="/schema",
            description="Tune SGLang deployments to their SLO: jobs, rounds, reports, schedules.",
            render_plugins=[SwaggerRenderPlugin(path="/swagger"), JsonRenderPlugin(), YamlRenderPlugin()],
            components=Components(security_schemes={"apiKey": SecurityScheme(
                type="http", scheme="bearer", description="An API key from `sglang-tuner keys create`.")}),
        )

    def _configure_lifespan(self, app_config: AppConfig) -> None:
        runtime = self.runtime

        @asynccontextmanager
        async def lifespan(app: Litestar) -> AsyncIterator[None]:
            await runtime.store.migrate()
            if runtime.settings.dev:
                log.warning("dev_mode", detail="DEVELOPMENT MODE: requests from loopback need no API key",
                            host=runtime.settings.host)
            if runtime.settings.run_workers:
                await runtime.workers.start()
            if runtime.scheduler is not None and runtime.settings.run_scheduler:
                await runtime.scheduler.start()
            runtime.started = True
            try:
                async with AsyncExitStack() as mcp:
                    # The MCP session manager's task group lives exactly as long as the app.
                    endpoint = build_mcp_endpoint(app, runtime)
                    await mcp.enter_async_context(endpoint.lifespan())
                    await mcp.enter_async_context(runtime.job_views.refreshing(runtime.store))
                    app.state[STATE_KEY] = endpoint
                    yield
            finally:
                app.state.pop(STATE_KEY, None)
                runtime.started = False
                if runtime.scheduler is not None:
                    await runtime.scheduler.stop()
                await runtime.workers.stop()
                await runtime.store.close()

        app_config.lifespan.append(lifespan)
