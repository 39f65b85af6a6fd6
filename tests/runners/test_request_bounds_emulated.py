"""An emulated SGLang server bounds requests by its KV pool as SGLang does: the output of a prompt that nearly
fills the pool is cut to fit (`init_req_max_new_tokens`), a prompt the pool cannot hold is refused with SGLang's
message (`validate_input_length`), and `/get_server_info` reports that bound as `max_req_input_len`.

Qwen3.6-27B BF16 on one H100 at `--mem-fraction-static 0.64` keeps a pool of about 5,000 tokens.
"""

from __future__ import annotations

import asyncio

import msgspec

from plugins.runners.local import LocalRunner
from service import RoundContext, RoundResult, RoundStatus
from service.domain import Scenario, resolve_model
from service.simulator import resolve_server

from .conftest import settings, single_worker


def _scenario(input_len: int, output_len: int) -> tuple[Scenario, int]:
    base = single_worker(num_prompts=6, concurrency=2, input_len=input_len, output_len=output_len)
    group = base.deployment.groups[0]
    server = msgspec.structs.replace(group.server, mem_fraction_static=0.64)
    scenario = msgspec.structs.replace(base, deployment=msgspec.structs.replace(
        base.deployment, groups=[msgspec.structs.replace(group, server=server)]))
    pool = resolve_server(resolve_model(scenario.model), scenario.hardware, server).pool_tokens
    return scenario, pool


def _round(scenario: Scenario) -> RoundResult:
    return asyncio.run(LocalRunner().run_round(scenario, seed=0, context=RoundContext(settings=settings())))


def test_an_output_past_the_pool_is_cut_and_a_prompt_past_it_refused() -> None:
    _, pool = _scenario(100, 10)
    assert 2_000 < pool < 8_000, pool  # the premise: a pool one long prompt nearly fills
    prompt = pool - 300
    scenario, _ = _scenario(prompt, 400)
    result = _round(scenario)
    assert result.status is RoundStatus.OK and result.failure_rate == 0.0
    assert result.bench.completed == 6
    # max_req_len = pool - 1; max_new_tokens = max_req_len - prompt - 1 (the system prompt is part of the prompt).
    assert result.bench.total_output_tokens == 6 * ((pool - 1) - prompt - 1)

    scenario, _ = _scenario(pool, 20)
    refused = _round(scenario)
    assert refused.status is RoundStatus.FAILED and refused.bench.completed == 0  # every request refused
    assert refused.config_fault  # the same launch refuses the same prompts: not a failure to retry
    assert f"exceeds the maximum allowed length ({pool - 6} tokens)" in (refused.error or "")
    assert "enable --allow-auto-truncate" in (refused.error or "")


def test_a_server_context_length_is_the_window_the_emulator_refuses_by() -> None:
    scenario, _ = _scenario(1_200, 20)
    group = scenario.deployment.groups[0]
    server = msgspec.structs.replace(group.server, extra={**group.server.extra, "--context-length": 1024})
    scenario = msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(
        scenario.deployment, groups=[msgspec.structs.replace(group, server=server)]))
    refused = _round(scenario)
    assert refused.status is RoundStatus.FAILED and refused.config_fault
    assert "longer than the model's context length (1024 tokens)" in (refused.error or "")
