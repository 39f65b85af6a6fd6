"""A trace replayed by the `local` runner on an emulated worker: its times, its shared blocks, its refusals."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from plugins.runners.local import LocalRunner
from plugins.runners.simulated import SimulatedRunner
from service import RoundContext, RoundResult
from service.domain import BenchSpec, Scenario, TraceRecord, TraceSpec, resolve_model
from service.plugin_host import PluginHost

from .conftest import settings, single_worker

# Twelve conversations' turns over 4 emulated seconds: each record repeats the previous one's blocks and adds
# one, so later turns hit the cache; the last record asks for more tokens than the model's context holds.
SPAN_MS = 4000.0


def _records() -> list[TraceRecord]:
    records = [TraceRecord(timestamp=k * SPAN_MS / 11, input_length=64 * (k % 4 + 1) + 10, output_length=12,
                           hash_ids=[100 * (k // 4) + j for j in range(k % 4 + 1)]) for k in range(12)]
    context = resolve_model("Qwen/Qwen3.6-27B").max_context
    return [*records, TraceRecord(timestamp=SPAN_MS, input_length=50, output_length=context, hash_ids=[999])]


def _scenario() -> Scenario:
    bench = BenchSpec(dataset="trace", num_prompts=13, warmup_requests=0,
                      trace=TraceSpec(records=_records(), block_tokens=64))
    return msgspec.structs.replace(single_worker(), bench=bench)


@pytest.fixture(scope="module")
def rounds() -> dict[str, RoundResult]:
    scenario = _scenario()
    local = asyncio.run(LocalRunner().run_round(scenario, context=RoundContext(settings=settings())))
    cost_models = PluginHost(allow={"builtin_cost_models"}).components("cost_model")
    simulated = asyncio.run(SimulatedRunner().run_round(
        scenario, context=RoundContext(cost_model="roofline", cost_models=cost_models)))
    return {"local": local, "simulated": simulated}


def test_the_emulated_replay_keeps_the_traces_clock(rounds: dict[str, RoundResult]) -> None:
    local = rounds["local"]
    assert local.provenance.source == "emulated", local.error
    assert local.bench.completed == 12
    # Figures are in emulated seconds: the replay spans the trace's 4 s (the refused record is the last sent).
    assert SPAN_MS / 1000 <= local.bench.duration < SPAN_MS / 1000 + 2.0


def test_the_server_refuses_the_record_longer_than_the_context(rounds: dict[str, RoundResult]) -> None:
    local, simulated = rounds["local"], rounds["simulated"]
    assert local.failure_rate == pytest.approx(1 / 13) == simulated.failure_rate
    assert local.status == simulated.status == "partial"
    assert "maximum context length" in (local.error or "") and "maximum context length" in (simulated.error or "")


def test_shared_blocks_hit_the_cache_as_in_the_simulator(rounds: dict[str, RoundResult]) -> None:
    local, simulated = rounds["local"], rounds["simulated"]
    assert simulated.server.cache_hit_rate > 0.3
    assert abs(local.server.cache_hit_rate - simulated.server.cache_hit_rate) <= 0.05
    assert local.bench.duration == pytest.approx(simulated.bench.duration, rel=0.1)
