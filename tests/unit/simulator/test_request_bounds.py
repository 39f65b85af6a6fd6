"""A request longer than the KV pool: SGLang caps its output to fit, or refuses the prompt; it never waits forever.

SGLang sizes `max_req_len = min(context length, pool tokens) - 1` (`managers/tp_worker.py`), refuses a prompt of
`max_req_len - 5` tokens or more (`validate_input_length`) and cuts `max_new_tokens` to
`max_req_len - input - 1` (`init_req_max_new_tokens`). Qwen3.6-9B BF16 on one 24 GB L4 keeps a pool of a few
thousand tokens, so the bounds are reached with ordinary prompts.
"""

from __future__ import annotations

import msgspec

from service.domain import LengthDist, RoundStatus, Scenario, resolve_model
from service.simulator import resolve_server

from .conftest import load, run


def _on_one_l4(input_tokens: int, output_tokens: int, prompts: int = 12) -> tuple[Scenario, int]:
    base = load("coding-assistant-round0")
    group = base.deployment.groups[0]
    deployment = msgspec.structs.replace(base.deployment, groups=[
        msgspec.structs.replace(group, server=msgspec.structs.replace(group.server, tp_size=1))])
    workload = msgspec.structs.replace(
        base.workload, input=LengthDist(median=input_tokens, kind="fixed"),
        output=LengthDist(median=output_tokens, kind="fixed"), prefix_sharing_rate=0.0,
        prefix=msgspec.structs.replace(base.workload.prefix, system_prompt_tokens=0))
    scenario = msgspec.structs.replace(
        base, model="Qwen/Qwen3.6-9B", hardware=msgspec.structs.replace(base.hardware, gpu="L4", gpus_per_node=1),
        deployment=deployment, workload=workload,
        bench=msgspec.structs.replace(base.bench, num_prompts=prompts, max_concurrency=4, warmup_requests=1))
    pool = resolve_server(resolve_model(scenario.model), scenario.hardware, deployment.groups[0].server).pool_tokens
    return scenario, pool


def test_an_output_that_would_overflow_the_pool_is_cut_to_fit_and_every_request_finishes() -> None:
    probe, pool = _on_one_l4(100, 10)
    assert 1_000 < pool < 20_000, pool  # the premise: a pool a long prompt nearly fills
    prompt = pool - 300
    scenario, _ = _on_one_l4(prompt, 1_000)
    result = run(scenario)
    allowed = (pool - 1) - prompt - 1
    assert result.status is RoundStatus.OK and result.failure_rate == 0.0
    assert result.bench.completed == 12
    assert result.bench.total_output_tokens == 12 * allowed
    note = next(n for n in result.notes if "output tokens short" in n)
    assert note.startswith(f"12 of 12 requests stopped {12 * (1_000 - allowed):,} output tokens short")


def test_a_prompt_the_pool_cannot_hold_is_refused_and_counted_as_a_failure() -> None:
    _, pool = _on_one_l4(100, 10)
    scenario, _ = _on_one_l4(pool, 50)
    result = run(scenario)
    assert result.status is RoundStatus.PARTIAL
    assert result.failure_rate == 1.0 and result.bench.completed == 0
    assert result.error is not None and "refused: prompt longer than the" in result.error
    assert f"KV pool of {pool:,} tokens per instance" in result.error


def test_requests_the_scheduler_never_places_make_a_partial_round_not_a_clean_one(monkeypatch) -> None:  # noqa: ANN001
    # Without SGLang's bound a request larger than the pool waits forever: the round must say so.
    from service.simulator.worker import Worker

    monkeypatch.setattr(Worker, "refusal", lambda self, req: None)
    _, pool = _on_one_l4(100, 10)
    scenario, _ = _on_one_l4(pool - 300, 1_000)
    result = run(scenario)
    assert result.status is RoundStatus.PARTIAL
    assert result.bench.completed < 12 and result.failure_rate > 0
    assert any("requests never finished: the simulated scheduler had nothing it could run" in n for n in result.notes)


def test_a_server_context_length_below_the_pool_bounds_requests_by_the_window() -> None:
    # `--context-length 2048` on an L4 whose pool holds more: the window, not the pool, refuses a longer prompt.
    scenario, pool = _on_one_l4(2_100, 50)
    assert pool > 2_100
    group = scenario.deployment.groups[0]
    server = msgspec.structs.replace(group.server, extra={**group.server.extra, "--context-length": 2048})
    scenario = msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(
        scenario.deployment, groups=[msgspec.structs.replace(group, server=server)]))
    result = run(scenario)
    assert result.bench.completed == 0 and result.failure_rate == 1.0
    assert result.error is not None
    assert "refused: prompt longer than the 2,042 tokens SGLang admits (context length of 2,048 tokens)" in result.error


def test_a_decode_pool_smaller_than_the_prompt_refuses_it_under_pd() -> None:
    # PD on two L4s: the prefill server's pool holds the prompt, the decode server's (mem-fraction-static 0.7)
    # does not. SGLang's router sends the request to both, and the decode server's own bound refuses it.
    scenario, pool = _on_one_l4(100, 10)
    group = scenario.deployment.groups[0]
    decode_server = msgspec.structs.replace(group.server, mem_fraction_static=0.7)
    decode_pool = resolve_server(resolve_model(scenario.model), scenario.hardware, decode_server).pool_tokens
    assert decode_pool + 500 < pool, (decode_pool, pool)
    prefill = msgspec.structs.replace(group, name="prefill", role="prefill", bootstrap_port=8998)
    decode = msgspec.structs.replace(group, name="decode", role="decode", base_port=group.base_port + 10,
                                     server=decode_server)
    pd, _ = _on_one_l4(decode_pool + 100, 50)
    pd = msgspec.structs.replace(
        pd, hardware=msgspec.structs.replace(pd.hardware, gpus_per_node=2),
        deployment=msgspec.structs.replace(pd.deployment, groups=[prefill, decode]))
    result = run(pd)
    assert result.bench.completed == 0 and result.failure_rate == 1.0
    assert result.error is not None
    assert f"(KV pool of {decode_pool:,} tokens per decode instance)" in result.error
