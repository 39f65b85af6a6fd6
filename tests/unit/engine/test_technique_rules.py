"""Each technique's casebook rule on the casebook's own cases: what it proposes, and what it refuses."""

from __future__ import annotations

import msgspec
import pytest

from plugins.techniques import TECHNIQUES
from service import (
    ConfigDelta,
    Provenance,
    RoundResult,
    RoundStatus,
    ServerMetrics,
    Source,
    Technique,
    TuningContext,
)
from service.engine import apply_delta
from tests.unit.engine.casebook import CASES, context

BY_NAME: dict[str, Technique] = {t.name: t() for t in TECHNIQUES}


def applies(name: str, ctx: TuningContext) -> bool:
    return BY_NAME[name].applicable(ctx).applicable


def first(name: str, ctx: TuningContext) -> ConfigDelta:
    return BY_NAME[name].propose(ctx)[0]


def then(ctx: TuningContext, delta: ConfigDelta) -> TuningContext:
    scen = apply_delta(ctx.scenario, delta)
    return context("", scenario=scen, **ctx.options)


def test_chunked_prefill_starts_at_4096_for_a_long_tail_and_halves_once_kept() -> None:
    ctx = context("coding-assistant")
    assert first("chunked_prefill", ctx).set_server == {"chunked_prefill_size": 4096}
    assert first("chunked_prefill", then(ctx, first("chunked_prefill", ctx))).set_server == {
        "chunked_prefill_size": 2048}
    after_2048 = then(ctx, ConfigDelta(technique="chunked_prefill", summary="", set_server={
        "chunked_prefill_size": 2048}))
    assert not applies("chunked_prefill", after_2048)  # the casebook stops at 2048
    assert not applies("chunked_prefill", context("nightly-batch"))  # no latency SLO


def test_chunked_prefill_also_proposes_mixed_chunk_and_under_speculation_only_where_sglang_keeps_it() -> None:
    ctx = context("coding-assistant")
    alternatives = BY_NAME["chunked_prefill"].propose(ctx)
    assert [d.set_server for d in alternatives] == [{"chunked_prefill_size": 4096},
                                                    {"chunked_prefill_size": 4096, "enable_mixed_chunk": True}]
    mixed = then(ctx, alternatives[1])
    assert BY_NAME["chunked_prefill"].propose(mixed)[0].set_server == {"chunked_prefill_size": 2048}
    assert mixed.scenario.deployment.groups[0].server.enable_mixed_chunk
    speculating = then(ctx, ConfigDelta(technique="speculative_decoding", summary="", set_server={
        "speculative_algorithm": "EAGLE3", "speculative_num_steps": 5, "speculative_eagle_topk": 8,
        "speculative_num_draft_tokens": 6}))
    # SGLang 0.5.23 (case 1's version) keeps mixed chunk under EAGLE3; up to 0.5.18 it turns it off there.
    assert len(BY_NAME["chunked_prefill"].propose(speculating)) == 2
    older = msgspec.structs.replace(speculating, scenario=msgspec.structs.replace(speculating.scenario,
                                                                                  sglang_version="0.5.15"))
    assert len(BY_NAME["chunked_prefill"].propose(older)) == 1



def _chat_on(gpu: str) -> TuningContext:
    """Case 1's deployment, chunk unset, serving prompts without a long tail (the sweep starts at 8192) on `gpu`."""
    scen = context("coding-assistant").scenario
    workload = msgspec.structs.replace(scen.workload, input=msgspec.structs.replace(scen.workload.input, p95=2000))
    return context("", scenario=msgspec.structs.replace(scen, workload=workload,
                                                         hardware=msgspec.structs.replace(scen.hardware, gpu=gpu)))


def test_chunked_prefill_never_sets_the_chunk_sglang_already_uses_nor_a_longer_one() -> None:
    h100, l40s = _chat_on("H100-SXM"), _chat_on("L40S")
    assert main_chunk(h100) is None and main_chunk(l40s) is None
    # SGLang defaults to 8192 on an 80 GB GPU: "8192" alone would rerun the baseline.
    assert [d.set_server for d in BY_NAME["chunked_prefill"].propose(h100)] == [
        {"chunked_prefill_size": 8192, "enable_mixed_chunk": True}, {"chunked_prefill_size": 4096}]
    # And to 4096 on a 48 GB one: 8192 would lengthen the chunk a latency SLO asks to shorten.
    assert [d.set_server for d in BY_NAME["chunked_prefill"].propose(l40s)] == [
        {"chunked_prefill_size": 4096, "enable_mixed_chunk": True}, {"chunked_prefill_size": 2048}]
    kept = then(h100, BY_NAME["chunked_prefill"].propose(h100)[0])
    assert [d.set_server for d in BY_NAME["chunked_prefill"].propose(kept)] == [{"chunked_prefill_size": 4096}]


def test_a_chunk_started_below_the_sweep_is_raised_with_or_without_a_latency_slo() -> None:
    # Case 1 started at 256 tokens: every prefill cut into passes that each pay a step's fixed cost.
    tiny = ConfigDelta(technique="start", summary="", set_server={"chunked_prefill_size": 256})
    latency = then(context("coding-assistant"), tiny)
    assert applies("chunked_prefill", latency)
    assert [d.set_server for d in BY_NAME["chunked_prefill"].propose(latency)] == [
        {"chunked_prefill_size": 4096}, {"chunked_prefill_size": 2048}]
    # No latency SLO (case 3): larger chunks use the GPU better, so back to SGLang's default.
    batch = then(context("nightly-batch"), tiny)
    assert applies("chunked_prefill", batch)
    (delta,) = BY_NAME["chunked_prefill"].propose(batch)
    assert delta.set_server == {"chunked_prefill_size": None}
    assert main_chunk(then(batch, delta)) is None


def main_chunk(ctx: TuningContext) -> int | None:
    return ctx.scenario.deployment.groups[0].server.chunked_prefill_size

def test_quantization_proposes_fp8_weights_and_kv() -> None:
    delta = first("quantization", context("coding-assistant"))
    assert delta.set_server == {"quantization": "fp8", "kv_cache_dtype": "fp8_e5m2", "mem_fraction_static": 0.90}
    assert not applies("quantization", context("document-qa-rag"))


def test_speculative_decoding_on_at_25_and_removed_at_256() -> None:
    case1 = context("coding-assistant")
    assert applies("speculative_decoding", case1)
    assert "206" in BY_NAME["speculative_decoding"].applicable(case1).reason
    eagle = first("speculative_decoding", case1).set_server
    assert (eagle["speculative_algorithm"], eagle["speculative_num_steps"], eagle["speculative_eagle_topk"],
            eagle["speculative_num_draft_tokens"]) == ("EAGLE3", 5, 8, 6)
    assert "break-even near concurrency 124" in first("speculative_decoding", case1).summary
    case3 = context("nightly-batch")
    assert "295" in BY_NAME["speculative_decoding"].applicable(case3).reason
    assert first("speculative_decoding", case3).set_server["speculative_algorithm"] is None
    assert not applies("speculative_decoding", context("document-qa-rag"))  # input >> output


def test_parallelism_splits_tp8_into_four_tp2_behind_cache_aware() -> None:
    delta = first("parallelism", context("coding-assistant"))
    group = delta.deployment.groups[0]
    assert (group.replicas, group.server.tp_size, delta.deployment.router.policy) == (4, 2, "cache_aware")


def test_router_policy_compares_round_robin_then_cache_aware_on_two_tp2() -> None:
    ctx = context("document-qa-rag", compare=["round_robin", "cache_aware"])
    proposals = BY_NAME["router_policy"].propose(ctx)
    assert [(d.deployment.groups[0].replicas, d.deployment.groups[0].server.tp_size, d.deployment.router.policy)
            for d in proposals] == [(2, 2, "round_robin"), (2, 2, "cache_aware")]
    assert not applies("router_policy", then(ctx, proposals[1]))


def test_hicache_only_above_break_even_with_documents() -> None:
    rag = context("document-qa-rag")
    reason = BY_NAME["hicache"].applicable(rag).reason
    assert applies("hicache", rag) and "recompute 227 ms vs transfer 30 ms" in reason
    assert first("hicache", rag).set_server["hicache_write_policy"] == "write_through"
    assert first("hicache", rag).set_server["page_size"] == 64
    coding = BY_NAME["hicache"].applicable(context("coding-assistant"))
    assert not coding.applicable and "unnecessary" in coding.reason


def test_prompt_structure_moves_variable_fields_back_and_tools_first() -> None:
    delta = first("prompt_structure", context("document-qa-rag"))
    assert delta.workload.prefix.variable_position == "back" and "prompt-structure.md" in delta.artifacts
    tools = first("prompt_structure", context("structured-output"))
    assert tools.workload.prefix.tools_position == "first"
    assert not applies("prompt_structure", context("coding-assistant"))


def test_grammar_then_warming_with_a_script() -> None:
    ctx = context("structured-output")
    backend = first("grammar", ctx)
    assert backend.set_server == {"grammar_backend": "xgrammar"}
    warm = first("grammar", then(ctx, backend))
    assert warm.workload.structured_output.cache_warmed and "warm_grammar.sh" in warm.artifacts
    assert not BY_NAME["grammar"].propose(then(then(ctx, backend), warm))


def test_batch_parameters_maximise_then_probe_096_then_client_concurrency() -> None:
    ctx = context("nightly-batch")
    big = first("batch_parameters", ctx)
    assert big.set_server["max_running_requests"] == 512 and big.client_concurrency == 512
    after = BY_NAME["batch_parameters"].propose(then(ctx, big))
    assert after[0].set_server == {"mem_fraction_static": 0.96}
    assert after[1].client_concurrency == 1024
    assert not applies("batch_parameters", context("coding-assistant"))


def test_batch_parameters_raise_the_running_cap_only_while_the_kv_pool_has_room() -> None:
    ctx = context("nightly-batch")
    raised = then(ctx, first("batch_parameters", ctx))

    def measured(token_usage: float, running: float) -> TuningContext:
        figures = RoundResult(status=RoundStatus.OK, provenance=Provenance(source=Source.SIMULATED, runner="x"),
                              server=ServerMetrics(token_usage=token_usage, num_running_reqs=running))
        return msgspec.structs.replace(raised, baseline=figures)

    # 455 of 512 slots busy and a quarter of the KV pool used: the cap binds, not memory.
    roomy = [d.summary for d in BY_NAME["batch_parameters"].propose(measured(0.26, 455.0))]
    assert roomy == ["mem-fraction-static 0.96", "max-running-requests 1024 with client concurrency 1024",
                     "client concurrency 1024"]
    # The casebook's pool at 0.93 token usage is full: only the 0.96 probe and the client check remain.
    full = [d.summary for d in BY_NAME["batch_parameters"].propose(measured(0.93, 487.0))]
    assert full == ["mem-fraction-static 0.96", "client concurrency 1024"]
    # A pool with room but a cap that does not bind (the server runs far fewer) raises nothing either.
    assert len(BY_NAME["batch_parameters"].propose(measured(0.26, 200.0))) == 2


def test_model_selection_needs_quality_results() -> None:
    assert [d.model for d in BY_NAME["model_selection"].propose(context("nightly-batch"))] == ["Qwen/Qwen3.6-9B"]
    assert not applies("model_selection", context("coding-assistant"))


def test_moe_ep_then_eplb_and_pd_only_at_scale() -> None:
    ctx = context("moe-at-scale")
    ep = first("moe_parallelism", ctx)
    group = ep.deployment.groups[0]
    assert (group.replicas, group.server.tp_size, group.server.ep_size, group.server.attention_dp_size) == (4, 32, 32, 8)
    alternatives = BY_NAME["moe_parallelism"].propose(ctx)
    assert [d.summary for d in alternatives] == ["EP32 + DP attention 8 x 4",
                                                 "EP32 + DP attention 8 x 4, two-batch overlap"]
    assert alternatives[1].deployment.groups[0].server.extra["--enable-two-batch-overlap"]
    eplb = first("moe_parallelism", then(ctx, ep)).set_server
    assert eplb["enable_eplb"] and eplb["ep_num_redundant_experts"] == 32
    pd = first("pd_disaggregation", ctx)
    roles = {g.role: g for g in pd.deployment.groups}
    assert roles["prefill"].replicas == 5 and roles["decode"].server.tp_size == 88
    assert pd.deployment.router.decode_policy == "power_of_two"
    assert (roles["prefill"].server.tp_size, roles["prefill"].server.ep_size) == (8, 1)
    # Until a split is kept: the casebook's TP8 prefill nodes, then DP-attention prefill nodes, shifting
    # towards prefill one node at a time; one at a time, each against the last accepted deployment.
    assert BY_NAME["pd_disaggregation"].stepwise
    unified = [d.summary for d in BY_NAME["pd_disaggregation"].propose(ctx)]
    assert unified[:3] == ["PD prefill 5 / decode 11", "PD prefill 5 (DP attention, EP8) / decode 11",
                           "PD prefill 6 (DP attention, EP8) / decode 10"]
    assert unified[-1] == "PD prefill 12 (DP attention, EP8) / decode 4"
    dp_split = BY_NAME["pd_disaggregation"].propose(ctx)[1]
    prefill = next(g for g in dp_split.deployment.groups if g.role == "prefill").server
    assert (prefill.tp_size, prefill.ep_size, prefill.attention_dp_size, prefill.moe_a2a_backend) == (8, 8, 8, "deepep")
    sweep = BY_NAME["pd_disaggregation"].propose(then(ctx, pd))
    assert [d.summary for d in sweep] == ["PD prefill 6 / decode 10", "PD prefill 4 / decode 12"]
    seven = BY_NAME["pd_disaggregation"].propose(then(ctx, BY_NAME["pd_disaggregation"].propose(ctx)[3]))
    assert [d.summary for d in seven] == ["PD prefill 8 (DP attention, EP8) / decode 8",
                                          "PD prefill 6 (DP attention, EP8) / decode 10"]
    for name in ("coding-assistant", "document-qa-rag", "nightly-batch", "structured-output"):
        assert not applies("pd_disaggregation", context(name))
        assert not applies("moe_parallelism", context(name))


@pytest.mark.parametrize("case", sorted(CASES))
def test_auto_proposes_nothing_the_casebook_calls_detrimental(case: str) -> None:
    ctx = context(case)
    chosen = {name for name, t in BY_NAME.items() if t.applicable(ctx).applicable}
    gpus = ctx.scenario.hardware.total_gpus
    if gpus < 16:
        assert "pd_disaggregation" not in chosen
    if case in ("coding-assistant", "nightly-batch", "structured-output"):
        assert "hicache" not in chosen  # unnecessary or below break-even
    if case == "nightly-batch":
        assert all(d.set_server.get("speculative_algorithm") is None
                   for d in BY_NAME["speculative_decoding"].propose(ctx))


def test_hicache_refused_below_break_even() -> None:
    """A small model prefilled on eight B200s recomputes a 20,000-token document faster than PCIe restores it."""
    import msgspec

    from service import Deployment, Hardware, ServerConfig, WorkerGroup
    from tests.unit.engine.casebook import document_qa

    model = "Qwen/Qwen3.6-2B"
    scen = msgspec.structs.replace(document_qa(), model=model, hardware=Hardware(gpu="B200"), deployment=Deployment(
        groups=[WorkerGroup(server=ServerConfig(model_path=model, tp_size=8))]))
    verdict = BY_NAME["hicache"].applicable(context("", scenario=scen))
    assert not verdict.applicable and "Below break-even" in verdict.reason
