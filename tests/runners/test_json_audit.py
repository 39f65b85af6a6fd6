"""Measured rounds audit structured outputs: invalid JSON counts in the failure rate, as the casebook's audit.

One emulated Qwen3.6-27B worker serves tool calls whose prompt names one of 5 schemas. Prompt-only, the model
gets a share of outputs wrong (here a fifth, so 48 requests show it); with the schema sent and a grammar
backend, none; with the schema sent to a server launched with `--grammar-backend none`, SGLang refuses every
request.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from plugins.runners.local import LocalRunner
from service import RoundContext, RoundResult, RoundStatus
from service.domain import Scenario, StructuredOutput

from .conftest import settings, single_worker

RATE = 0.2


def _scenario(mode: str, backend: str | None, bench_backend: str = "sglang") -> Scenario:
    base = single_worker(num_prompts=48, concurrency=8, input_len=160, output_len=24)
    structured = StructuredOutput(mode=mode, schemas=5, prompt_only_failure_rate=RATE)  # type: ignore[arg-type]
    group = base.deployment.groups[0]
    group = msgspec.structs.replace(group, server=msgspec.structs.replace(group.server, grammar_backend=backend))
    return msgspec.structs.replace(
        base, workload=msgspec.structs.replace(base.workload, structured_output=structured),
        deployment=msgspec.structs.replace(base.deployment, groups=[group]),
        bench=msgspec.structs.replace(base.bench, backend=bench_backend))


def _round(scenario: Scenario) -> RoundResult:
    return asyncio.run(LocalRunner().run_round(scenario, seed=0, context=RoundContext(settings=settings())))


def test_prompt_only_outputs_fail_their_schema_at_the_models_rate() -> None:
    result = _round(_scenario("prompt_only", None))
    assert result.status is RoundStatus.OK  # every request completed: the failures are in the JSON, not HTTP
    assert result.bench.completed == 48
    assert 0.05 < result.failure_rate < 0.45  # 20% of 48 outputs, binomial: 9.6 expected
    note = next(n for n in result.notes if n.startswith("JSON audit"))
    assert "of outputs invalid" in note
    assert any(kind in note for kind in ("parse", "enum", "required", "type"))


@pytest.mark.parametrize("bench_backend", ["sglang", "sglang-oai", "sglang-oai-chat"])
def test_constrained_outputs_follow_their_schema(bench_backend: str) -> None:
    result = _round(_scenario("json_schema", "xgrammar", bench_backend))
    assert result.status is RoundStatus.OK
    assert result.bench.completed == 48
    assert result.failure_rate == 0.0
    assert any(n.startswith("JSON audit: every completed output followed its schema") for n in result.notes)


def test_schemas_sent_to_a_server_without_a_grammar_backend_are_refused() -> None:
    result = _round(_scenario("json_schema", "none"))
    assert result.status is RoundStatus.FAILED
    assert "not supported when the server is launched with --grammar-backend none" in (result.error or "")


def test_the_same_prompt_fails_the_same_way_in_every_round() -> None:
    first, second = _round(_scenario("prompt_only", None)), _round(_scenario("prompt_only", None))
    assert first.failure_rate == second.failure_rate > 0


def test_warming_the_grammar_cache_removes_the_compile_stalls_from_ttft() -> None:
    cold = _scenario("json_schema", "xgrammar")
    so = msgspec.structs.replace(cold.workload.structured_output, cache_warmed=True)
    warmed = msgspec.structs.replace(cold, workload=msgspec.structs.replace(cold.workload, structured_output=so))
    first, second = _round(cold), _round(warmed)
    assert first.failure_rate == second.failure_rate == 0.0
    # Five schemas of 40-400 ms each compile during the cold round's first requests; warmed, none do.
    assert first.bench.p99_ttft_ms > second.bench.p99_ttft_ms + 50.0
    unconstrained = _round(_scenario("prompt_only", None))
    assert second.bench.p99_ttft_ms < unconstrained.bench.p99_ttft_ms * 1.3 + 10.0  # as if there were no grammar
