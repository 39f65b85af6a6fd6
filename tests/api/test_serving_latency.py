"""What keeps `GET /v1/jobs/{id}` fast under load: the job view index, CPUs kept for serving, request timings."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from typing import Any

import pytest
from litestar.testing import TestClient

from service.api.job_views import JobViewIndex
from service.api.wire import JobView, job_view
from service.domain import JobState
from service.store import NewJob, Store
from service.workers.engine_process import job_cpus, lower_job_priority
from tests.api.fakes import auth, wait_for_state

JOB = {"playbook": "coding-assistant", "runner": "simulator"}


class CountingReads:
    """The request path's read of one job, counting how often it reaches the database."""

    def __init__(self, store: Store, job_id: str) -> None:
        self.store, self.job_id, self.count = store, job_id, 0

    async def __call__(self) -> JobView | None:
        self.count += 1
        job = await self.store.get_job(self.job_id)
        return None if job is None else job_view(job, await self.store.queue_position(job))


@pytest.mark.anyio
async def test_polling_a_running_job_reads_the_database_once_and_the_refresh_shows_its_end(store: Store) -> None:
    job, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    await store.claim_job("worker", 30)
    index, read = JobViewIndex(0.5), CountingReads(store, job.id)
    views = [await index.view(job.id, read) for _ in range(50)]
    assert {v.state for v in views if v is not None} == {JobState.RUNNING} and read.count == 1
    await store.finish_job(job.id, "worker", JobState.SUCCEEDED, "finished")
    await index.refresh(store)
    finished = await index.view(job.id, read)
    assert finished is not None and finished.state == JobState.SUCCEEDED and read.count == 1


@pytest.mark.anyio
async def test_a_refresh_never_replaces_a_view_the_api_wrote_after_it_began(store: Store) -> None:
    job, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    await store.claim_job("worker", 30)
    index = JobViewIndex(0.5)
    await index.view(job.id, CountingReads(store, job.id))
    cancelled = await store.request_cancel(job.id)
    assert cancelled is not None
    index.put(job_view(cancelled, None))
    index.put(job_view(job, None), read_at=0.0)  # what a refresh that began before the cancel had read
    shown = await index.view(job.id, CountingReads(store, job.id))
    assert shown is not None and shown.cancel_requested


@pytest.mark.anyio
async def test_a_view_the_refresher_left_behind_is_read_again_on_request(store: Store) -> None:
    job, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    index, read = JobViewIndex(0.5, max_stale_seconds=0.05), CountingReads(store, job.id)
    await index.view(job.id, read)
    await asyncio.sleep(0.1)
    await index.view(job.id, read)
    assert read.count == 2


@pytest.mark.anyio
async def test_the_refresher_keeps_queue_positions_current(store: Store) -> None:
    first, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="gpu", request={}, resource="h100"))
    second, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="gpu", request={}, resource="h100"))
    index = JobViewIndex(0.05)
    before = await index.view(second.id, CountingReads(store, second.id))
    assert before is not None and before.queue_position == 2
    async with index.refreshing(store):
        await store.request_cancel(first.id)
        await asyncio.sleep(0.3)
        after = await index.view(second.id, CountingReads(store, second.id))
    assert after is not None and after.queue_position == 1


def test_a_finished_job_shows_as_finished_through_the_api(client: TestClient, tokens: dict[str, str]) -> None:
    job = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
    # polled from the index while it runs; the refresher carries the end of the job to the pollers
    done = wait_for_state(client, job["id"], tokens["read"], {"succeeded"})
    assert done["finished_at"] is not None and done["next"][0]["rel"] == "report"


def test_metrics_time_each_request_by_operation(client: TestClient, tokens: dict[str, str]) -> None:
    job = client.post("/v1/jobs", json=JOB, headers=auth(tokens["write"])).json()
    for _ in range(3):
        assert client.get(f"/v1/jobs/{job['id']}", headers=auth(tokens["read"])).status_code == 200
    metrics = client.get("/metrics").text
    assert 'sglang_tuner_http_request_duration_seconds_count{operation="getJob"} 3.0' in metrics
    assert 'sglang_tuner_http_request_duration_seconds_count{operation="createJob"} 1.0' in metrics


def test_jobs_keep_off_the_cpus_reserved_for_serving() -> None:
    allowed = sorted(os.sched_getaffinity(0))
    assert job_cpus(0) is None
    assert job_cpus(len(allowed)) is None  # no CPU would be left for jobs: they may use them all
    if len(allowed) > 1:
        assert job_cpus(1) == frozenset(allowed[1:])


def _report_priority(cpus: frozenset[int] | None, out: Any) -> None:
    lower_job_priority(19, cpus)
    out.put((os.sched_getscheduler(0), os.sched_getaffinity(0)))


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to keep one free")
def test_a_job_process_runs_idle_class_on_the_job_cpus_only() -> None:
    cpus = job_cpus(1)
    context = multiprocessing.get_context("spawn")
    out = context.SimpleQueue()
    child = context.Process(target=_report_priority, args=(cpus, out))
    child.start()
    child.join(30)
    policy, affinity = out.get()
    assert policy == os.SCHED_IDLE and affinity == cpus
