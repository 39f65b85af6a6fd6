"""The casebook's five starting points as Python scenarios, for technique rule tests (no simulator needed)."""

from __future__ import annotations

from service import (
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
    StructuredOutput,
    TuningContext,
    WorkerGroup,
    WorkloadProfile,
    resolve_model,
)


def _one(model: str, **server: object) -> Deployment:
    return Deployment(groups=[WorkerGroup(server=ServerConfig(model_path=model, **server))])


def coding_assistant() -> Scenario:
    model = "Qwen/Qwen3.6-27B"
    return Scenario(
        name="case1", model=model, hardware=Hardware(gpu="H200-SXM"), deployment=_one(model, tp_size=8),
        workload=WorkloadProfile(input=LengthDist(median=2100, p95=28000), output=LengthDist(median=400, p95=1800),
                                 prefix=PrefixStructure(system_prompt_tokens=3000), prefix_sharing_rate=0.35,
                                 peak_concurrency=25),
        slo=SLO(ttft_p95_ms=1000, itl_median_ms=50), bench=BenchSpec(max_concurrency=25))


def document_qa() -> Scenario:
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
    model = "deepseek-ai/DeepSeek-V4-Flash"
    return Scenario(
        name="case5", model=model, hardware=Hardware(gpu="H200-SXM", nodes=16, interconnect="ib-ndr"),
        deployment=Deployment(groups=[WorkerGroup(replicas=16, server=ServerConfig(
            model_path=model, tp_size=8, quantization="fp8", kv_cache_dtype="fp8_e5m2", chunked_prefill_size=8192,
            mem_fraction_static=0.88))], router=RouterConfig(policy="cache_aware", port=8000)),
        workload=WorkloadProfile(input=LengthDist(median=3000), output=LengthDist(median=800), peak_concurrency=1400),
        slo=SLO(ttft_p95_ms=3000, itl_median_ms=60), objective=Objective(kind="cost"),
        bench=BenchSpec(max_concurrency=1400))


CASES = {"coding-assistant": coding_assistant, "document-qa-rag": document_qa, "nightly-batch": nightly_batch,
         "structured-output": structured_output, "moe-at-scale": moe_at_scale}


def context(name: str, scenario: Scenario | None = None, **options: object) -> TuningContext:
    scen = scenario or CASES[name]()
    return TuningContext(scenario=scen, model=resolve_model(scen.model), options=dict(options))
