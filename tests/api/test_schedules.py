"""Schedules: admin-only changes, validation, exactly-once fires across instances, downtime catch-up."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from litestar.testing import TestClient

from service.plugin_host import PluginHost
from service.scheduler import ScheduleRunner
from service.store import CatchUp, FireOutcome, NewSchedule, Store, open_store
from tests.api.fakes import auth

SCHEDULE = {"name": "nightly", "cron": "0 3 * * *", "job": {"playbook": "coding-assistant"}}


def test_only_admin_keys_change_schedules(client: TestClient, tokens: dict[str, str]) -> None:
    assert client.post("/v1/schedules", json=SCHEDULE, headers=auth(tokens["write"])).status_code == 403
    created = client.post("/v1/schedules", json=SCHEDULE, headers=auth(tokens["admin"]))
    assert created.status_code == 201
    body = created.json()
    assert body["next_fire_at"].endswith("03:00:00Z") and body["catch_up"] == "run_once"
    listed = client.get("/v1/schedules", headers=auth(tokens["read"])).json()
    assert [s["name"] for s in listed] == ["nightly"]
    again = client.post("/v1/schedules", json=SCHEDULE, headers=auth(tokens["admin"]))
    assert again.status_code == 409 and again.json()["field"] == "name"
    assert client.get(f"/v1/schedules/{body['id']}/fires", headers=auth(tokens["read"])).json() == []
    assert client.delete(f"/v1/schedules/{body['id']}", headers=auth(tokens["write"])).status_code == 403
    assert client.delete(f"/v1/schedules/{body['id']}", headers=auth(tokens["admin"])).status_code == 204
    assert client.get(f"/v1/schedules/{body['id']}", headers=auth(tokens["read"])).status_code == 404


def test_bad_cron_and_bad_job_name_their_field(client: TestClient, tokens: dict[str, str]) -> None:
    bad_cron = client.post("/v1/schedules", json={**SCHEDULE, "cron": "every night"}, headers=auth(tokens["admin"]))
    assert bad_cron.status_code == 422 and bad_cron.json()["field"] == "cron"
    bad_zone = client.post("/v1/schedules", json={**SCHEDULE, "timezone": "Mars/Olympus"},
                           headers=auth(tokens["admin"]))
    assert bad_zone.status_code == 422 and "timezone" in bad_zone.json()["detail"]
    bad_job = client.post("/v1/schedules", json={**SCHEDULE, "job": {"playbook": "nope"}},
                          headers=auth(tokens["admin"]))
    assert bad_job.status_code == 422 and bad_job.json()["field"] == "job.playbook"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def shared_db(tmp_path: Path) -> AsyncIterator[list[Store]]:
    """Two stores on one database file, as two service instances would have."""
    stores = [open_store(str(tmp_path / "tuner.db")) for _ in range(2)]
    await stores[0].migrate()
    yield stores
    for store in stores:
        await store.close()


@pytest.mark.anyio
async def test_two_instances_firing_twenty_times_make_exactly_twenty_jobs(
        shared_db: list[Store], plugins: PluginHost) -> None:
    schedule = await shared_db[0].create_schedule(NewSchedule(name="every-minute", cron="* * * * *",
                                                              job_request={"playbook": "coding-assistant"}))
    instances = [ScheduleRunner(store, plugins, owner=f"instance-{n}") for n, store in enumerate(shared_db)]
    fire_times = [1_800_000_000.0 + 60 * n for n in range(20)]
    fired = await asyncio.gather(*(runner.fire(schedule, at) for at in fire_times for runner in instances))
    assert sum(job is not None for job in fired) == 20
    jobs = (await shared_db[0].list_jobs(schedule_id=schedule.id, limit=100)).items
    assert len(jobs) == 20
    fires = await shared_db[1].list_fires(schedule.id)
    assert sorted(f.fire_at for f in fires) == fire_times and {f.outcome for f in fires} == {FireOutcome.STARTED}


@pytest.mark.anyio
async def test_downtime_fires_run_once_and_the_rest_are_recorded(shared_db: list[Store], plugins: PluginHost) -> None:
    created_at = datetime(2026, 1, 1, 0, 0, 30, tzinfo=UTC).timestamp()
    store = shared_db[0]
    store.clock = Clock(created_at)
    run_once = await store.create_schedule(NewSchedule(name="a", cron="* * * * *", misfire_grace_seconds=30,
                                                       job_request={"playbook": "coding-assistant"}))
    skip = await store.create_schedule(NewSchedule(name="b", cron="* * * * *", misfire_grace_seconds=30,
                                                   catch_up=CatchUp.SKIP, job_request={"playbook": "coding-assistant"}))
    later = Clock(created_at + 10 * 60 + 5)  # ten fires fell while nothing ran; the newest is 35 s old
    first = ScheduleRunner(shared_db[0], plugins, owner="first", clock=later)
    second = ScheduleRunner(shared_db[1], plugins, owner="second", clock=later)
    assert await first.catch_up(run_once) == [FireOutcome.COALESCED] * 9 + [FireOutcome.STARTED]
    assert await second.catch_up(run_once) == []  # the other instance sees every fire recorded
    assert await first.catch_up(skip) == [FireOutcome.MISSED] * 10  # newest is beyond the 30 s grace
    assert len((await store.list_jobs(schedule_id=run_once.id)).items) == 1
    assert (await store.list_jobs(schedule_id=skip.id)).items == []


@pytest.mark.anyio
async def test_apscheduler_fires_each_second_once_across_two_instances(
        shared_db: list[Store], plugins: PluginHost) -> None:
    schedule = await shared_db[0].create_schedule(NewSchedule(
        name="each-second", cron="* * * * * *", misfire_grace_seconds=5, job_request={"playbook": "coding-assistant"}))
    instances = [ScheduleRunner(store, plugins, owner=f"instance-{n}") for n, store in enumerate(shared_db)]
    for runner in instances:
        await runner.start()
    await asyncio.sleep(2.6)
    for runner in instances:
        await runner.stop()
    fires = await shared_db[0].list_fires(schedule.id)
    started = [f for f in fires if f.outcome == FireOutcome.STARTED]
    jobs = (await shared_db[0].list_jobs(schedule_id=schedule.id, limit=100)).items
    assert len(started) >= 2 and len(jobs) == len(started)
    assert len({f.fire_at for f in fires}) == len(fires)
    assert {j.id for j in jobs} == {f.job_id for f in started}
