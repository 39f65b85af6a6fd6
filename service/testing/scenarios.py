"""Scenarios built in code for the contract suites: the casebook's five starting points, case 1's final
configuration, a one-worker round small enough for a real runner, and a deployment no runner can start.

Nothing here reads a file, so the suites run the same from a wheel as from a checkout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.components import TuningContext
from service.domain import (
    SLO,
    BenchSpec,
    Deployment,
    DocumentSet,
    Hardware,
    LengthDist,
    Objective,
    PrefixStructure,
    QualityResult,
    RouterConfig,
    Scenario,
    ServerConfig,
    SpeculativeBehaviour,
    StructuredOutput,
    WorkerGroup,
    WorkloadProfile,
    resolve_model,
)

__all__ = ["CASES", "casebook_context", "casebook_scenario", "one_worker", "unstartable"]


def _one(model: str, **server: Any) -> Deployment:
    return Deployment(groups=[WorkerGroup(server=ServerConfig(model_path=model, **server))])


def coding_assistant() -> Scenario:
    """Case 1, round 0: Qwen3.6-27B on TP8 of one 8xH200 node, 25 concurrent streams, a latency SLO."""
    model = "Qwen/Qwen3.6-27B"
    return Scenario(
        name="case1", model=model, hardware=Hardware(gpu="H200-SXM"), deployment=_one(model, tp_size=8),
        workload=WorkloadProfile(input=LengthDist(median=2100, p95=28000), output=LengthDist(median=400, p95=1800),
                                 prefix=PrefixStructure(system_prompt_tokens=3000), prefix_sharing_rate=0.35,
                                 peak_concurrency=25),
        slo=SLO(ttft_p95_ms=1000, itl_median_ms=50), bench=BenchSpec(max_concurrency=25))


def coding_assistant_final() -> Scenario:
    """Case 1, final (round 4): four TP2 workers with chunked prefill 4096, FP8 and EAGLE3 behind a router."""
    model = "Qwen/Qwen3.6-27B"
    server = ServerConfig(tp_size=2, chunked_prefill_size=4096, quantization="fp8", kv_cache_dtype="fp8_e5m2",
                          mem_fraction_static=0.90, speculative_algorithm="EAGLE3",
                          speculative_draft_model_path=f"{model}-eagle3", speculative_num_steps=5,
                          speculative_eagle_topk=8, speculative_num_draft_tokens=6, enable_metrics=True)
    return Scenario(
        name="coding-assistant-final", model=model, sglang_version="0.5.23",
        description="In-house coding assistant: 200 engineers, peak 25 concurrent streaming requests",
        hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=1),
        deployment=Deployment(groups=[WorkerGroup(name="worker", replicas=4, base_port=30001, server=server)],
                              router=RouterConfig(policy="cache_aware", host="127.0.0.1", port=30000)),
        workload=WorkloadProfile(name="coding-assistant", input=LengthDist(median=2100, p95=28000),
                                 output=LengthDist(median=400, p95=1800), prefix_sharing_rate=0.35,
                                 peak_concurrency=25, prefix=PrefixStructure(system_prompt_tokens=3000),
                                 speculative=SpeculativeBehaviour(draft_acceptance=0.78)),
        slo=SLO(ttft_p95_ms=1000, itl_median_ms=50), objective=Objective(kind="latency"),
        bench=BenchSpec(dataset="workload", num_prompts=500, max_concurrency=25, warmup_requests=30))


def document_qa() -> Scenario:
    """Case 2: document Q&A on TP4 FP8 of a 4xH100 node, 20k-token documents under a shared prefix."""
    model = "Qwen/Qwen3.6-27B"
    return Scenario(
        name="case2", model=model, hardware=Hardware(gpu="H100-SXM", gpus_per_node=4),
        deployment=_one(model, tp_size=4, quantization="fp8", kv_cache_dtype="fp8_e5m2", chunked_prefill_size=8192),
        workload=WorkloadProfile(
            input=LengthDist(median=20530, p95=24800), output=LengthDist(median=300, p95=620),
            prefix=PrefixStructure(system_prompt_tokens=500, variable_tokens=30, variable_position="front",
                                   documents=DocumentSet(count=1000, tokens=20000, popular=50, popular_share=0.8)),
            prefix_sharing_rate=0.81, peak_concurrency=22),
        slo=SLO(ttft_p95_ms=1500), bench=BenchSpec(max_concurrency=22))


def nightly_batch() -> Scenario:
    """Case 3: a nightly batch with a deadline on TP2 of a 2xH100 node, EAGLE3 already on."""
    model = "Qwen/Qwen3.6-27B"
    return Scenario(
        name="case3", model=model, hardware=Hardware(gpu="H100-SXM", gpus_per_node=2),
        deployment=_one(model, tp_size=2, quantization="fp8", kv_cache_dtype="fp8_e5m2", chunked_prefill_size=4096,
                        speculative_algorithm="EAGLE3", speculative_draft_model_path=f"{model}-eagle3",
                        speculative_num_steps=5, speculative_eagle_topk=8, mem_fraction_static=0.90),
        workload=WorkloadProfile(input=LengthDist(median=1200), output=LengthDist(median=150), peak_concurrency=256),
        slo=SLO(deadline_hours=12, deadline_output_tokens=3.6e8), objective=Objective(kind="deadline"),
        bench=BenchSpec(max_concurrency=256),
        quality=[QualityResult(subject="Qwen/Qwen3.6-27B", metrics={"accuracy": 0.941, "rouge_l": 0.412}),
                 QualityResult(subject="Qwen/Qwen3.6-9B", metrics={"accuracy": 0.933, "rouge_l": 0.398})])


def structured_output() -> Scenario:
    """Case 4: tool calls with prompt-only JSON on a MoE model, TP2 of a 2xH100 node, zero failures allowed."""
    model = "Qwen/Qwen3.6-35B-A3B"
    return Scenario(
        name="case4", model=model, hardware=Hardware(gpu="H100-SXM", gpus_per_node=2),
        deployment=_one(model, tp_size=2, quantization="fp8", kv_cache_dtype="fp8_e5m2", chunked_prefill_size=8192),
        workload=WorkloadProfile(
            input=LengthDist(median=1800), output=LengthDist(median=120),
            prefix=PrefixStructure(tool_definition_tokens=1200, history_tokens=600, tools_position="after_history"),
            prefix_sharing_rate=0.67, peak_concurrency=40,
            structured_output=StructuredOutput(mode="prompt_only", schemas=17)),
        slo=SLO(ttft_p95_ms=800, failure_rate_max=0.0), objective=Objective(kind="failure_rate"),
        bench=BenchSpec(max_concurrency=40))


def moe_at_scale() -> Scenario:
    """Case 5: DeepSeek-V4-Flash on sixteen TP8 H200 nodes behind a router, 1400 concurrent, cost objective."""
    model = "deepseek-ai/DeepSeek-V4-Flash"
    return Scenario(
        name="case5", model=model, hardware=Hardware(gpu="H200-SXM", nodes=16, interconnect="ib-ndr"),
        deployment=Deployment(groups=[WorkerGroup(replicas=16, server=ServerConfig(
            model_path=model, tp_size=8, quantization="fp8", kv_cache_dtype="fp8_e5m2", chunked_prefill_size=8192,
            mem_fraction_static=0.88))], router=RouterConfig(policy="cache_aware", port=8000)),
        workload=WorkloadProfile(input=LengthDist(median=3000), output=LengthDist(median=800), peak_concurrency=1400),
        slo=SLO(ttft_p95_ms=3000, itl_median_ms=60), objective=Objective(kind="cost"),
        bench=BenchSpec(max_concurrency=1400))


# The casebook's five starting points, by the name of the playbook that tunes each.
CASES: dict[str, Callable[[], Scenario]] = {
    "coding-assistant": coding_assistant, "document-qa-rag": document_qa, "nightly-batch": nightly_batch,
    "structured-output": structured_output, "moe-at-scale": moe_at_scale,
}
_NAMED = {**CASES, "coding-assistant-final": coding_assistant_final}


def casebook_scenario(name: str = "coding-assistant-final") -> Scenario:
    """One of the casebook's scenarios: a starting point (a key of `CASES`) or `coding-assistant-final`."""
    if name not in _NAMED:
        raise KeyError(f"unknown casebook scenario {name!r} (known: {', '.join(sorted(_NAMED))})")
    return _NAMED[name]()


def casebook_context(name: str = "coding-assistant-final", scenario: Scenario | None = None,
                     **options: object) -> TuningContext:
    """A tuning context on a casebook scenario (or on `scenario`), with per-technique `options`."""
    scen = scenario or casebook_scenario(name)
    return TuningContext(scenario=scen, model=resolve_model(scen.model), options=dict(options))


def one_worker(num_prompts: int = 16, concurrency: int = 4) -> Scenario:
    """One TP1 Qwen3.6-27B worker on an H100, no router, a short fixed-length load: seconds on any runner."""
    model = "Qwen/Qwen3.6-27B"
    server = ServerConfig(tp_size=1, enable_metrics=True, enable_cache_report=True)
    return Scenario(
        name="one-worker", model=model, sglang_version="0.5.23", hardware=Hardware(gpu="H100-SXM"),
        description="One TP1 replica on a short shared-prefix load",
        deployment=Deployment(groups=[WorkerGroup(name="worker", replicas=1, base_port=31000, server=server)]),
        workload=WorkloadProfile(name="short", input=LengthDist(median=200, kind="fixed"),
                                 output=LengthDist(median=32, kind="fixed"),
                                 prefix=PrefixStructure(system_prompt_tokens=64)),
        bench=BenchSpec(num_prompts=num_prompts, max_concurrency=concurrency, warmup_requests=1))


def unstartable() -> Scenario:
    """`one_worker` on a 48 GB L40S in BF16: 50 GiB of Qwen3.6-27B weights cannot fit, so no server starts."""
    base = one_worker()
    group = base.deployment.groups[0]
    return Scenario(
        name="weights-do-not-fit", model=base.model, sglang_version=base.sglang_version,
        hardware=Hardware(gpu="L40S"), workload=base.workload, bench=base.bench,
        deployment=Deployment(groups=[WorkerGroup(name=group.name, replicas=1, base_port=group.base_port,
                                                  server=group.server)]))
