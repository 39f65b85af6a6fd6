"""The server-metric steps of the reading order tell KV shortage, scheduling, compute, cache and speculation apart."""

from __future__ import annotations

from pathlib import Path

from service.diagnosis import DiagnosisContext, context_from_scenario, diagnose
from service.domain import PrefixStructure, Scenario, WorkloadProfile
from service.scenario import load_scenario

FIXTURES = Path(__file__).parent / "fixtures"
BLOCK = (FIXTURES / "reading_order_example.txt").read_text()
QUIET_BLOCK = "Max request concurrency: 64\nConcurrency: 60.0\nMedian TTFT (ms): 300\nP99 TTFT (ms): 500\n" \
              "Output token throughput (tok/s): 5000\n"


def ids(text: str, metrics: str | None = None, profile: WorkloadProfile | None = None,
        context: DiagnosisContext | None = None) -> tuple[list[str], str | None]:
    result = diagnose(text, metrics, profile, context=context)
    return [f.id for f in result.findings], result.next_technique


def test_full_kv_pool_with_a_queue_is_a_kv_shortage() -> None:
    found, technique = ids(QUIET_BLOCK, "sglang:num_queue_reqs 12\nsglang:token_usage 0.97\n")
    assert "kv_cache_shortage" in found
    assert technique == "quantization"


def test_low_utilization_with_a_queue_is_a_scheduling_limit() -> None:
    found, technique = ids(QUIET_BLOCK, "sglang:num_queue_reqs 30\nsglang:token_usage 0.4\nsglang:utilization 0.2\n")
    assert "scheduling_limit" in found
    assert "compute_bound" not in found
    assert technique == "batch_parameters"


def test_dense_model_with_kv_headroom_and_a_queue_needs_parallelism() -> None:
    found, technique = ids(QUIET_BLOCK, "sglang_num_queue_reqs 7.4\nsglang_token_usage 0.79\n",
                           context=DiagnosisContext(model_is_moe=False))
    assert "compute_bound" in found
    assert technique == "parallelism"


def test_retractions_from_counters_or_log_lines_point_at_batch_parameters() -> None:
    found, technique = ids(QUIET_BLOCK, "sglang:num_retracted_requests_total 36\nsglang:token_usage 0.8\n")
    assert "retractions" in found and technique == "batch_parameters"
    log = (FIXTURES / "case3_preemption_log.txt").read_text()
    result = diagnose(QUIET_BLOCK, context=DiagnosisContext(server_log=log))
    retracted = next(f for f in result.findings if f.id == "retractions")
    assert retracted.evidence["preempted_requests_logged"] == 36
    assert result.next_technique == "batch_parameters"


def test_a_preempting_stall_blames_memory_not_prefill() -> None:
    log = (FIXTURES / "case3_preemption_log.txt").read_text()
    result = diagnose(BLOCK, context=DiagnosisContext(server_log=log))
    stall = next(f for f in result.findings if f.id == "itl_stall")
    assert stall.technique == "batch_parameters"
    assert "preemption" in stall.title


def test_case3_low_speculative_acceptance_turns_speculation_off() -> None:
    log = (FIXTURES / "case3_speculative_log.txt").read_text()
    result = diagnose(QUIET_BLOCK, context=DiagnosisContext(server_log=log))
    spec = next(f for f in result.findings if f.id == "speculative_accept_low")
    assert spec.evidence["accept_length"] == 2.14
    assert spec.evidence["draft_overhead_ratio"] == 0.284
    assert "of 6" in spec.title
    assert result.next_technique == "speculative_decoding"


def test_case1_acceptance_keeps_speculation() -> None:
    block = QUIET_BLOCK + "Accept length: 3.82\n"
    found, technique = ids(block, "sglang:spec_accept_rate 0.637\n")
    assert "speculative_accept_low" not in found
    assert technique is None


def test_variable_fields_at_the_front_point_at_prompt_structure() -> None:
    profile = WorkloadProfile(prefix_sharing_rate=0.67,
                              prefix=PrefixStructure(variable_tokens=40, variable_position="front"))
    found, technique = ids(QUIET_BLOCK, "sglang_cache_hit_rate 0.18\n", profile)
    assert "cache_hit_below_sharing" in found
    assert technique == "prompt_structure"


def test_round_robin_workers_point_at_router_policy() -> None:
    profile = WorkloadProfile(prefix_sharing_rate=0.81)
    context = DiagnosisContext(workers=2, router_policy="round_robin")
    found, technique = ids(QUIET_BLOCK, "sglang_cache_hit_rate 0.44\n", profile, context)
    assert technique == "router_policy"


def test_quiet_figures_call_for_no_change_and_say_what_is_missing() -> None:
    result = diagnose(QUIET_BLOCK)
    assert result.next_technique is None
    assert any(m.startswith("metrics:") for m in result.missing)
    assert any(m.startswith("slo:") for m in result.missing)


def test_context_from_the_casebook_scenario_file() -> None:
    path = Path(__file__).parents[3] / "examples" / "casebook" / "coding-assistant-final.toml"
    scenario: Scenario = load_scenario(path)
    context = context_from_scenario(scenario, failure_rate=0.0)
    assert context.workers == 4
    assert context.tp_size == 2
    assert context.model_is_moe is False
    assert context.router_policy == "cache_aware"
    assert context.slo is not None and context.slo.ttft_p95_ms == 1000


EP_SCRAPE = "\n".join([
    "# TYPE sglang:eplb_balancedness summary",
    'sglang:eplb_balancedness_count{tp_rank="0",moe_ep_rank="0",forward_mode="decode"} 400',
    'sglang:eplb_balancedness_sum{tp_rank="0",moe_ep_rank="0",forward_mode="decode"} 220',
    'sglang:eplb_balancedness_count{tp_rank="0",moe_ep_rank="0",forward_mode="extend"} 100',
    'sglang:eplb_balancedness_sum{tp_rank="0",moe_ep_rank="0",forward_mode="extend"} 55',
    "# TYPE sglang:prompt_tokens_total counter",
    'sglang:prompt_tokens_total{model_name="m"} 10000',
    "# TYPE sglang:cached_tokens_total counter",
    'sglang:cached_tokens_total{model_name="m",cache_source="device"} 3000',
    'sglang:cached_tokens_total{model_name="m",cache_source="host"} 1000',
    "sglang:cache_hit_rate 0.4",
]) + "\n"


def test_unbalanced_experts_from_the_exported_balancedness_point_at_eplb() -> None:
    result = diagnose(QUIET_BLOCK, EP_SCRAPE, None, context=DiagnosisContext(model_is_moe=True, ep_size=32))
    finding = next(f for f in result.findings if f.id == "expert_imbalance")
    # (220 + 55) / (400 + 100) = 0.55: the busiest rank carries 1.8x the average.
    assert finding.evidence["eplb_balancedness"] == 0.55 and "1.8x" in finding.title
    assert finding.technique == "moe_parallelism"
    balanced = EP_SCRAPE.replace("} 220", "} 390").replace("} 55", "} 98")
    again = diagnose(QUIET_BLOCK, balanced, None, context=DiagnosisContext(model_is_moe=True, ep_size=32))
    assert "expert_imbalance" not in [f.id for f in again.findings]


def test_cache_findings_carry_the_share_of_each_tier() -> None:
    profile = WorkloadProfile(prefix_sharing_rate=0.75)
    result = diagnose(QUIET_BLOCK, EP_SCRAPE, profile, context=DiagnosisContext(workers=1))
    finding = next((f for f in result.findings if f.id == "cache_hit_below_sharing"), None)
    assert finding is not None, [f.id for f in result.findings]
    assert finding.evidence["cached_share_device"] == 0.3 and finding.evidence["cached_share_host"] == 0.1
