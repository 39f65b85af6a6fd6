"""Test doubles for the HTTP API: a fake plugin (one playbook, two runners) and a fake tuning executor."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from litestar.testing import TestClient

from service import (
    BenchFigures,
    Decision,
    Pattern,
    Playbook,
    Provenance,
    Round,
    RoundResult,
    Runner,
    RunnerCapabilities,
    Source,
    Verdict,
    hookimpl,
)
from service.domain import Job, JobState, RoundState, RoundStatus
from service.engine import RoundJournal, TuningReport, progress_report


class SimRunner(Runner):
    name = "simulator"
    capabilities = RunnerCapabilities(restarts_servers=False, measures_real_gpus=False, needs_gpu=False)

    async def run_round(self, scenario, *, seed=None, context=None):  # pragma: no cover - the fake executor runs
        raise NotImplementedError


class GpuRunner(SimRunner):
    name = "gpu-host"
    capabilities = RunnerCapabilities(restarts_servers=True, measures_real_gpus=True, needs_gpu=True)


class FakePlugin:
    @hookimpl
    def register_playbooks(self, register):
        register(Playbook(name="coding-assistant", techniques=["chunked_prefill", "fp8"], max_rounds=5,
                          runner="simulator"))

    @hookimpl
    def register_runners(self, register):
        register(SimRunner())
        register(GpuRunner())


@dataclass
class FakeExecutor:
    """Runs `rounds` rounds of `round_seconds` each; resumes after committed rounds and re-runs interrupted ones."""

    rounds: int = 3
    round_seconds: float = 0.02
    fail: bool = False
    started: list[str] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)  # each job as the executor was handed it

    async def run(self, job: Job, journal: RoundJournal) -> TuningReport:
        self.started.append(job.id)
        self.jobs.append(job)
        ran = {r.index: r for r in job.rounds}

        async def on_round(round_: Round) -> None:
            await journal.record_round(round_)
            ran[round_.index] = round_

        index = len(job.rounds)
        retries = [r.index for r in job.rounds if r.state == RoundState.INTERRUPTED]
        done = sum(r.state == RoundState.FINISHED for r in job.rounds)
        while done < self.rounds:
            retry_of = retries.pop(0) if retries else None
            await self._round(on_round, index, retry_of)
            index, done = index + 1, done + 1
        if self.fail:
            raise RuntimeError("runner exploded")
        job.state, job.stop_reason = JobState.SUCCEEDED, "slo met"
        return progress_report(job, [ran[i] for i in sorted(ran)])

    def stop(self, job_id: str, state: JobState, reason: str) -> bool:
        return False  # the workers cancel the task instead

    async def _round(self, on_round, index: int, retry_of: int | None) -> None:
        started = datetime.now(UTC)
        await on_round(Round(index=index, technique="chunked_prefill", delta=None, state=RoundState.RUNNING,
                             started_at=started, retry_of=retry_of))
        await asyncio.sleep(self.round_seconds)
        result = RoundResult(status=RoundStatus.OK, provenance=Provenance(source=Source.SIMULATED, runner="fake"),
                             bench=BenchFigures(output_throughput=1000.0 + index, p95_ttft_ms=300.0 - index))
        await on_round(Round(
            index=index, technique="chunked_prefill", delta=None, state=RoundState.FINISHED, results=[result],
            decision=Decision(verdict=Verdict.ACCEPT, pattern=Pattern.THROUGHPUT_UP_LATENCY_DOWN,
                              reasons=["throughput up, ttft p95 down"]),
            started_at=started, finished_at=datetime.now(UTC), retry_of=retry_of))


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_for_state(client: TestClient, job_id: str, token: str, states: set[str], timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = client.get(f"/v1/jobs/{job_id}", headers=auth(token)).json()
        if body["state"] in states:
            return body
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} never reached {states}; last {body}")


def wait_for_round(client: TestClient, job_id: str, token: str, *, index: int, state: str,
                   timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rounds = client.get(f"/v1/jobs/{job_id}/rounds", headers=auth(token)).json()
        if any(r["index"] == index and r["state"] == state for r in rounds):
            return
        time.sleep(0.02)
    raise AssertionError(f"round {index} of job {job_id} never reached {state}")
