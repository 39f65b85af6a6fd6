"""Casebook directions the simulator reproduces through the default runner chain (`simulated` runner,
aiconfigurator-core's measured kernels with counted roofline fallbacks), one test per direction.

Where SGLang 0.5.23's semantics contradict the casebook, the test asserts what SGLang does and
docs/fidelity.md cites the source; where the cost model's physics disagree with the casebook, the test is
a strict xfail naming the finding, so it flips when the model changes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec
import pytest

from service.components import RoundContext
from service.domain import Deployment, RoundResult, RouterConfig, Scenario, WorkerGroup
from service.plugin_host import PluginHost

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "casebook"
SPEC = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5, "speculative_eagle_topk": 8,
        "speculative_num_draft_tokens": 6}
NO_SPEC = dict.fromkeys(("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
                         "speculative_eagle_topk", "speculative_num_draft_tokens"))
FP8 = {"quantization": "fp8", "kv_cache_dtype": "fp8_e5m2"}


@pytest.fixture(scope="session")
def run():  # type: ignore[no-untyped-def]
    """Run a round on the default chain; engines compile once per process and are reused."""
    host = PluginHost()
    runner = host.get("runner", "simulated")
    context = RoundContext(cost_models=host.components("cost_model"))

    done: dict[tuple[bytes, int], RoundResult] = {}

    def _run(scenario: Scenario, seed: int = 11) -> RoundResult:
        key = (msgspec.json.encode(scenario), seed)  # a round is deterministic for its scenario and seed
        if key not in done:
            done[key] = asyncio.run(runner.run_round(scenario, seed=seed, context=context))
        result = done[key]
        assert result.provenance.cost_model == "aiconfigurator"
        return result

    return _run


def _load(name: str) -> Scenario:
    return msgspec.toml.decode((EXAMPLES / f"{name}.toml").read_bytes(), type=Scenario)


def _server(scenario: Scenario, **flags: object) -> Scenario:
    groups = [msgspec.structs.replace(g, server=msgspec.structs.replace(g.server, **flags))
              for g in scenario.deployment.groups]
    return msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(scenario.deployment, groups=groups))


def _bench(scenario: Scenario, **fields: object) -> Scenario:
    return msgspec.structs.replace(scenario, bench=msgspec.structs.replace(scenario.bench, **fields))


def _prefix(scenario: Scenario, **fields: object) -> Scenario:
    prefix = msgspec.structs.replace(scenario.workload.prefix, **fields)
    return msgspec.structs.replace(scenario, workload=msgspec.structs.replace(scenario.workload, prefix=prefix))


def _replicas(scenario: Scenario, tp: int, replicas: int, policy: str = "cache_aware") -> Scenario:
    group = scenario.deployment.groups[0]
    group = msgspec.structs.replace(group, replicas=replicas, server=msgspec.structs.replace(group.server, tp_size=tp))
    return msgspec.structs.replace(scenario, deployment=Deployment(groups=[group], router=RouterConfig(
        policy=policy)))  # type: ignore[arg-type]


# -- case 1: coding assistant, Qwen3.6-27B on 8xH200 --------------------------------------------------------

def _case1(prompts: int = 200) -> Scenario:
    return _bench(_load("coding-assistant-round0"), num_prompts=prompts, warmup_requests=5)


def _case1_random(concurrency: int) -> Scenario:
    # The casebook's own bench command: random dataset, 2,100 / 400 tokens, range ratio 0.1.
    base = _server(_case1(max(150, 3 * concurrency)), chunked_prefill_size=4096, **FP8)
    return _bench(base, dataset="random", random_input_len=2100, random_output_len=400, random_range_ratio=0.1,
                  max_concurrency=concurrency)


def test_case1_chunked_prefill_alone_costs_throughput_without_cutting_decode_stalls(run) -> None:
    # SGLang runs a prefill batch OR a decode batch per step (scheduler.py get_next_batch_to_run), and the
    # chunked request is re-admitted first each step: decoding waits through every chunk of a long prompt.
    whole = run(_server(_case1(), chunked_prefill_size=-1))
    chunked = run(_server(_case1(), chunked_prefill_size=4096))
    assert 0.9 * whole.bench.output_throughput < chunked.bench.output_throughput < whole.bench.output_throughput
    assert chunked.bench.max_itl_ms > 0.9 * whole.bench.max_itl_ms
    assert chunked.bench.p99_ttft_ms > 0.9 * whole.bench.p99_ttft_ms


def test_case1_chunked_prefill_with_mixed_chunk_cuts_max_itl(run) -> None:
    whole = run(_server(_case1(), chunked_prefill_size=-1))
    mixed = run(_server(_case1(), chunked_prefill_size=4096, enable_mixed_chunk=True))
    assert mixed.bench.max_itl_ms < 0.2 * whole.bench.max_itl_ms
    assert mixed.bench.output_throughput > 0.95 * whole.bench.output_throughput


def test_case1_chunk_2048_gains_no_ttft_tail_for_more_throughput_loss(run) -> None:
    c4096 = run(_server(_case1(), chunked_prefill_size=4096))
    c2048 = run(_server(_case1(), chunked_prefill_size=2048))
    assert c2048.bench.output_throughput < c4096.bench.output_throughput
    assert c2048.bench.p99_ttft_ms > 0.95 * c4096.bench.p99_ttft_ms


def test_case1_fp8_improves_throughput_ttft_and_itl_together(run) -> None:
    base = _server(_case1(), chunked_prefill_size=4096)
    bf16, fp8 = run(base), run(_server(base, mem_fraction_static=0.90, **FP8))
    assert fp8.bench.output_throughput > 1.03 * bf16.bench.output_throughput
    assert fp8.bench.median_ttft_ms < bf16.bench.median_ttft_ms
    assert fp8.bench.median_itl_ms < bf16.bench.median_itl_ms


def test_case1_eagle3_gain_falls_with_concurrency_and_crosses_one_near_128(run) -> None:
    ratios = []
    for concurrency in (8, 25, 64, 128):
        off = run(_case1_random(concurrency))
        on = run(_server(_case1_random(concurrency), **SPEC))
        if concurrency == 25:
            assert on.bench.median_itl_ms < 0.7 * off.bench.median_itl_ms
        ratios.append(on.bench.output_throughput / off.bench.output_throughput)
    assert ratios == sorted(ratios, reverse=True)
    assert ratios[1] > 1.2
    assert 0.85 < ratios[3] < 1.1


def test_case1_tp2_x4_beats_tp8_on_throughput_and_median_ttft_while_itl_rises(run) -> None:
    base = _server(_case1(300), chunked_prefill_size=4096, mem_fraction_static=0.90, **FP8, **SPEC)
    tp8, tp2 = run(base), run(_replicas(base, tp=2, replicas=4))
    assert tp2.bench.output_throughput > tp8.bench.output_throughput
    assert tp2.bench.median_ttft_ms < tp8.bench.median_ttft_ms
    assert tp2.bench.median_itl_ms > tp8.bench.median_itl_ms


# -- case 2: document QA / RAG, Qwen3.6-27B FP8 on 4xH100 --------------------------------------------------

def _case2(prompts: int = 300) -> Scenario:
    return _bench(_load("document-qa-rag-round0"), num_prompts=prompts, warmup_requests=1)


def test_case2_round_robin_lowers_hit_rate_and_cache_aware_restores_it(run) -> None:
    tp4 = run(_case2())
    rr = run(_replicas(_case2(), tp=2, replicas=2, policy="round_robin"))
    ca = run(_replicas(_case2(), tp=2, replicas=2, policy="cache_aware"))
    assert 0.3 < tp4.server.cache_hit_rate
    assert rr.server.cache_hit_rate < tp4.server.cache_hit_rate - 0.1
    assert rr.bench.median_ttft_ms > tp4.bench.median_ttft_ms
    assert ca.server.cache_hit_rate > rr.server.cache_hit_rate + 0.1
    assert ca.bench.median_ttft_ms < rr.bench.median_ttft_ms
    assert ca.bench.output_throughput > rr.bench.output_throughput


def test_case2_variable_fields_at_the_end_raise_hit_rate_and_cut_ttft(run) -> None:
    front = _replicas(_case2(), tp=2, replicas=2)
    before, after = run(front), run(_prefix(front, variable_position="back"))
    assert after.server.cache_hit_rate > before.server.cache_hit_rate + 0.1
    assert after.bench.median_ttft_ms < 0.5 * before.bench.median_ttft_ms


def _hicache_pressure() -> Scenario:
    # A smaller static pool (about 20 documents per replica) puts the device cache under the eviction
    # pressure the casebook's 2,000-prompt run reaches, in a few hundred prompts.
    base = _prefix(_replicas(_case2(400), tp=2, replicas=2), variable_position="back")
    return _server(base, mem_fraction_static=0.45)


def _hicache(policy: str = "write_through") -> Scenario:
    return _server(_hicache_pressure(), page_size=64, enable_hierarchical_cache=True, hicache_ratio=2.0,
                   hicache_write_policy=policy, hicache_io_backend="kernel")


def test_case2_hicache_restores_evicted_documents_instead_of_recomputing(run) -> None:
    gpu_only, hicache = run(_hicache_pressure()), run(_hicache())
    assert hicache.server.cache_hit_rate > gpu_only.server.cache_hit_rate + 0.05
    assert hicache.bench.median_ttft_ms < gpu_only.bench.median_ttft_ms
    assert hicache.bench.output_throughput > gpu_only.bench.output_throughput


def _round3(policy: str | None = None) -> Scenario:
    # The casebook's round 3 setting: two TP2 replicas behind cache_aware, variable fields at the end, its
    # 2,000-prompt trace at concurrency 22 on a warm service (the example's warm_prompts); HiCache added.
    base = _prefix(_replicas(_case2(2000), tp=2, replicas=2), variable_position="back")
    if policy is None:
        return base
    return _server(base, page_size=64, enable_hierarchical_cache=True, hicache_ratio=2.0,
                   hicache_write_policy=policy, hicache_io_backend="kernel")


def test_case2_hicache_cuts_p99_ttft_more_than_median(run) -> None:
    # The tail is the cold-document misses and the misses queued behind them; restoring the evicted ones
    # from host memory shortens it, while the median (a hit) pays page-64 boundary waste instead.
    gpu_only, hicache = run(_round3()), run(_round3("write_through"))
    p99_cut = 1 - hicache.bench.p99_ttft_ms / gpu_only.bench.p99_ttft_ms
    median_cut = 1 - hicache.bench.median_ttft_ms / gpu_only.bench.median_ttft_ms
    assert p99_cut > 0.03
    assert p99_cut > median_cut
    assert hicache.server.cache_hit_rate > gpu_only.server.cache_hit_rate + 0.01
    assert hicache.bench.request_throughput > gpu_only.bench.request_throughput


def test_case2_write_back_raises_throughput_over_write_through(run) -> None:
    through, back = run(_hicache("write_through")), run(_hicache("write_back"))
    assert back.bench.output_throughput > through.bench.output_throughput
    # SGLang's write_through keeps the host pool an inclusive copy of the device, write_back holds only
    # evicted nodes: write_back's distinct capacity is larger, so its hit rate is not lower (fidelity.md).
    assert back.server.cache_hit_rate >= through.server.cache_hit_rate - 0.01


# -- case 3: nightly batch on 2xH100 ------------------------------------------------------------------------

def _case3(prompts: int = 800) -> Scenario:
    return _bench(_load("nightly-batch-round0"), num_prompts=prompts, warmup_requests=2)


def _case3_no_spec(prompts: int = 800) -> Scenario:
    return _server(msgspec.structs.replace(_case3(prompts), model="Qwen/Qwen3.6-9B"), **NO_SPEC)


def _case3_max_batch(prompts: int = 1500, concurrency: int = 512) -> Scenario:
    return _bench(_server(_case3_no_spec(prompts), chunked_prefill_size=32768, max_running_requests=512,
                          max_prefill_tokens=65536, mem_fraction_static=0.94, schedule_conservativeness=0.3),
                  max_concurrency=concurrency)


def test_case3_smaller_model_multiplies_throughput(run) -> None:
    big = run(_case3())
    small = run(msgspec.structs.replace(_case3(), model="Qwen/Qwen3.6-9B"))
    assert small.bench.output_throughput > 1.8 * big.bench.output_throughput


def test_case3_removing_speculation_at_256_raises_throughput(run) -> None:
    spec = run(msgspec.structs.replace(_case3(), model="Qwen/Qwen3.6-9B"))
    plain = run(_case3_no_spec())
    assert plain.bench.output_throughput > 1.1 * spec.bench.output_throughput


def test_case3_batch_maximisation_raises_throughput_and_itl(run) -> None:
    before = run(_bench(_case3_no_spec(1500), max_concurrency=256))
    after = run(_case3_max_batch())
    assert after.bench.output_throughput > 1.08 * before.bench.output_throughput
    # Per-token latency rises (mean ITL, median TPOT); the median ITL alone falls here, because 32,768-token
    # chunks interrupt decoding less often than 4,096-token ones (docs/fidelity.md).
    assert after.bench.mean_itl_ms > before.bench.mean_itl_ms
    assert after.bench.median_tpot_ms > before.bench.median_tpot_ms
    assert after.server.num_running_reqs > 1.5 * before.server.num_running_reqs


def test_case3_mem_fraction_096_fails_at_start_for_want_of_activation_memory(run) -> None:
    # model_executor/model_runner.py sizes the KV pool from mem_fraction_static; activations, CUDA graphs
    # and the sampler must fit in the rest. 0.94 leaves room for a 32,768-token chunk, 0.96 does not.
    assert run(_case3_max_batch(300)).status == "ok"
    failed = run(_server(_case3_max_batch(300), mem_fraction_static=0.96))
    assert failed.status == "failed"
    assert failed.error_phase == "start"
    assert "out of memory" in (failed.error or "") and "32768-token" in (failed.error or "")


def test_case3_client_concurrency_beyond_max_running_saturates(run) -> None:
    at_limit = run(_case3_max_batch(2000, 512))
    beyond = run(_case3_max_batch(2000, 1024))
    assert beyond.bench.output_throughput < 1.03 * at_limit.bench.output_throughput
    assert beyond.server.num_running_reqs <= 512
    assert beyond.server.num_queue_reqs > 100


# -- case 4: structured output, Qwen3.6-35B-A3B on 2xH100 ---------------------------------------------------

def _case4(mode: str = "prompt_only", warmed: bool = False) -> Scenario:
    base = _bench(_load("structured-output-round0"), num_prompts=800, warmup_requests=1)
    so = msgspec.structs.replace(base.workload.structured_output, mode=mode, cache_warmed=warmed)
    base = msgspec.structs.replace(base, workload=msgspec.structs.replace(base.workload, structured_output=so))
    return _server(base, grammar_backend="xgrammar") if mode == "json_schema" else base


def test_case4_prompt_only_json_fails_a_few_percent(run) -> None:
    assert 0.02 < run(_case4()).failure_rate < 0.06


def test_case4_xgrammar_removes_failures_at_a_higher_p99_ttft_without_jump_forward_gain(run) -> None:
    prompt_only, xgrammar = run(_case4()), run(_case4("json_schema"))
    assert xgrammar.failure_rate == 0.0
    # A fresh server compiles the start burst's schemas side by side on its share of the host's cores.
    assert xgrammar.bench.p99_ttft_ms > 1.3 * prompt_only.bench.p99_ttft_ms
    assert xgrammar.server.grammar_compile_time_mean_ms and xgrammar.server.grammar_compile_time_mean_ms > 10
    # 0.5.23 never calls try_jump_forward (srt/constrained/base_grammar_backend.py has it; srt/managers/
    # does not call it): every token still goes through the model, and masks cost a little.
    assert xgrammar.bench.output_throughput <= prompt_only.bench.output_throughput


def test_case4_warming_the_schemas_cuts_p99_ttft(run) -> None:
    cold, warm = run(_case4("json_schema")), run(_case4("json_schema", warmed=True))
    assert warm.bench.p99_ttft_ms < 0.8 * cold.bench.p99_ttft_ms
    assert warm.server.grammar_cache_hit_rate == 1.0
    # A cache hit goes straight to the waiting queue (grammar_manager.py process_req_with_grammar): only the
    # few requests that waited for a compile gain, so the median stays (the casebook: -10%).
    assert warm.bench.median_ttft_ms == pytest.approx(cold.bench.median_ttft_ms, rel=0.05)


def test_case4_tool_definitions_first_raise_hit_rate_and_cut_ttft(run) -> None:
    after_history = run(_case4("json_schema", warmed=True))
    first = run(_prefix(_case4("json_schema", warmed=True), tools_position="first"))
    assert first.server.cache_hit_rate > after_history.server.cache_hit_rate + 0.3
    assert first.bench.median_ttft_ms < after_history.bench.median_ttft_ms
    assert first.bench.output_throughput > after_history.bench.output_throughput


# -- case 5: DeepSeek-V4-Flash on 16 x 8 H200 ---------------------------------------------------------------

# The casebook's bench for every round: 20,000 prompts at concurrency 1,400. Fewer prompts at this
# concurrency measure mostly the start-up wave and the drain, where the EP / TP8 ratios move by +-10% with
# the seed; at 20,000 they hold within 3% over seeds 11-13.
CASEBOOK_PROMPTS = 20000


def _case5(prompts: int = CASEBOOK_PROMPTS) -> Scenario:
    return _bench(_load("moe-at-scale-round0"), num_prompts=prompts, warmup_requests=4)


def _case5_ep(eplb: bool, prompts: int = CASEBOOK_PROMPTS, a2a: str | None = "deepep", **extra: object) -> Scenario:
    # EP32 + DP attention 8 in four 4-node instances. The all-to-all the casebook describes is DeepEP
    # (`--moe-a2a-backend deepep`), as the moe_parallelism technique proposes; `a2a=None` is the casebook's
    # own command (see _case5_round1).
    base = _case5(prompts)
    server = msgspec.structs.replace(base.deployment.groups[0].server, tp_size=32, ep_size=32, attention_dp_size=8,
                                     moe_a2a_backend=a2a, extra=dict(extra))
    if eplb:
        server = msgspec.structs.replace(server, enable_eplb=True, eplb_algorithm="deepseek",
                                         ep_num_redundant_experts=32)
    group = msgspec.structs.replace(base.deployment.groups[0], replicas=4, server=server)
    return msgspec.structs.replace(base, deployment=msgspec.structs.replace(base.deployment, groups=[group]))


def _case5_round1(prompts: int = CASEBOOK_PROMPTS) -> Scenario:
    # The casebook's round-1 command, `--tp-size 32 --enable-ep-moe --ep-size 32 --enable-dp-attention
    # --dp-size 8`: `--enable-ep-moe` only set ep_size = tp_size (0.5.2 server_args.py __post_init__, and its
    # 0.5.9+ replacement is `--ep-size`); nothing in it chooses an all-to-all backend.
    return _case5_ep(False, prompts, a2a=None)


def _case5_pd(prefill_nodes: int, prompts: int = CASEBOOK_PROMPTS, dp_attention_prefill: bool = False) -> Scenario:
    base = _case5_ep(True, prompts)
    ep = base.deployment.groups[0].server
    decode_gpus = (16 - prefill_nodes) * 8
    prefill = msgspec.structs.replace(ep, tp_size=8, ep_size=1, attention_dp_size=1, enable_eplb=False,
                                      ep_num_redundant_experts=None, chunked_prefill_size=16384,
                                      mem_fraction_static=0.85, disaggregation_transfer_backend="mooncake")
    if dp_attention_prefill:
        prefill = msgspec.structs.replace(prefill, ep_size=8, attention_dp_size=8)
    decode = msgspec.structs.replace(ep, tp_size=decode_gpus, ep_size=decode_gpus, attention_dp_size=decode_gpus // 4,
                                     ep_num_redundant_experts=decode_gpus, max_running_requests=2048,
                                     mem_fraction_static=0.90, disaggregation_transfer_backend="mooncake")
    router = RouterConfig(policy="cache_aware", prefill_policy="cache_aware", decode_policy="power_of_two")
    return msgspec.structs.replace(base, deployment=Deployment(router=router, groups=[
        WorkerGroup(name="prefill", role="prefill", replicas=prefill_nodes, server=prefill),
        WorkerGroup(name="decode", role="decode", replicas=1, server=decode)]))


def test_case5_deepep_all_to_all_beats_the_gather_path_of_ep(run) -> None:
    # Without an all-to-all backend SGLang gathers every DP rank's tokens onto all 32 GPUs and all-reduces the
    # MoE output back (layers/moe/utils.py is_moe_input_scattered_across_dp_ranks); DeepEP sends each token
    # only to the ranks holding its experts.
    gather, deepep = run(_case5_round1()), run(_case5_ep(False))
    assert deepep.bench.output_throughput > 1.5 * gather.bench.output_throughput
    assert deepep.bench.median_itl_ms < gather.bench.median_itl_ms


def test_case5_two_batch_overlap_hides_the_all_to_all(run) -> None:
    plain, overlapped = run(_case5_ep(False)), run(_case5_ep(False, **{"--enable-two-batch-overlap": True}))
    assert overlapped.bench.output_throughput > 1.1 * plain.bench.output_throughput
    assert overlapped.bench.median_itl_ms < plain.bench.median_itl_ms


def test_case5_casebook_round1_command_gathers_every_token_and_loses_to_tp8_x16(run) -> None:
    # Exception (docs/fidelity.md): the casebook credits its round 1 to an all-to-all, but its command sets no
    # all-to-all backend. SGLang then runs the sparse MLP on gathered tokens (0.5.2 layers/communicator.py
    # _compute_mlp_mode -> ScatterMode.FULL, the EPMoE layer of layers/moe/ep_moe/layer.py get_moe_impl_class;
    # 0.5.23 layers/moe/utils.py is_moe_input_scattered_across_dp_ranks): on every MoE layer all 32 GPUs'
    # tokens are gathered onto each GPU across four nodes and the output is reduced back. So the round loses
    # to TP8 x 16, whose all-reduce stays inside one node's NVLink.
    tp8, round1 = run(_case5()), run(_case5_round1())
    assert "every rank's tokens gathered onto each GPU" in round1.provenance.cost_model_detail
    assert round1.bench.output_throughput < 0.8 * tp8.bench.output_throughput
    assert round1.bench.median_itl_ms > tp8.bench.median_itl_ms


def test_case5_ep_with_deepep_and_two_batch_overlap_beats_tp8_x16(run) -> None:
    # The all-to-all the casebook describes, as SGLang runs it for an EP domain over four nodes: DeepEP, with
    # `--enable-two-batch-overlap` hiding it behind the other micro-batch's math.
    tp8 = run(_case5())
    ep = run(_case5_ep(False, **{"--enable-two-batch-overlap": True}))
    assert ep.bench.output_throughput > tp8.bench.output_throughput
    assert ep.bench.median_itl_ms < 0.8 * tp8.bench.median_itl_ms


@pytest.mark.xfail(strict=True, reason="finding on the all-to-all the casebook's text describes (its command sets none, "
                   "see above): with DeepEP and no two-batch overlap, EP32 + DP attention 8 decodes "
                   "more tokens per GPU than TP8 (12.1 ms for 352 requests on 32 GPUs against 16.0 ms for 88 on 8) and "
                   "prefills full 1,024-token chunks per rank about as cheaply per GPU, but a lone 2,600-token prompt "
                   "costs its 32 GPUs 30 ms (DeepGEMM's normal-mode launch floor and the all-to-all over InfiniBand) "
                   "against 68 ms on TP8's 8, 1.8x the GPU time, while every decode of the instance waits: 0.95x over "
                   "the casebook's 20,000 prompts (0.93x and 0.94x with seeds 12 and 13); the KV headroom the casebook credits does not bind (token_usage a few %) "
                   "(docs/fidelity.md)")
def test_case5_ep_with_deepep_alone_beats_tp8_x16(run) -> None:
    tp8, ep = run(_case5()), run(_case5_ep(False))
    assert ep.bench.output_throughput > tp8.bench.output_throughput


def test_case5_ep_with_dp_attention_cuts_itl(run) -> None:
    # Casebook round 1: median ITL -31%. Each GPU streams a quarter of the expert weights TP8's does (whole
    # experts on 32 GPUs against slices of all 256 on 8) for the same requests per GPU.
    tp8, ep = run(_case5()), run(_case5_ep(False))
    assert ep.bench.median_itl_ms < 0.9 * tp8.bench.median_itl_ms


def test_case5_ep_with_eplb_and_two_batch_overlap_beats_tp8_x16(run) -> None:
    # Casebook rounds 0 -> 2: 71.3 -> 139.9 req/s. With the all-to-all hidden behind the other micro-batch
    # (`--enable-two-batch-overlap`) and the hot experts replicated, EP + DP attention wins in the simulator.
    tp8 = run(_case5())
    ep = run(_case5_ep(True, **{"--enable-two-batch-overlap": True}))
    assert ep.bench.output_throughput > 1.2 * tp8.bench.output_throughput
    assert ep.bench.median_itl_ms < 0.6 * tp8.bench.median_itl_ms


def test_case5_eplb_cuts_expert_imbalance_and_raises_throughput(run) -> None:
    fixed, balanced = run(_case5_ep(False)), run(_case5_ep(True))
    assert fixed.expert_imbalance and balanced.expert_imbalance
    assert fixed.expert_imbalance > 5.0 > 2.5 > balanced.expert_imbalance
    assert balanced.bench.output_throughput > 1.1 * fixed.bench.output_throughput


def test_case5_pd_disaggregation_raises_throughput_at_this_scale(run) -> None:
    unified, pd = run(_case5_ep(True)), run(_case5_pd(7))
    assert pd.bench.output_throughput > unified.bench.output_throughput


# The casebook's four smaller cases ("PD disaggregation: Detrimental" in its five-case table): each round-0
# scenario as the table's deployment (TP2 x 4, TP2 x 2, TP2, TP2), against the same GPUs split into a prefill
# pool and a decode pool. Values: (unified TP, unified instances, PD TP, prompts).
SMALL_PD = {"coding-assistant-round0": (2, 4, 2, 500), "document-qa-rag-round0": (2, 2, 2, 1000),
            "nightly-batch-round0": (2, 1, 1, 1000), "structured-output-round0": (2, 1, 1, 1000)}


def small_pd_pair(name: str) -> tuple[Scenario, Scenario]:
    """The case's unified deployment and its prefill / decode split (also tabled by scripts/gen_fidelity.py)."""
    tp, instances, pd_tp, prompts = SMALL_PD[name]
    base = _bench(_load(name), num_prompts=prompts)
    server = msgspec.structs.replace(base.deployment.groups[0].server, tp_size=pd_tp)
    pools = tp * instances // pd_tp
    router = RouterConfig(policy="cache_aware", prefill_policy="cache_aware", decode_policy="power_of_two")
    split = msgspec.structs.replace(base, deployment=Deployment(router=router, groups=[
        WorkerGroup(name="prefill", role="prefill", replicas=pools // 2, server=server),
        WorkerGroup(name="decode", role="decode", replicas=pools - pools // 2, server=server)]))
    return _replicas(base, tp=tp, replicas=instances), split


@pytest.mark.parametrize("name", list(SMALL_PD))
def test_pd_disaggregation_raises_ttft_in_the_smaller_cases(run, name: str) -> None:
    # Every request now waits for a prefill pool of half the GPUs and a KV transfer: median TTFT x1.2 (batch)
    # to x13 (coding) at seed 11, within 3% of that at seeds 12 and 13 but for coding (x11 to x27).
    unified, split = (run(s) for s in small_pd_pair(name))
    assert split.bench.median_ttft_ms > unified.bench.median_ttft_ms


@pytest.mark.parametrize("name", ["document-qa-rag-round0", "nightly-batch-round0"])
def test_pd_disaggregation_lowers_throughput_where_the_halved_prefill_pool_binds(run, name: str) -> None:
    # RAG's 68:1 prompts and the batch job's 256 clients queue in front of the prefill pool: 0.89x and 0.93x
    # (0.86x to 0.89x and 0.93x over seeds 11 to 13).
    unified, split = (run(s) for s in small_pd_pair(name))
    assert split.bench.output_throughput < unified.bench.output_throughput


@pytest.mark.xfail(strict=True, reason="finding: on the coding and structured-output cases PD raises throughput "
                   "(1.05x and 1.25x; seeds 11-13: 1.03-1.10x and 1.24-1.25x) instead of lowering it: decoding no "
                   "longer stalls behind prefill chunks (median TPOT 9.9 -> 9.6 ms and 15.6 -> 11.7 ms), on the coding "
                   "case two decode instances carry the batch of four at little more cost (a decode step streams "
                   "the weights once), and shared prefixes keep the halved prefill pool from binding; median TTFT "
                   "still rises x13 and x3 (docs/fidelity.md)")
@pytest.mark.parametrize("name", ["coding-assistant-round0", "structured-output-round0"])
def test_pd_disaggregation_lowers_throughput_where_decode_binds(run, name: str) -> None:
    unified, split = (run(s) for s in small_pd_pair(name))
    assert split.bench.output_throughput < unified.bench.output_throughput


def test_case5_dp_attention_prefill_nodes_keep_up_where_tp8_prefill_nodes_queue(run) -> None:
    # Not in the casebook, whose prefill nodes are TP8 without EP: in aiconfigurator's measured data a TP8
    # node prefills about 44k tokens/s of DeepSeek-V4-Flash, one with DP attention and EP8 over NVLink
    # (chunk 16384 // 8 per GPU, experts on DeepGEMM) about 127k, so at the same split the prefill queue,
    # and TTFT, shrink.
    tp8_prefill, dp_prefill = run(_case5_pd(7)), run(_case5_pd(7, dp_attention_prefill=True))
    assert dp_prefill.bench.output_throughput > 1.3 * tp8_prefill.bench.output_throughput
    assert dp_prefill.bench.median_ttft_ms < 0.7 * tp8_prefill.bench.median_ttft_ms


def test_case5_node_split_trades_ttft_against_itl(run) -> None:
    five, seven = run(_case5_pd(5)), run(_case5_pd(7))
    assert seven.bench.median_ttft_ms < five.bench.median_ttft_ms
    assert seven.bench.median_itl_ms > five.bench.median_itl_ms
