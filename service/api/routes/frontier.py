"""`GET /v1/jobs/{id}/frontier`: every deployment a job measured, its figures and its place on the Pareto frontiers."""

from __future__ import annotations

import msgspec
from litestar import get

from service.api.auth import SECURITY
from service.api.problems import problem_responses
from service.api.routes.deps import Runtime
from service.api.routes.jobs import JobId, _job_or_404, job_report
from service.engine.charts import FRONTIERS, PARETO, ChartDeployment, ChartTarget


class FrontierView(msgspec.Struct, kw_only=True):
    """The deployments a job measured, one entry per deployment (its round), with the figures of its round.

    `frontiers` names the two figures of each frontier (`+` higher is better, `-` lower is better) and
    `pareto` the figures of the `pareto` flag; `chosen` is the round whose deployment the job ended on (None
    while the job runs or when it measured nothing). Each entry's `source` says where its figures came from.
    """

    job_id: str
    state: str
    chosen: int | None
    frontiers: dict[str, list[str]]
    pareto: list[str]
    targets: list[ChartTarget]
    deployments: list[ChartDeployment]


def _axes(axes: tuple[tuple[str, bool], ...]) -> list[str]:
    return [("+" if higher else "-") + name for name, higher in axes]


@get("/{job_id:str}/frontier", operation_id="getJobFrontier", opt={"scope": "read"}, security=SECURITY,
     responses=problem_responses(400, 401, 403, 404))
async def get_frontier(job_id: JobId, runtime: Runtime) -> FrontierView:
    """Every deployment measured in the job with its figures, `pareto`, `frontiers` and `chosen` flags: the data
    of the job page's Pareto charts (output tok/s per GPU against p95 TTFT and median ITL, cost against p95 TTFT)."""
    job = await _job_or_404(runtime, job_id)
    report = await job_report(runtime, job)
    charts = report.charts
    return FrontierView(job_id=job.id, state=job.state.value, chosen=None if charts is None else charts.chosen,
                        frontiers={name: _axes(axes) for name, axes in FRONTIERS.items()}, pareto=_axes(PARETO),
                        targets=[] if charts is None else charts.targets,
                        deployments=[] if charts is None else charts.deployments)
