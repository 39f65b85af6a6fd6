"""Casebook directions the simulator reproduces, each as SGLang 0.5.23's scheduler semantics give it.

Where SGLang's semantics differ from the casebook, the test asserts SGLang's behaviour and
docs/fidelity.md cites the source line.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from service.domain import RoundResult, Scenario, resolve_model
from service.simulator import simulate_round
from service.simulator.analytic import analytic_binder

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "casebook"


def _load(name: str) -> Scenario:
    return msgspec.toml.decode((EXAMPLES / f"{name}.toml").read_bytes(), type=Scenario)


def _run(scenario: Scenario, seed: int = 11) -> RoundResult:
    model = resolve_model(scenario.model)
    return simulate_round(scenario, model, analytic_binder(model, scenario.hardware), seed=seed, cost_model="analytic")


def _server(scenario: Scenario, **flags: object) -> Scenario:
    group = scenario.deployment.groups[0]
    server = msgspec.structs.replace(group.server, **flags)
    groups = [msgspec.structs.replace(group, server=server)]
    return msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(scenario.deployment, groups=groups))


def _bench(scenario: Scenario, **fields: object) -> Scenario:
    return msgspec.structs.replace(scenario, bench=msgspec.structs.replace(scenario.bench, **fields))


def _case1(prompts: int = 200) -> Scenario:
    return _bench(_load("coding-assistant-round0"), num_prompts=prompts, warmup_requests=5)


def test_case1_fp8_improves_throughput_ttft_and_itl_together() -> None:
    base = _case1()
    bf16, fp8 = _run(base), _run(_server(base, quantization="fp8", kv_cache_dtype="fp8_e5m2"))
    assert fp8.bench.output_throughput > bf16.bench.output_throughput
    assert fp8.bench.median_ttft_ms < bf16.bench.median_ttft_ms
    assert fp8.bench.median_itl_ms < bf16.bench.median_itl_ms


def test_case1_chunked_prefill_needs_mixed_chunk_to_cut_decode_stalls() -> None:
    # SGLang runs a prefill batch OR a decode batch per step (scheduler.py get_next_batch_to_run): every
    # chunk of a long prompt still stalls decoding unless --enable-mixed-chunk carries the decode batch.
    base = _server(_case1(), chunked_prefill_size=-1)
    whole = _run(base)
    chunked = _run(_server(base, chunked_prefill_size=4096))
    mixed = _run(_server(base, chunked_prefill_size=4096, enable_mixed_chunk=True))
    assert chunked.bench.max_itl_ms > 0.6 * whole.bench.max_itl_ms
    assert mixed.bench.max_itl_ms < 0.5 * whole.bench.max_itl_ms


def test_case1_eagle3_gain_falls_with_concurrency() -> None:
    base = _server(_case1(120), quantization="fp8", kv_cache_dtype="fp8_e5m2")
    spec = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5, "speculative_eagle_topk": 8,
            "speculative_num_draft_tokens": 6}
    ratios = []
    for conc in (8, 25, 128, 512):
        scenario = _bench(base, max_concurrency=conc, num_prompts=max(120, conc * 2))
        off, on = _run(scenario), _run(_server(scenario, **spec))
        ratios.append(on.bench.output_throughput / off.bench.output_throughput)
    assert ratios[1] > 1.0
    assert ratios == sorted(ratios, reverse=True)
    assert ratios[-1] < ratios[0] - 0.3


def test_case1_tp2_replicas_raise_itl_over_tp8() -> None:
    base = _server(_case1(), quantization="fp8", kv_cache_dtype="fp8_e5m2", chunked_prefill_size=4096)
    tp8 = _run(base)
    from service.domain import RouterConfig

    group = msgspec.structs.replace(base.deployment.groups[0], replicas=4,
                                    server=msgspec.structs.replace(base.deployment.groups[0].server, tp_size=2))
    tp2 = _run(msgspec.structs.replace(base, deployment=msgspec.structs.replace(
        base.deployment, groups=[group], router=RouterConfig(policy="cache_aware"))))
    assert tp2.bench.median_itl_ms > tp8.bench.median_itl_ms


def test_case3_smaller_model_and_no_speculation_raise_batch_throughput() -> None:
    base = _bench(_load("nightly-batch-round0"), num_prompts=600, warmup_requests=2)
    big = _run(base)
    small = _run(msgspec.structs.replace(base, model="Qwen/Qwen3.6-9B"))
    assert small.bench.output_throughput > 1.5 * big.bench.output_throughput
    no_spec = _run(_server(msgspec.structs.replace(base, model="Qwen/Qwen3.6-9B"), speculative_algorithm=None))
    assert no_spec.bench.output_throughput > small.bench.output_throughput


def test_case4_grammar_removes_failures_and_warming_cuts_p99_ttft() -> None:
    base = _bench(_load("structured-output-round0"), num_prompts=800, warmup_requests=1)
    prompt_only = _run(base)
    assert 0.01 < prompt_only.failure_rate < 0.08
    so = msgspec.structs.replace(base.workload.structured_output, mode="json_schema")
    constrained = msgspec.structs.replace(base, workload=msgspec.structs.replace(base.workload, structured_output=so))
    xg = _run(_server(constrained, grammar_backend="xgrammar"))
    assert xg.failure_rate == 0.0
    assert xg.bench.p99_ttft_ms > prompt_only.bench.p99_ttft_ms
    warm_so = msgspec.structs.replace(so, cache_warmed=True)
    warmed = _run(_server(msgspec.structs.replace(constrained, workload=msgspec.structs.replace(
        constrained.workload, structured_output=warm_so)), grammar_backend="xgrammar"))
    assert warmed.bench.p99_ttft_ms < xg.bench.p99_ttft_ms


def test_case4_tool_definitions_first_raise_hit_rate_and_cut_ttft() -> None:
    base = _bench(_load("structured-output-round0"), num_prompts=800, warmup_requests=1)
    after = _run(base)
    prefix = msgspec.structs.replace(base.workload.prefix, tools_position="first")
    first = _run(msgspec.structs.replace(base, workload=msgspec.structs.replace(base.workload, prefix=prefix)))
    assert first.server.cache_hit_rate > after.server.cache_hit_rate + 0.3
    assert first.bench.mean_ttft_ms < after.bench.mean_ttft_ms
