"""Liveness, readiness and the service's own Prometheus metrics."""

from __future__ import annotations

from litestar import Response, get

from service.api.routes.deps import Runtime
from service.api.wire import Health


@get("/healthz", operation_id="healthz", tags=["operations"], sync_to_thread=False)
def healthz() -> Health:
    """Liveness: the process answers."""
    return Health(status="ok")


@get("/readyz", operation_id="readyz", tags=["operations"])
async def readyz(runtime: Runtime) -> Response[Health]:
    """Readiness: the database answers, its schema is current, and the workers have started."""
    checks = {"database": await runtime.store.ping(), "schema": await runtime.store.schema_is_current(),
              "workers": runtime.started}
    ready = all(checks.values())
    return Response(Health(status="ok" if ready else "unavailable", checks=checks), status_code=200 if ready else 503)


@get("/metrics", operation_id="metrics", tags=["operations"], media_type="text/plain; version=0.0.4")
async def metrics(runtime: Runtime) -> bytes:
    """Prometheus metrics: jobs by state, round durations, runner failures, reaped leases, schedule fires."""
    runtime.metrics.set_job_counts(await runtime.store.count_jobs_by_state())
    return runtime.metrics.render()


health_handlers = [healthz, readyz, metrics]
