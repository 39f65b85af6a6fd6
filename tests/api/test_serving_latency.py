"""What keeps `GET /v1/jobs/{id}` fast under load: the job view index, the key cache, CPUs kept for serving, request
timings."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from types import SimpleNamespace
from typing import Any

import pytest
from litestar.testing import TestClient

from service.api.auth import KeyCache
from service.api.job_views import JobViewIndex
from service.api.wire import JobView, job_view
from service.domain import JobState
from service.store import ApiKeyRecord, NewJob, Scope, Store
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
async def test_the_refresher_reads_only_jobs_someone_polls(store: Store) -> None:
    polled, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    unpolled, _ = await store.create_job(NewJob(playbook="coding-assistant", runner="simulator", request={}))
    index, polled_reads, unpolled_reads = JobViewIndex(0.5), CountingReads(store, polled.id), CountingReads(
        store, unpolled.id)
    index.put(job_view(unpolled, None))  # what creating it through the API leaves in the index
    await index.view(polled.id, polled_reads)
    await index.refresh(store)
    await index.view(polled.id, polled_reads)
    assert polled_reads.count == 1  # kept fresh by the refresh
    await index.view(unpolled.id, unpolled_reads)
    assert unpolled_reads.count == 1  # left out of the refresh, so read on its first request


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


class CountingKeys:
    """The store's key check, counting database reads; fails the next `failures` of them."""

    def __init__(self, store: Store, failures: int = 0) -> None:
        self.store, self.failures, self.count = store, failures, 0
        self.finished = asyncio.Event()

    async def authenticate(self, token: str) -> ApiKeyRecord | None:
        self.count += 1
        try:
            if self.failures:
                self.failures -= 1
                raise ConnectionError("database unavailable")
            return await self.store.authenticate(token)
        finally:
            self.finished.set()

    async def next_read(self) -> None:
        """Until a read in flight (or the next one) has finished."""
        self.finished.clear()
        await asyncio.wait_for(self.finished.wait(), 10)


@pytest.mark.anyio
async def test_fifty_requests_presenting_a_key_not_yet_verified_read_it_once(store: Store) -> None:
    _, token = await store.create_api_key("dashboard", [Scope.READ])
    keys = CountingKeys(store)
    cache = KeyCache(5.0)
    found = await asyncio.gather(*(cache.lookup(SimpleNamespace(store=keys), token) for _ in range(50)))
    assert {key.name for key in found if key is not None} == {"dashboard"} and len(found) == 50
    assert keys.count == 1


@pytest.mark.anyio
async def test_a_key_in_steady_use_is_verified_again_in_the_background_and_a_revocation_holds(store: Store) -> None:
    record, token = await store.create_api_key("dashboard", [Scope.READ])
    keys = CountingKeys(store)
    runtime = SimpleNamespace(store=keys)
    cache = KeyCache(2.0)
    assert await cache.lookup(runtime, token) is not None
    await store.revoke_api_key(record.id)
    await asyncio.sleep(1.1)  # past half the cache's lifetime, well before its end
    assert await cache.lookup(runtime, token) is not None  # answered from the cache; a check starts behind it
    await keys.next_read()
    assert await cache.lookup(runtime, token) is None  # refused before the entry would have expired
    assert keys.count == 2


@pytest.mark.anyio
async def test_a_failed_key_check_reaches_the_waiting_requests_and_the_next_one_checks_again(store: Store) -> None:
    _, token = await store.create_api_key("dashboard", [Scope.READ])
    keys = CountingKeys(store, failures=1)
    runtime = SimpleNamespace(store=keys)
    cache = KeyCache(5.0)
    failed = await asyncio.gather(*(cache.lookup(runtime, token) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(outcome, ConnectionError) for outcome in failed)
    again = await cache.lookup(runtime, token)
    assert again is not None and again.name == "dashboard" and keys.count == 2


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
