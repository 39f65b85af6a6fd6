"""`bench.warm_prompts`: a round measured on a service that has already served the workload's traffic.

Casebook case 2's hit rates (0.94 / 0.97) are those of a live service whose prefix cache holds the popular
documents; a freshly started server misses every document once. The real runners send the served traffic
before bench_serving's warm-up and keep it out of every figure, server counters included.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from plugins.runners.attach import AttachRunner
from plugins.runners.local import LocalRunner, SubprocessLauncher
from plugins.runners.local.ports import free_block
from plugins.runners.local.processes import stop
from plugins.runners.simulated import SimulatedRunner
from service import RoundContext, RoundResult
from service.domain import BenchSpec, DocumentSet, LengthDist, PrefixStructure, Scenario, WorkloadProfile, resolve_model
from service.loadgen import WARM_PROMPTS_SEED_OFFSET, bench_serving_argv, bench_serving_warm_argv, build_prompts
from service.plugin_host import PluginHost
from tests.api.service_process import wait_ready

from .conftest import settings, single_worker

PROMPTS = 16
WARM = 32
# The emulated and simulated hit rates agree within this (docs/runners.md, "Agreement with the simulator").
CACHE_HIT_ABSOLUTE = 0.05


def documents(warm_prompts: int) -> Scenario:
    """One emulated worker; prompts are [system][one of 8 documents][question], as in casebook case 2."""
    workload = WorkloadProfile(name="documents", input=LengthDist(median=800, kind="fixed"),
                               output=LengthDist(median=16, kind="fixed"),
                               prefix=PrefixStructure(system_prompt_tokens=128,
                                                      documents=DocumentSet(count=8, tokens=640)))
    return msgspec.structs.replace(single_worker(), workload=workload, bench=BenchSpec(
        num_prompts=PROMPTS, max_concurrency=4, warmup_requests=1, warm_prompts=warm_prompts))


def _local(scenario: Scenario) -> RoundResult:
    return asyncio.run(LocalRunner().run_round(scenario, context=RoundContext(settings=settings())))


def _measured_input_tokens(scenario: Scenario) -> int:
    _, measured = build_prompts(scenario.workload, scenario.bench, resolve_model(scenario.model))
    return sum(p.prompt_tokens for p in measured)


@pytest.fixture(scope="module")
def local_rounds() -> dict[int, RoundResult]:
    return {warm: _local(documents(warm)) for warm in (0, WARM)}


def test_a_warm_service_hits_the_cache_more_than_a_fresh_one(local_rounds: dict[int, RoundResult]) -> None:
    cold, warm = local_rounds[0], local_rounds[WARM]
    assert cold.status == warm.status == "ok", (cold.error, warm.error)
    # Read from the worker's own sglang:cached_tokens_total / sglang:prompt_tokens_total growth.
    assert warm.server.cache_hit_rate > cold.server.cache_hit_rate + 0.15
    assert warm.bench.median_ttft_ms < cold.bench.median_ttft_ms


def test_only_the_measured_requests_are_counted(local_rounds: dict[int, RoundResult]) -> None:
    for warm_prompts, result in local_rounds.items():
        assert result.bench.completed == PROMPTS
        assert result.bench.total_input_tokens == _measured_input_tokens(documents(warm_prompts))
        assert len(result.samples.ttft_ms) == PROMPTS
    assert any(note.startswith(f"warm_prompts: served {WARM} ") for note in local_rounds[WARM].notes)


def test_the_warm_local_round_agrees_with_the_simulator(local_rounds: dict[int, RoundResult]) -> None:
    # The simulator counts the measured requests only; counters scraped before the served traffic would
    # mix its misses into the rate and fall short of it.
    cost_models = PluginHost(allow={"builtin_cost_models"}).components("cost_model")
    simulated = asyncio.run(SimulatedRunner().run_round(
        documents(WARM), context=RoundContext(cost_model="roofline", cost_models=cost_models)))
    gap = abs(local_rounds[WARM].server.cache_hit_rate - simulated.server.cache_hit_rate)
    assert gap <= CACHE_HIT_ABSOLUTE


@pytest.fixture
def emulator(tmp_path: Path) -> Iterator[str]:
    """A running emulated worker on a free loopback port (what `attach` finds already serving)."""
    port = free_block(1)
    argv = [sys.executable, "-m", "service.emulator", "--model-path", "Qwen/Qwen3.6-27B", "--host", "127.0.0.1",
            "--port", str(port), "--enable-metrics", "--enable-cache-report"]
    env = {**os.environ, "SGLANG_TUNER_EMULATOR_TIME_SCALE": "0.5"}
    process = SubprocessLauncher().spawn("attached", argv, env, tmp_path / "attached.log")
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_ready(url, 60, poll=0.1, path="/health"):
            pytest.fail("the emulator never became healthy: " + process.log_text()[-2000:])
        yield url
    finally:
        stop(process, grace=3.0)


def _attach(url: str, scenario: Scenario) -> RoundResult:
    httpx.post(url + "/flush_cache", timeout=10.0)  # each round starts from an empty cache, like a restart
    overrides: dict[str, Any] = {"attach_url": url, "attach_allowlist": [re.escape(url)]}
    return asyncio.run(AttachRunner().run_round(scenario, context=RoundContext(settings=settings(**overrides))))


def test_attach_serves_the_warm_prompts_before_measuring(emulator: str) -> None:
    cold, warm = _attach(emulator, documents(0)), _attach(emulator, documents(WARM))
    assert cold.status == warm.status == "ok", (cold.error, warm.error)
    assert warm.server.cache_hit_rate > cold.server.cache_hit_rate + 0.15
    assert cold.bench.completed == warm.bench.completed == PROMPTS
    assert warm.bench.total_input_tokens == _measured_input_tokens(documents(WARM))


def test_bench_serving_runs_a_discarded_pass_of_the_warm_prompts_first(tmp_path: Path) -> None:
    scenario = documents(WARM)
    bench = msgspec.structs.replace(scenario.bench, flush_cache=True)
    warm = bench_serving_warm_argv("python", "http://h:1", bench, scenario.workload, tmp_path / "w.jsonl", model="m")
    measured = bench_serving_argv("python", "http://h:1", bench, scenario.workload, tmp_path / "o.jsonl", model="m")
    assert warm is not None
    pairs, measured_pairs = dict(zip(warm[3::2], warm[4::2], strict=False)), dict(
        zip(measured[3::2], measured[4::2], strict=False))
    # generated-shared-prefix is sized by its groups, not --num-prompts: one group of the asked count.
    assert (pairs["--gsp-num-groups"], pairs["--gsp-prompts-per-group"]) == ("1", str(WARM))
    assert (measured_pairs["--gsp-num-groups"], measured_pairs["--gsp-prompts-per-group"]) == ("1", str(PROMPTS))
    assert pairs["--seed"] == str(bench.seed + WARM_PROMPTS_SEED_OFFSET) != measured_pairs["--seed"]
    assert pairs["--warmup-requests"] == "0" and pairs["--output-file"] != measured_pairs["--output-file"]
    assert pairs["--max-concurrency"] == measured_pairs["--max-concurrency"]
    assert "--flush-cache" not in warm and "--flush-cache" in measured  # served traffic: no warm-up, no flush
    assert bench_serving_warm_argv("python", "http://h:1", documents(0).bench, scenario.workload,
                                   tmp_path / "w.jsonl", model="m") is None
