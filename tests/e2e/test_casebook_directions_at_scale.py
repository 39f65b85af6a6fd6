"""Casebook directions at scale: case 5 (DeepSeek-V4-Flash on 16 x 8 H200) and PD disaggregation at the
four smaller cases' scales, through the default runner chain, one test per direction.

As in test_casebook_directions.py: where SGLang 0.5.23's semantics contradict the casebook, the test asserts
what SGLang does and docs/fidelity.md cites the source; where the cost model's physics disagree, the test is
a strict xfail naming the finding.
"""

from __future__ import annotations

import pytest

from tests.e2e.casebook import SMALL_PD, case5, case5_ep, case5_pd, case5_round1, small_pd_pair

# -- case 5: DeepSeek-V4-Flash on 16 x 8 H200 ---------------------------------------------------------------

def test_case5_deepep_all_to_all_beats_the_gather_path_of_ep(run) -> None:
    # Without an all-to-all backend SGLang gathers every DP rank's tokens onto all 32 GPUs and all-reduces the
    # MoE output back (layers/moe/utils.py is_moe_input_scattered_across_dp_ranks); DeepEP sends each token
    # only to the ranks holding its experts.
    gather, deepep = run(case5_round1()), run(case5_ep(False))
    assert deepep.bench.output_throughput > 1.5 * gather.bench.output_throughput
    assert deepep.bench.median_itl_ms < gather.bench.median_itl_ms


def test_case5_two_batch_overlap_hides_the_all_to_all(run) -> None:
    plain, overlapped = run(case5_ep(False)), run(case5_ep(False, **{"--enable-two-batch-overlap": True}))
    assert overlapped.bench.output_throughput > 1.1 * plain.bench.output_throughput
    assert overlapped.bench.median_itl_ms < plain.bench.median_itl_ms


def test_case5_casebook_round1_command_gathers_every_token_and_loses_to_tp8_x16(run) -> None:
    # Exception (docs/fidelity.md): the casebook credits its round 1 to an all-to-all, but its command sets no
    # all-to-all backend. SGLang then runs the sparse MLP on gathered tokens (0.5.2 layers/communicator.py
    # _compute_mlp_mode -> ScatterMode.FULL, the EPMoE layer of layers/moe/ep_moe/layer.py get_moe_impl_class;
    # 0.5.23 layers/moe/utils.py is_moe_input_scattered_across_dp_ranks): on every MoE layer all 32 GPUs'
    # tokens are gathered onto each GPU across four nodes and the output is reduced back. So the round loses
    # to TP8 x 16, whose all-reduce stays inside one node's NVLink.
    tp8, round1 = run(case5()), run(case5_round1())
    assert "every rank's tokens gathered onto each GPU" in round1.provenance.cost_model_detail
    assert round1.bench.output_throughput < 0.8 * tp8.bench.output_throughput
    assert round1.bench.median_itl_ms > tp8.bench.median_itl_ms


def test_case5_ep_with_deepep_and_two_batch_overlap_beats_tp8_x16(run) -> None:
    # The all-to-all the casebook describes, as SGLang runs it for an EP domain over four nodes: DeepEP, with
    # `--enable-two-batch-overlap` hiding it behind the other micro-batch's math.
    tp8 = run(case5())
    ep = run(case5_ep(False, **{"--enable-two-batch-overlap": True}))
    assert ep.bench.output_throughput > tp8.bench.output_throughput
    assert ep.bench.median_itl_ms < 0.8 * tp8.bench.median_itl_ms


def test_case5_ep_with_deepep_alone_beats_tp8_x16(run) -> None:
    # The casebook's round 1 with the all-to-all its text describes (DeepEP, no two-batch overlap). Only
    # just: 1.02x over 20,000 prompts (0.999x and 1.006x with seeds 12 and 13, so the direction holds at the
    # margin), because a lone prompt costs the 32 GPUs 1.6x TP8's GPU time while every decode of the
    # instance waits (docs/fidelity.md).
    tp8, ep = run(case5()), run(case5_ep(False))
    assert ep.bench.output_throughput > tp8.bench.output_throughput


def test_case5_ep_with_dp_attention_cuts_itl(run) -> None:
    # Casebook round 1: median ITL -31%. Each GPU streams a quarter of the expert weights TP8's does (whole
    # experts on 32 GPUs against slices of all 256 on 8) for the same requests per GPU.
    tp8, ep = run(case5()), run(case5_ep(False))
    assert ep.bench.median_itl_ms < 0.9 * tp8.bench.median_itl_ms


def test_case5_ep_with_eplb_and_two_batch_overlap_beats_tp8_x16(run) -> None:
    # Casebook rounds 0 -> 2: 71.3 -> 139.9 req/s. With the all-to-all hidden behind the other micro-batch
    # (`--enable-two-batch-overlap`) and the hot experts replicated, EP + DP attention wins in the simulator.
    tp8 = run(case5())
    ep = run(case5_ep(True, **{"--enable-two-batch-overlap": True}))
    assert ep.bench.output_throughput > 1.2 * tp8.bench.output_throughput
    assert ep.bench.median_itl_ms < 0.6 * tp8.bench.median_itl_ms


def test_case5_eplb_cuts_expert_imbalance_and_raises_throughput(run) -> None:
    fixed, balanced = run(case5_ep(False)), run(case5_ep(True))
    assert fixed.expert_imbalance and balanced.expert_imbalance
    assert fixed.expert_imbalance > 5.0 > 2.5 > balanced.expert_imbalance
    assert balanced.bench.output_throughput > 1.1 * fixed.bench.output_throughput


def test_case5_pd_disaggregation_raises_throughput_at_this_scale(run) -> None:
    unified, pd = run(case5_ep(True)), run(case5_pd(7))
    assert pd.bench.output_throughput > unified.bench.output_throughput


@pytest.mark.parametrize("name", list(SMALL_PD))
def test_pd_disaggregation_raises_ttft_in_the_smaller_cases(run, name: str) -> None:
    # Every request now waits for a prefill pool of half the GPUs and a KV transfer: median TTFT x1.2 (batch)
    # to x15 (coding) at seed 11, within 6% of that at seeds 12 and 13 but for coding (x14 to x24).
    unified, split = (run(s) for s in small_pd_pair(name))
    assert split.bench.median_ttft_ms > unified.bench.median_ttft_ms


@pytest.mark.parametrize("name", ["document-qa-rag-round0", "nightly-batch-round0"])
def test_pd_disaggregation_lowers_throughput_where_the_halved_prefill_pool_binds(run, name: str) -> None:
    # RAG's 68:1 prompts and the batch job's 256 clients queue in front of the prefill pool: 0.88x and 0.93x
    # (0.86x to 0.88x and 0.93x over seeds 11 to 13).
    unified, split = (run(s) for s in small_pd_pair(name))
    assert split.bench.output_throughput < unified.bench.output_throughput


@pytest.mark.xfail(strict=True, reason="finding: on the coding and structured-output cases PD raises throughput "
                   "(1.05x and 1.25x; seeds 11-13: 1.03-1.09x and 1.24-1.25x) instead of lowering it: decoding no "
                   "longer stalls behind prefill chunks (median TPOT 9.9 -> 9.6 ms and 15.6 -> 11.7 ms), on the coding "
                   "case two decode instances carry the batch of four at little more cost (a decode step streams "
                   "the weights once), and shared prefixes keep the halved prefill pool from binding; median TTFT "
                   "still rises x15 and x3 (docs/fidelity.md)")
@pytest.mark.parametrize("name", ["coding-assistant-round0", "structured-output-round0"])
def test_pd_disaggregation_lowers_throughput_where_decode_binds(run, name: str) -> None:
    unified, split = (run(s) for s in small_pd_pair(name))
    assert split.bench.output_throughput < unified.bench.output_throughput


def test_case5_dp_attention_prefill_nodes_keep_up_where_tp8_prefill_nodes_queue(run) -> None:
    # Not in the casebook, whose prefill nodes are TP8 without EP: in aiconfigurator's measured data a TP8
    # node prefills about 44k tokens/s of DeepSeek-V4-Flash, one with DP attention and EP8 over NVLink
    # (chunk 16384 // 8 per GPU, experts on DeepGEMM) about 127k, so at the same split the prefill queue,
    # and TTFT, shrink.
    tp8_prefill, dp_prefill = run(case5_pd(7)), run(case5_pd(7, dp_attention_prefill=True))
    assert dp_prefill.bench.output_throughput > 1.3 * tp8_prefill.bench.output_throughput
    assert dp_prefill.bench.median_ttft_ms < 0.7 * tp8_prefill.bench.median_ttft_ms


def test_case5_node_split_trades_ttft_against_itl(run) -> None:
    five, seven = run(case5_pd(5)), run(case5_pd(7))
    assert seven.bench.median_ttft_ms < five.bench.median_ttft_ms
    assert seven.bench.median_itl_ms > five.bench.median_itl_ms
