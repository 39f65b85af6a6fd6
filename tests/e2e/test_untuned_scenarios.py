"""Scenarios the casebook never tuned: other models, GPUs, concurrencies, starting deployments, backends, bad
inputs. Each test asserts what an engineer who knows the casebook expects, and the comment says which rule.

Every job runs on the simulated runner with the casebook policy at seed 0, two repeats a round and a few
hundred prompts, once per process (tests/e2e/untuned.py memoises them). Where the product decides what the
casebook rejects, the test keeps the casebook's expectation and is marked xfail(strict=True) with the
figures, so fixing the engine turns it into a failure that asks for the mark to go.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from service import JobState, check_scenario
from service.engine import TuningOutcome
from service.sglang import errors
from tests.e2e.untuned import (
    A100_CHAT,
    BF16_27B,
    FP8_CHECKED,
    GLM_AIR_H100_COST,
    HOST,
    KEPT,
    L40S_TP4,
    MOE_ONE_NODE,
    NEAR_THRESHOLD,
    NEEDS_SIMULATED_CASEBOOK,
    NIGHTLY_MISS,
    NO_FIT,
    NO_START,
    OUTLINES,
    RAG_FRONT,
    ROUND_ROBIN,
    STARVED_9B,
    TIGHT_TTFT,
    UNMEETABLE,
    auto,
    build,
    chat_9b,
    coding_90,
    final_server,
    job,
    playbook,
    rounds,
    scenario_data,
    skipped,
    to_toml,
)

pytestmark = NEEDS_SIMULATED_CASEBOOK
CLI = str(Path(sys.executable).with_name("sglang-tuner"))


# -- 1. a small dense model on A100s at low concurrency --------------------------------------------------------

def test_small_dense_model_at_low_concurrency_keeps_eagle3_and_the_measured_tp() -> None:
    outcome = job("a100-chat", auto(), build(A100_CHAT))
    assert outcome.report.job.state == "succeeded"
    # Casebook case 1 round 3: 8 streams against an A100 threshold batch of 153 is the memory-bound region,
    # where spare compute verifies drafted tokens; EAGLE3 is kept and stays in the final deployment.
    eagle = rounds(outcome, "speculative_decoding")[0]
    assert eagle.verdict in KEPT and eagle.figures["output_throughput.change"] > 0.3
    assert final_server(outcome).speculative_algorithm == "EAGLE3"
    # Case 1 round 4 ("this trade-off varies by case, so it must be verified with actual measurements") and
    # the pattern table's "throughput down, latency up: wrong direction, rollback immediately": the TP2 x 2
    # split measured lower throughput and higher TTFT than TP4, so TP4 stays.
    split = rounds(outcome, "parallelism")[0]
    assert split.figures["output_throughput.change"] < 0 and split.figures["median_ttft_ms.change"] > 0
    assert split.verdict == "rollback" and "wrong direction" in split.reasons[0]
    assert final_server(outcome).tp_size == 4 and outcome.report.final.deployment.groups[0].replicas == 1
    # The router technique's candidate is the same TP2 x 2 + cache_aware split: it is not run again, nor shown
    # as a second round of the same deployment.
    assert not rounds(outcome, "router_policy")
    assert f"already measured {split.delta.summary}" in skipped(outcome, "router_policy")
    # Five-case comparison, GPU scale: below 16 GPUs PD disaggregation is detrimental and is not tried.
    assert not rounds(outcome, "pd_disaggregation") and "16-GPU" in skipped(outcome, "pd_disaggregation")


# -- 2. FP8 where decode is memory-bound, on GPUs with and without FP8 tensor cores ----------------------------

def test_fp8_with_a_passing_quality_result_is_kept_on_h100_in_the_memory_bound_region() -> None:
    outcome = job("h100-chat-fp8", playbook("fp8", "quantization", require_quality_for=["quantization"]),
                  build(chat_9b("H100-SXM"), quality=FP8_CHECKED))
    # Casebook case 1 round 2: at low concurrency FP8 halves the weight bytes every decode step reads, so
    # throughput and every latency improve together ("all metrics improved"); the quality check passed.
    fp8 = rounds(outcome, "quantization")[0]
    assert fp8.verdict == "accept" and fp8.pattern == "throughput_up_latency_down"
    assert final_server(outcome).quantization == "fp8"


def test_fp8_with_a_passing_quality_result_is_tried_on_a100_in_the_memory_bound_region() -> None:
    bf16 = job("a100-chat-bf16", playbook("baseline", "grammar"), build(chat_9b("A100-80GB")))
    fp8_start = job("a100-chat-fp8-start", playbook("baseline", "grammar"),
                    build(chat_9b("A100-80GB", quantization="fp8", **{"kv-cache-dtype": "fp8_e5m2"})))
    faster = fp8_start.report.rounds[0].result.bench.output_throughput
    assert faster > 1.3 * bf16.report.rounds[0].result.bench.output_throughput  # the physics the rule cites
    outcome = job("a100-chat-fp8", playbook("fp8", "quantization", require_quality_for=["quantization"]),
                  build(chat_9b("A100-80GB"), quality=FP8_CHECKED))
    # Casebook case 1 round 2: "this region is memory-bound... halving the bytes read at each decode step":
    # the gain comes from bandwidth, which weight-only FP8 on A100 saves as well.
    fp8 = rounds(outcome, "quantization")
    assert fp8 and fp8[0].verdict == "accept"
    assert final_server(outcome).quantization == "fp8"


# -- 3. speculative decoding near the threshold batch -----------------------------------------------------------

def test_eagle3_already_on_near_the_threshold_batch_is_removed() -> None:
    outcome = job("near-threshold-on", playbook("spec", "speculative_decoding"), build(NEAR_THRESHOLD))
    removal = rounds(outcome, "speculative_decoding")[0]
    # Casebook case 3 round 2 and the five-case table ("Concurrency ~ threshold batch: transition zone,
    # speculative decoding detrimental"): about 200 running requests against the H100's 295 is past the
    # break-even, so the technique proposes removing it and the measured gain keeps the removal.
    assert removal.delta.set_server["speculative_algorithm"] is None
    assert "threshold batch 295" in removal.delta.summary
    assert removal.verdict in KEPT and removal.figures["output_throughput.change"] > 0.1
    assert final_server(outcome).speculative_algorithm is None


def test_eagle3_is_not_added_within_30_percent_of_the_threshold_batch() -> None:
    off = build(NEAR_THRESHOLD, deployment={"groups": [{**NEAR_THRESHOLD["deployment"]["groups"][0], "server": {
        "tp-size": 2, "enable-metrics": True, "quantization": "fp8", "kv-cache-dtype": "fp8_e5m2"}}]})
    outcome = job("near-threshold-off", playbook("spec", "speculative_decoding"), off)
    # Same rule, from the other side: about 227 measured per instance against 295 is within 30% of the
    # threshold batch, so no GPU time is spent on a draft that would steal compute from real work.
    assert not rounds(outcome, "speculative_decoding")
    assert "within 30% of the threshold batch" in skipped(outcome, "speculative_decoding")
    assert final_server(outcome).speculative_algorithm is None


# -- 4. a server already on outlines with dynamic schemas ----------------------------------------------------------

def test_outlines_with_dynamic_schemas_is_replaced_by_a_dynamic_capable_backend() -> None:
    outcome = job("outlines-dynamic", playbook("grammar", "grammar", "speculative_decoding"), build(OUTLINES))
    swap = rounds(outcome, "grammar")[0]
    # Casebook case 4 backend table: outlines compiles a complex schema for 40 s to 10 min; "if dynamic
    # schemas are present, xgrammar or llguidance are the choices". The existing backend is replaced, and
    # the TTFT target the outlines baseline missed by minutes is met.
    assert swap.delta.set_server == {"grammar_backend": "llguidance"}
    assert outcome.report.rounds[0].result.bench.p95_ttft_ms > 60_000
    assert swap.verdict == "accept" and "meets an SLO the baseline missed" in swap.reasons[0]
    assert final_server(outcome).grammar_backend == "llguidance"
    assert outcome.report.job.state == "succeeded"


# -- 5. replicas behind round_robin with shared conversation prefixes ----------------------------------------------

def test_round_robin_replicas_with_shared_prefixes_move_to_cache_aware() -> None:
    outcome = job("round-robin-support", playbook("router", "router_policy"), build(ROUND_ROBIN))
    change = rounds(outcome, "router_policy")[0]
    # Casebook case 2 round 1 and lessons learned: "routing policy becomes part of the caching strategy";
    # round-robin scatters each conversation over four workers, cache_aware sends a prefix where it is cached.
    assert change.delta.router.policy == "cache_aware"
    assert change.result.server.cache_hit_rate > outcome.report.rounds[0].result.server.cache_hit_rate + 0.1
    assert change.verdict == "accept"
    assert outcome.report.final.deployment.router.policy == "cache_aware"


# -- 6. RAG with the variable field in front, starting from round_robin replicas -----------------------------------

def test_prompt_structure_is_examined_before_routing_and_hicache() -> None:
    outcome = job("rag-front", auto(), build(RAG_FRONT))
    order = [r.technique for r in outcome.report.rounds]
    # Casebook case 2 round 2: "the prompt structure must be reviewed before serving optimization": with a
    # hit rate of 0 against a sharing rate of 0.85 the prompt is examined before the router and HiCache.
    assert outcome.report.rounds[0].result.server.cache_hit_rate < 0.1
    assert order.index("prompt_structure") < order.index("router_policy") < order.index("hicache")


def test_rag_with_front_fields_ends_with_the_prompt_fixed_and_cache_aware_routing() -> None:
    outcome = job("rag-front", auto(), build(RAG_FRONT))
    # Casebook case 2: moving variable values to the end is what lets the cache work at all, and "for
    # workloads with high prefix sharing, round-robin is a configuration that nullifies the cache".
    reorder = rounds(outcome, "prompt_structure")[0]
    assert reorder.verdict == "accept"
    assert outcome.final.workload.prefix.variable_position == "back"
    assert outcome.report.final.deployment.router.policy == "cache_aware"


# -- 7. FP8 without a quality result -------------------------------------------------------------------------------

def test_fp8_without_a_quality_result_is_gated_under_auto() -> None:
    outcome = job("fp8-unchecked-auto", auto(), build(BF16_27B))
    fp8 = rounds(outcome, "quantization")[0]
    # Casebook case 1 round 2: "quality verification must be done concurrently"; auto requires a quality
    # result for quantization, so FP8 is refused with the reason and spends no GPU time.
    assert fp8.verdict == "rollback" and fp8.repeats == 0 and fp8.result is None
    assert "no quality result" in fp8.reasons[0]
    assert final_server(outcome).quantization is None


def test_fp8_kept_without_a_quality_result_is_flagged_in_the_headline() -> None:
    outcome = job("fp8-unchecked-ungated", playbook("fp8", "quantization"), build(BF16_27B))
    # Same rule when the playbook does not gate it: the measured gain keeps FP8, and the report's first lines
    # say it must not be adopted before a quality check on the task's own cases.
    assert rounds(outcome, "quantization")[0].verdict == "accept"
    assert final_server(outcome).quantization == "fp8"
    assert any("adopt only after a quality check" in line for line in outcome.report.headline[:4])


# -- 8. a rate no configuration on the given GPUs can reach ---------------------------------------------------------

def test_an_unreachable_throughput_target_ends_slo_not_met_with_the_gpus_it_needs() -> None:
    outcome = job("unmeetable", playbook("spec", "speculative_decoding"), build(UNMEETABLE))
    report = outcome.report
    # Casebook capacity calculation (required throughput / measured per-GPU rate), as case 2 ends: "peak 22
    # req/s is not met by 12.81 req/s, so adding another node ... is needed". Not a success.
    assert report.job.state == JobState.SLO_NOT_MET.value and not report.slo.met
    assert "does NOT meet" in " ".join(report.headline[:3])
    reached = next(c for c in report.slo.checks if c.name == "min_output_throughput").actual
    needed = math.ceil(2 * 50000 / reached)
    assert any(f"about {needed} GPUs" in line for line in report.capacity), report.capacity


# -- 9. a starting deployment that cannot be measured ------------------------------------------------------------

def test_a_baseline_that_cannot_start_fails_the_job_with_the_error_and_no_final_deployment() -> None:
    outcome = job("no-start", playbook("spec", "speculative_decoding"), build(NO_START))
    report = outcome.report
    # Casebook case 3 round 3: mem-fraction-static past what the activations leave room for fails at start
    # ("0.94 is the upper limit"); nothing can be tuned from a server that never starts, and no candidate is run.
    # Out of memory at start is the configuration's fault: a second launch fails the same way, so there is none.
    assert report.job.state == JobState.FAILED.value
    assert report.job.stop_reason.startswith("the starting deployment cannot start: ")
    assert "CUDA out of memory" in report.job.stop_reason and "not launched again" in report.job.stop_reason
    assert report.final is None
    assert [r.technique for r in report.rounds] == ["baseline"]


def test_a_failed_job_claims_no_slo_standing() -> None:
    outcome = job("no-start", playbook("spec", "speculative_decoding"), build(NO_START))
    # Honest endings: only measured figures meet a target; a job that measured nothing met none.
    assert outcome.report.slo is None or not outcome.report.slo.met


# -- 10. casebook case 1's traffic at 90 streams: B200 against H200 ----------------------------------------------

def test_on_b200_eagle3_pays_at_90_streams() -> None:
    outcome = job("coding-90-b200", playbook("spec", "speculative_decoding"), build(coding_90("B200")))
    # Five-case comparison, "concurrency vs threshold batch": the threshold is peak FLOP/s over bandwidth,
    # 281 on B200; about 71 running requests is well below it, so EAGLE3 is tried and its gain kept.
    eagle = rounds(outcome, "speculative_decoding")[0]
    assert eagle.verdict in KEPT and eagle.figures["output_throughput.change"] > 0.2
    assert final_server(outcome).speculative_algorithm == "EAGLE3"


def test_on_h200_eagle3_is_tried_at_90_streams() -> None:
    outcome = job("coding-90-h200", playbook("spec", "speculative_decoding"), build(coding_90("H200-SXM")))
    # Casebook case 1 round 3 break-even table (H200): 2.22x at 8, 1.67x at 25, 1.28x at 64, 0.97x at 128.
    assert rounds(outcome, "speculative_decoding"), skipped(outcome, "speculative_decoding")


# -- 11. a nightly batch that misses its deadline -----------------------------------------------------------------

def test_a_missed_nightly_deadline_ends_slo_not_met_with_hours_and_gpus() -> None:
    outcome = job("nightly-miss", auto(), build(NIGHTLY_MISS))
    report = outcome.report
    # Casebook case 3: with no latency SLO "the optimizations done in Case 1 are entirely unnecessary and even
    # counterproductive": no smaller prefill chunk, and no draft model at a batch past the threshold.
    assert not rounds(outcome, "chunked_prefill") and "latency SLO" in skipped(outcome, "chunked_prefill")
    assert not rounds(outcome, "speculative_decoding")
    assert "threshold batch" in skipped(outcome, "speculative_decoding")
    # Case 1 round 4 ("reducing TP and increasing replicas is advantageous" when nothing holds latency): 9 GB
    # of FP8 weights take 11% of an H100, so the two GPUs are tried as two TP1 replicas, measured faster, kept.
    split = rounds(outcome, "parallelism")[0]
    assert split.delta.summary.startswith("TP1 x 2") and split.verdict in KEPT
    assert split.figures["output_throughput.change"] > 0
    # Casebook case 3 round 3: without a latency SLO the batch is maximised. The casebook's bundle was sized
    # for TP2: on one GPU a 32,768-token chunk needs more activation memory than mem-fraction-static 0.94
    # leaves, so the bundle takes the largest chunk that starts (16,384), runs, and is kept for bringing the
    # missed deadline closer; no round is spent on a server that cannot start, nor on the bundle's parts.
    batch = rounds(outcome, "batch_parameters")
    raised = batch[0]
    assert raised.delta.set_server["chunked_prefill_size"] == 16384 and "32768 would not start" in raised.delta.summary
    assert raised.verdict == "accept" and "brings the missed target closer" in raised.reasons[0]
    assert not [r for r in batch if r.delta.summary.endswith(" alone")]
    assert len([r for r in batch if "batch max" in r.delta.summary]) == 1  # maximised once, not again later
    # mem-fraction-static 0.96 (case 3: "0.94 is the upper limit") fails and is never accepted.
    assert all(r.verdict != "accept" for r in batch if r.delta.set_server == {"mem_fraction_static": 0.96})
    assert (final_server(outcome).mem_fraction_static or 0) <= 0.94
    # Case 3's required-throughput calculation: the 8 h window is missed, so the job says by how many hours
    # and what capacity would meet it, instead of "succeeded".
    assert report.job.state == JobState.SLO_NOT_MET.value
    deadline = next(c for c in report.slo.checks if c.name == "deadline_hours")
    assert deadline.actual > 8 and not deadline.met
    assert any(line.startswith("deadline_hours:") and "GPUs" in line for line in report.capacity)


# -- 12. an MoE on a single node ---------------------------------------------------------------------------

def test_an_moe_on_one_node_is_tuned_as_a_single_node_without_ep_or_pd() -> None:
    outcome = job("moe-one-node", auto(), build(MOE_ONE_NODE))
    # Five-case comparison, GPU scale: "< 16: single node tuning, PD disaggregation detrimental"; case 5's
    # lesson: "PD disaggregation is conditional on scale ... if a configuration like 8 GPUs were used, both
    # pools would be inefficient". Neither EP nor PD is tried on 8 GPUs.
    for technique in ("moe_parallelism", "pd_disaggregation"):
        assert not rounds(outcome, technique) and "16-GPU" in skipped(outcome, technique)
    final = outcome.report.final.deployment
    assert not final.is_pd and all(g.server.ep_size == 1 for g in final.groups)
    # Case 1 round 4: the TP8 instance is re-cut into replicas where that measures better. At 64 closed-loop
    # streams each replica holds a few of them at a longer ITL, so every split loses throughput against TP8
    # (TP1 x 8 about -12%, before and after NEXTN) and is rolled back on that measurement. Every FP8 step of the
    # job stands on one cost basis: aiconfigurator-core has FP8 rows for TP1-TP4 but not for MoE TP8, whose
    # steps are the BF16 rows scaled by the roofline's FP8 ratio, not roofline answers (docs/cost-models.md).
    split = rounds(outcome, "parallelism")
    assert split and all(r.verdict == "rollback" and r.figures["output_throughput.change"] < 0 for r in split)
    # Under the cost objective, with every target met, the replicas are then halved while the SLO holds: each
    # step kept costs less per 1M output tokens, and the job ends on fewer than the node's 8 GPUs.
    sized = [r for r in rounds(outcome, "right_sizing") if r.verdict in KEPT]
    costs = [r.result.cost_per_1m_output_tokens for r in sized]
    assert sized and all(c is not None for c in costs) and costs == sorted(costs, reverse=True)
    assert all("cost per 1M output tokens -" in r.reasons[0] for r in sized)
    assert final.total_gpus() < 8 and outcome.report.slo.met
    assert outcome.report.job.state == "succeeded"


# -- 16. TP4 over PCIe for throughput, then EAGLE3 --------------------------------------------------------------

def test_a_throughput_job_buys_no_unneeded_tail_and_recuts_tp_once_eagle3_is_on() -> None:
    outcome = job("l40s-tp4", auto(), build(L40S_TP4))
    first, *again = rounds(outcome, "parallelism")
    # At 64 streams the TP4 instance out-serves TP2 x 2 (its weights read by four GPUs a step): the split costs
    # throughput for a TTFT tail the baseline already meets with room to spare. "Maintain if a latency SLO
    # exists" buys the tail the SLO needs; the throughput objective does not pay for more.
    assert first.figures["output_throughput.change"] < -0.05 and first.figures["p99_ttft_ms.change"] < -0.2
    assert first.figures["slo.ttft_p95_ms.baseline_met"] == 1.0
    assert first.verdict == "rollback" and "the throughput objective comes first" in first.reasons[0]
    # EAGLE3 multiplies the tokens of each step, and with them the all-reduce TP4 pays over PCIe: once it is
    # kept, TP against replicas is judged again on the new deployment (case 1 splits TP8 after EAGLE3), and
    # the split now wins on throughput and every latency. On PCIe GPUs the kept TP2 x 2 is split once more where
    # the 9B's KV fits (TP1, 37% of an L40S): measured, and rolled back.
    eagle = rounds(outcome, "speculative_decoding")[0]
    resplit, further = again
    assert eagle.verdict in KEPT and eagle.index < resplit.index < further.index
    assert resplit.delta.deployment.groups[0].server.speculative_algorithm == "EAGLE3"
    assert resplit.delta.summary.startswith("TP2 x 2")
    assert resplit.verdict in KEPT and resplit.figures["output_throughput.change"] > 0.1
    assert further.delta.summary.startswith("TP1 x 4") and further.verdict == "rollback"
    final = outcome.report.final.deployment
    assert final.groups[0].replicas == 2 and final.groups[0].server.tp_size == 2
    assert final.groups[0].server.speculative_algorithm == "EAGLE3"
    assert outcome.report.slo.met and outcome.report.job.state == "succeeded"


# -- 13. bad inputs refused before any round -----------------------------------------------------------------------

BAD = {
    # One server cannot span more GPUs than one 8-GPU node holds.
    "tp16-moe-one-node": (scenario_data("moe-tp16", model="Qwen/Qwen3.6-35B-A3B", gpu="H200-SXM", gpus=8, tp=16,
                                        workload={"peak_concurrency": 40}), {}, "deployment.groups[0].server.tp-size"),
    # --cuda-graph-max-bs-decode appeared in SGLang 0.5.15; a 0.5.9 server would exit on it.
    "flag-newer-than-the-version": (scenario_data("old-sglang", model="Qwen/Qwen3.6-9B", gpu="A100-80GB", gpus=2, tp=2,
                                                  server={"extra": {"--cuda-graph-max-bs-decode": 256}},
                                                  workload={"peak_concurrency": 8}),
                                    {"sglang_version": "0.5.9"},
                                    "deployment.groups[0].server.extra.--cuda-graph-max-bs-decode"),
    # Casebook capacity calculation: 27B BF16 weights are 54 GB and one L40S has 48 GB, so SGLang refuses it at
    # every start; it is refused before any round, with the fix (FP8 weights take 25 GB).
    "weights-beyond-the-gpu": (NO_FIT, {}, "deployment.groups[0].server.tp-size"),
    # Eight TP2 replicas need 16 GPUs; the node has 8.
    "replicas-beyond-the-node": (scenario_data("too-many", model="Qwen/Qwen3.6-27B", gpu="H100-SXM", gpus=8, tp=2,
                                               replicas=8, router="cache_aware", workload={"peak_concurrency": 8}),
                                 {}, "deployment"),
}


@pytest.mark.parametrize("name", BAD)
def test_bad_inputs_are_refused_with_the_field_named_before_any_round(name: str, tmp_path: Path) -> None:
    data, changes, field = BAD[name]
    issues = errors(check_scenario(build(data, **changes)))
    assert issues and issues[0].field == field and issues[0].hint
    path = tmp_path / f"{name}.toml"
    path.write_text(to_toml({**data, **changes}), encoding="utf-8")
    done = subprocess.run([CLI, "tune", "--playbook", "auto", "--scenario", str(path), "--json"],
                          capture_output=True, text=True, timeout=120)
    # Refused at the door: exit status 2, one line naming the field, no report and no traceback.
    assert done.returncode == 2, done.stderr
    assert field in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and done.stdout == ""


# -- 15. a win that leaves a missed target where it was, then the change that meets it ----------------------------

def test_a_win_that_holds_a_missed_target_is_kept_and_fp8_then_meets_it() -> None:
    outcome = job("tight-ttft", playbook("beam", "speculative_decoding", "chunked_prefill", "quantization",
                                         max_rounds=8), build(TIGHT_TTFT))
    eagle = rounds(outcome, "speculative_decoding")[0]
    # Casebook case 1 round 3: at 16 streams EAGLE3 more than doubles output throughput (+130%). The 131 ms
    # TTFT p95 target is missed before and after it (153 and 159 ms pooled over 4 seeds, the intervals
    # overlapping), and goodput more than doubles: "throughput up, latency up" keeps it, the latency that
    # rose (none the SLO names) having its room, and the missed target neither served nor harmed.
    assert eagle.verdict == "keep_tradeoff" and eagle.figures["output_throughput.change"] > 1.0
    assert "the missed target holds within noise (ttft_p95_ms" in eagle.reasons[0]
    assert eagle.figures["slo.ttft_p95_ms.candidate_met"] == 0 == eagle.figures["slo.ttft_p95_ms.baseline_met"]
    # FP8 lowers every TTFT (case 1 round 2: all metrics improved) and, on top of EAGLE3, meets the target on
    # the main line: no branch is needed.
    [fp8] = rounds(outcome, "quantization")
    assert fp8.line is None and fp8.verdict == "accept"
    assert outcome.report.job.state == "succeeded" and outcome.report.slo.met
    assert outcome.report.path == [0, eagle.index, fp8.index] and outcome.report.branches == []
    assert final_server(outcome).speculative_algorithm == "EAGLE3" and final_server(outcome).quantization == "fp8"
    base = outcome.report.rounds[0].result
    assert fp8.result.bench.output_throughput > 1.8 * base.bench.output_throughput


# -- 17. a cost job that fills a node with a model half of it holds ------------------------------------------------

def test_a_cost_job_sizes_a_moe_to_the_gpus_its_kv_needs() -> None:
    outcome = job("glm-air-h100-cost", auto(), build(GLM_AIR_H100_COST))
    # GLM-4.5-Air in BF16 is 197 GiB: on TP4 each 80 GB H100 holds 49 GiB of weights and a KV pool of about
    # 390,000 tokens, where 16 chat streams at the p95 context (3,000 + 1,200 tokens) need 67,200. The casebook's
    # capacity calculation has room to spare, so the cost objective halves the node and keeps TP4. The TP4 x 2
    # re-cut behind a cache_aware router balancing at one replica's share of the 8 clients is measured first and
    # loses throughput (4 clients per replica at a longer ITL); after NEXTN it loses again, and the cost
    # objective then halves the TP8 instance to TP4.
    split = rounds(outcome, "parallelism")
    assert split and all(r.delta is not None and r.delta.summary.startswith("TP4 x 2 + cache_aware router")
                         and r.verdict == "rollback" for r in split)
    sized = rounds(outcome, "right_sizing")
    assert [(r.delta.summary if r.delta else "", r.verdict) for r in sized] == [("TP4 on 4 GPUs (from TP8)", "accept")]
    # TP2 is never launched: its 99 GiB of weights per GPU would not start, so the walk ends on TP4.
    final = outcome.report.final.deployment
    assert final.total_gpus() == 4 and final.groups[0].server.tp_size == 4 and outcome.report.slo.met


# -- 18. a one-repeat job settles a large gain on enough seeds ------------------------------------------------------

def test_a_one_repeat_job_keeps_a_large_gain_the_first_three_seeds_left_to_a_weak_test() -> None:
    # The 512-token chunk the deployment starts with stays (chunked_prefill, which would raise it, is left out):
    # this job is about the seeds a gain needs, and the raised chunk settles EAGLE3's on the first seed.
    steps = [name for name in HOST.components("technique") if name != "chunked_prefill"]
    outcome = job("starved-9b", auto(repeats=1, techniques=steps), build(STARVED_9B))
    # The starved scheduler is opened first (8 -> 64 running requests), then EAGLE3 gains about 58% output
    # throughput over the same seeds. Over three seeds a paired t (2 degrees of freedom) left that gain
    # "uncertain"; on four or five it is proven, and the job keeps the draft model.
    limits = rounds(outcome, "scheduling_limits")
    assert limits and limits[0].verdict == "accept"
    eagle = [r for r in rounds(outcome, "speculative_decoding") if r.line is None][0]
    assert eagle.verdict in KEPT and eagle.figures["output_throughput.change"] > 0.4
    assert eagle.figures["output_throughput.p_adjusted"] < 0.002
    assert eagle.reasons[-1] in ("decided on 4 seeds per side: 1 left it to noise",
                                 "decided on 5 seeds per side: 1 left it to noise")
    assert all(g.server.speculative_algorithm == "EAGLE3" for g in outcome.report.final.deployment.groups)
    assert outcome.report.slo.met


# -- 14. the same decisions at seeds 0 to 4 -----------------------------------------------------------------------

SEEDED = {
    "near-threshold-on": (playbook("spec", "speculative_decoding"), NEAR_THRESHOLD),
    "coding-90-b200": (playbook("spec", "speculative_decoding"), coding_90("B200")),
    "unmeetable": (playbook("spec", "speculative_decoding"), UNMEETABLE),
    "fp8-unchecked-ungated": (playbook("fp8", "quantization"), BF16_27B),
    "round-robin-support": (playbook("router", "router_policy"), ROUND_ROBIN),
    "rag-front-short": (playbook("rag", "prompt_structure", "router_policy"), RAG_FRONT),
    "a100-chat": (auto(), A100_CHAT),
    "outlines-dynamic": (playbook("grammar", "grammar", "speculative_decoding"), OUTLINES),
    "fp8-unchecked-auto": (auto(), BF16_27B),
    "no-start": (playbook("spec", "speculative_decoding"), NO_START),
    "coding-90-h200": (playbook("spec", "speculative_decoding"), coding_90("H200-SXM")),
    "nightly-miss": (auto(), NIGHTLY_MISS),
    "moe-one-node": (auto(), MOE_ONE_NODE),
}
# Not here: rag-front under `auto` keeps HiCache at seed 0 (+6.0% throughput, proven by the per-request
# bootstrap over 2 seeds) and leaves it inconclusive at seeds 1 to 4 (+5.9%, 95% CI +3.5%..+8.5% by a paired
# t over 6 seeds, short of the Holm-adjusted bar), so its final configuration depends on the seed; and
# tight-ttft, whose target is set on seed 0's measurement (other seeds' pooled TTFT p95 differ by up to 30%).
def decisions(outcome: TuningOutcome) -> tuple[object, ...]:
    """What a job decided: its ending, each round's technique and whether it was kept, the final scenario."""
    kept = [(r.technique, r.verdict in KEPT) for r in outcome.report.rounds[1:]]
    final = outcome.final
    return outcome.report.job.state, kept, final.model, final.deployment, final.workload.prefix


@pytest.mark.parametrize("name", SEEDED)
def test_decisions_are_identical_at_seeds_0_to_4(name: str) -> None:
    chosen, data = SEEDED[name]
    # The pattern table judges a change by its figures; the seed only draws the traffic. A decision that flips
    # with the seed was made inside the noise (issue 15: identical decisions at seeds 0 to 4).
    first = decisions(job(name, chosen, build(data), seed=0))
    for seed in range(1, 5):
        assert decisions(job(name, chosen, build(data), seed=seed)) == first, f"seed {seed} decides otherwise"
