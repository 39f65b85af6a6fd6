"""Rounds measured at once: a runner with room for several deployments decides as one run after another.

The engine starts a round's repeats and a technique's alternatives together when the runner says it can
hold them (`Runner.parallel_rounds`), and walks them in the sequential order: the report is the sequential
run's on the same seeds, byte for byte apart from the job id. What the walk stops before (the round budget,
a stop request) is cancelled, and nothing is left running when the job ends.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import msgspec
import pytest

from plugins.runners.simulated import SimulatedRunner, simulate_here
from service import JobState, Playbook, RoundContext, RoundResult, Runner, RunnerCapabilities, Scenario
from service.engine import TuningEngine, TuningOutcome, report_markdown
from service.engine.setup import parts_from_host
from tests.e2e.untuned import A100_CHAT, HOST, auto, build, playbook

pytestmark = pytest.mark.slow


class Wide(Runner):
    """The simulated rounds of a runner with room for `width` deployments, each held for a moment."""

    name: ClassVar[str] = "wide"
    capabilities: ClassVar[RunnerCapabilities] = SimulatedRunner.capabilities

    def __init__(self, width: int, *, stop_after: int | None = None) -> None:
        self.width = width
        self.stop_after = stop_after
        self.engine: TuningEngine | None = None
        self.running = 0
        self.peak = 0
        self.started = 0
        self.cancelled = 0

    async def parallel_rounds(self, scenario: Scenario, context: RoundContext | None = None) -> int:
        return self.width

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        self.running += 1
        self.started += 1
        self.peak = max(self.peak, self.running)
        try:
            if self.stop_after is not None and self.started == self.stop_after and self.engine is not None:
                self.engine.stop(JobState.CANCELLED, "cancelled by the operator")
            await asyncio.sleep(0.02)  # the deployment is up: the others start meanwhile
            return simulate_here(scenario, seed, context or RoundContext())
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1


# Casebook case 2 round 1 measures routers side by side against the single instance; here four of them.
FOUR = playbook("router", "router_policy",
                options={"router_policy": {"compare": ["round_robin", "cache_aware", "power_of_two", "random"]}})


def run(chosen: Playbook, scenario: Scenario, runner: Wide, *, seed: int = 0) -> TuningOutcome:
    parts = dataclasses.replace(parts_from_host(HOST, chosen, scenario), runner=runner)
    engine = TuningEngine(parts, chosen, scenario, seed=seed, job_id="same-id")
    runner.engine = engine
    return asyncio.run(engine.run())


def test_four_alternatives_measured_at_once_report_as_the_sequential_run() -> None:
    one, four = Wide(1), Wide(4)
    sequential, parallel = run(FOUR, build(A100_CHAT), one), run(FOUR, build(A100_CHAT), four)
    alternatives = [r for r in parallel.report.rounds if r.technique == "router_policy"]
    assert len(alternatives) == 4 and all(r.result.bench.completed for r in alternatives)
    assert one.peak == 1 and four.peak == 4 and four.running == 0
    assert report_markdown(parallel) == report_markdown(sequential)


def test_the_whole_auto_playbook_decides_as_the_sequential_run_at_two_seeds() -> None:
    for seed in (0, 1):
        one, two = Wide(1), Wide(2)
        sequential = run(auto(), build(A100_CHAT), one, seed=seed)
        parallel = run(auto(), build(A100_CHAT), two, seed=seed)
        assert two.peak == 2 and report_markdown(parallel) == report_markdown(sequential)


def test_alternatives_the_round_budget_stops_before_are_cancelled_and_the_report_is_unchanged() -> None:
    # Two candidate rounds of budget, more alternatives than that: the walk judges the first two, as a
    # sequential run does, and the alternatives measured ahead are cancelled (or their results dropped).
    chosen = msgspec.structs.replace(FOUR, max_rounds=2)
    one, four = Wide(1), Wide(4)
    sequential, parallel = run(chosen, build(A100_CHAT), one), run(chosen, build(A100_CHAT), four)
    assert report_markdown(parallel) == report_markdown(sequential)
    measured = [r for r in parallel.report.rounds if r.technique == "router_policy"]
    assert len(measured) == 2 and four.started > one.started and four.running == 0


def test_a_stop_mid_group_ends_the_job_cancelled_with_nothing_running() -> None:
    runner = Wide(4, stop_after=4)  # the baseline's two repeats, then the group's first alternatives
    outcome = run(FOUR, build(A100_CHAT), runner)
    assert outcome.report.job.state == "cancelled"
    assert runner.running == 0 and runner.cancelled >= 1


def test_the_simulated_runner_on_two_processes_reports_as_on_one(monkeypatch: pytest.MonkeyPatch) -> None:
    reports = {}
    for processes in ("1", "2"):
        monkeypatch.setenv("SGLANG_TUNER_SIMULATED_PROCESSES", processes)
        runner = SimulatedRunner()
        parts = dataclasses.replace(parts_from_host(HOST, FOUR, build(A100_CHAT)), runner=runner)
        engine = TuningEngine(parts, FOUR, build(A100_CHAT), seed=0, job_id="same-id")
        reports[processes] = report_markdown(asyncio.run(engine.run()))
        assert runner.processes == int(processes)
    assert reports["2"] == reports["1"]


def test_tune_reports_the_same_with_parallel_1_as_with_every_core(tmp_path: Path) -> None:
    # The CLI as a user runs it: `--parallel 1` measures one round after another; the default runs the
    # simulated runner's rounds on every core. Same Markdown report, apart from the job id.
    cli = Path(sys.executable).with_name("sglang-tuner")
    reports = []
    for extra in (["--parallel", "1"], []):
        out = tmp_path / f"report{len(reports)}.md"
        subprocess.run([str(cli), "tune", "--playbook", "coding-assistant", "--markdown", str(out), "--json",
                        *extra], check=True, capture_output=True, env={**os.environ,
                                                                       "SGLANG_TUNER_SIMULATED_PROCESSES": "2"})
        reports.append(re.sub(r"Job `[0-9a-f]+`", "Job `id`", out.read_text()))
    assert "Job `id`" in reports[0] and reports[1] == reports[0]


def test_worker_processes_die_with_a_tune_killed_mid_job() -> None:
    cli = Path(sys.executable).with_name("sglang-tuner")
    job = subprocess.Popen([str(cli), "tune", "--playbook", "moe-at-scale", "--json"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env={**os.environ, "SGLANG_TUNER_SIMULATED_PROCESSES": "2"})
    try:
        workers: list[int] = []
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline and job.poll() is None:
            time.sleep(0.5)
            workers = [pid for pid in children(job.pid) if b"spawn_main" in cmdline(pid)]
        assert len(workers) == 2, "the job never started its two worker processes"
    finally:
        job.kill()
        job.wait()
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in workers if alive(pid)]


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
