"""The `roofline` cost model: analytical step times for one SGLang server instance, always available.

A step costs a fixed scheduler/launch overhead, plus the slower of (bytes read from HBM over achieved
bandwidth) and (FLOPs over achieved tensor-core rate) on one GPU, plus the collectives SGLang runs per layer
(tensor-parallel all-reduce over NVLink, expert-parallel all-to-all for MoE), which do not overlap the math.
Every constant is below with the reason for its value; docs/cost-models.md explains the model and its
calibration to the casebook's clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import msgspec

from plugins.cost_models.shapes import StepShape
from service import CostModel, GpuSpec, Hardware, ModelSpec, ServerConfig, StepCostModel

# Achieved fraction of datasheet HBM bandwidth in decode (weight GEMV and paged attention stream memory).
HBM_EFFICIENCY = 0.80
# Decode math runs at the same achieved fraction as its memory traffic, so the compute/bandwidth crossover
# (the casebook's threshold batch size: dense BF16 TFLOP/s over HBM TB/s, 206 on H200 and 295 on H100) stays
# exactly where the casebook's calculation puts it.
DECODE_MATH_EFFICIENCY = HBM_EFFICIENCY
# Prefill reaches 60% of peak (casebook case 2's break-even uses "60% effective"; a Qwen3.6-27B-shaped
# decoder measured on one H200 runs its extend passes at 56-60% of dense BF16 peak from 512 to 8192 tokens,
# tests/data/h200/). The rate does not fall on smaller chunks: the same run's gate/up GEMM reaches its
# large-batch rate by 256 tokens, and below that the step is bound by reading the weights, which the roofline's
# max(bytes, FLOPs) already prices. Smaller chunks cost more through what each chunk repeats: the weight read
# when it is not hidden, the prefix's KV, the per-batch overhead.
PREFILL_MATH_EFFICIENCY = 0.60
# Achieved fraction of one direction of NVLink (datasheet figures are bidirectional) for NCCL/custom all-reduce.
LINK_EFFICIENCY = 0.80
# One-shot custom all-reduce latency inside a node: a base plus a step per peer (SGLang custom_all_reduce.cu).
ALLREDUCE_BASE_SECONDS = 3e-6
ALLREDUCE_PER_PEER_SECONDS = 1e-6
# Crossing nodes (InfiniBand) costs a network round trip per collective.
INTERNODE_LATENCY_SECONDS = 15e-6
# DeepEP-style dispatch plus combine launch and synchronisation per MoE layer.
ALLTOALL_BASE_SECONDS = 10e-6
# Share of the shorter of (math, all-to-all) two-batch overlap cannot hide: the first micro-batch's dispatch,
# the last one's combine and the efficiency halved GEMMs lose.
TBO_EXPOSED_SHARE = 0.15
# Scheduler, sampling and CUDA-graph replay per decode step left after SGLang's overlap scheduler.
DECODE_OVERHEAD_SECONDS = 0.35e-3
# Prefill (extend) runs without CUDA graphs: scheduling, radix-tree match, metadata and launches per batch.
PREFILL_OVERHEAD_SECONDS = 1.0e-3
# Decode batches above cuda-graph max bs run eagerly: kernels per layer times launch cost bound the step.
EAGER_KERNELS_PER_LAYER = 14
KERNEL_LAUNCH_SECONDS = 5e-6
DEFAULT_CUDA_GRAPH_MAX_BS = 256
# EAGLE3's draft head: one decoder layer, the fused feature projection and a 32k-token draft vocabulary.
EAGLE_DRAFT_VOCAB = 32000
DRAFT_PASS_OVERHEAD_SECONDS = 0.1e-3
# The casebook's figures are simulated and run slower than measured H100/H200 kernels: its case 1 round 0
# (Qwen3.6-27B BF16, TP8 H200, 25 requests of ~2,500 tokens) reports a 28 ms median ITL where this model's
# physical estimate is 3.5 ms. `roofline` answers on the physical clock; `roofline-casebook-clock`
# multiplies every time by this one factor, so every ratio (FP8 vs BF16, TP2 vs TP8, chunk sizes, threshold
# batch) stays physical and only the clock is the casebook's: use it to compare with the casebook's printed
# figures, never to size hardware.
CASEBOOK_CLOCK = 8.0
PHYSICAL_CLOCK = 1.0


@dataclass(frozen=True)
class RooflineStep(StepCostModel):
    """Roofline step times of one server instance (see the module constants for every assumption)."""

    name: ClassVar[str] = "roofline"
    shape: StepShape
    gpu: GpuSpec
    hardware: Hardware
    clock: float = PHYSICAL_CLOCK

    # -- rates -------------------------------------------------------------------------------------------------

    @property
    def peak_flops(self) -> float:
        """Dense tensor-core FLOP/s of one GPU: FP8 for W8A8 FP8 weights on GPUs with FP8 units."""
        fp8 = self.shape.fp8_math and self.gpu.supports_fp8
        return (self.gpu.fp8_tflops if fp8 else self.gpu.bf16_tflops) * 1e12

    @property
    def hbm_bytes_per_second(self) -> float:
        return self.gpu.hbm_bandwidth_tbps * 1e12 * HBM_EFFICIENCY

    def link_bytes_per_second(self, group: int) -> float:
        """Achieved per-GPU bandwidth of a collective over `group` GPUs (NVLink, PCIe or the node interconnect)."""
        if group > self.hardware.gpus_per_node:
            return self.hardware.interconnect_gbps * 1e9 * LINK_EFFICIENCY
        link = self.gpu.nvlink_gbps / 2 if self.gpu.nvlink_gbps else self.gpu.pcie_gbps
        return link * 1e9 * LINK_EFFICIENCY

    def link_latency(self, group: int) -> float:
        base = ALLREDUCE_BASE_SECONDS + ALLREDUCE_PER_PEER_SECONDS * (group - 1)
        return base + (INTERNODE_LATENCY_SECONDS if group > self.hardware.gpus_per_node else 0.0)

    # -- collectives -------------------------------------------------------------------------------------------

    def allreduce_seconds(self, group: int, nbytes: float) -> float:
        """Ring all-reduce: latency plus 2(n-1)/n of the payload over the link."""
        if group <= 1:
            return 0.0
        return self.link_latency(group) + 2 * (group - 1) / group * nbytes / self.link_bytes_per_second(group)

    def collective_seconds(self, tokens: int, prefill: bool = False) -> float:
        """Per-step communication for `tokens` tokens of one attention-DP rank, summed over layers."""
        s = self.shape
        layers = s.model.num_layers
        attention = self.allreduce_seconds(s.attention_tp, s.allreduce_bytes(tokens)) * layers
        if s.a2a_backend is not None:
            # An all-to-all backend swaps the MLP all-reduce for dispatch + combine (`--moe-a2a-backend`).
            return attention + self.moe_alltoall_seconds(tokens, prefill)
        # Dense MLP, MoE sharded by TP, or EP without an all-to-all backend: one all-reduce per layer over the
        # whole TP group; under DP attention the gather/scatter moves every rank's tokens, the same bytes as an
        # all-reduce of them (`layers/moe/utils.py` is_moe_input_scattered_across_dp_ranks).
        routed = tokens * s.attention_dp
        return attention + self.allreduce_seconds(s.tp, s.allreduce_bytes(routed)) * layers

    def moe_alltoall_seconds(self, tokens: int, prefill: bool) -> float:
        """DeepEP dispatch + combine over every MoE layer for `tokens` tokens of one attention-DP rank.

        `--deepep-mode auto` (`layers/moe/utils.py` DeepEPMode.resolve) runs normal kernels for batches with an
        extend (node-deduplicated RDMA, then NVLink) and low-latency kernels for decode (every (token, expert)
        pair over RDMA); 0 without an all-to-all backend.
        """
        s = self.shape
        if s.a2a_backend is None:
            return 0.0
        per_node = max(self.hardware.gpus_per_node, 1)
        nodes = -(-s.ep // per_node)
        if prefill:
            nbytes = s.alltoall_node_bytes(tokens, nodes)
            per_layer = ALLTOALL_BASE_SECONDS + self.link_latency(s.ep) + nbytes / self.link_bytes_per_second(s.ep)
            return per_layer * s.moe_layers
        return self.low_latency_alltoall_seconds(tokens, per_node) * s.moe_layers

    def low_latency_alltoall_seconds(self, tokens: int, per_node: int) -> float:
        """One MoE layer's DeepEP low-latency dispatch + combine for `tokens` tokens of one attention-DP rank.

        Every (token, expert) pair is written straight into its expert's rank, all peers at once (one QP per
        local expert), so the latency does not grow with the number of peers; only the pairs whose expert
        sits on another node cross the NIC, and the NVLink share runs beside them. Against DeepEP's published
        low-latency table (docs/legacy.md: H800, CX7 400 Gb/s, 128 tokens, hidden 7168, top-8) this gives
        303, 441, 510, 544 and 561 us at EP16 to EP256 against the published 313, 428, 487, 561 and 554.
        """
        s = self.shape
        pairs = s.alltoall_bytes(tokens) * s.ep / max(s.ep - 1, 1)  # every pair, the rank's own included
        off_node = max(s.ep - per_node, 0) / s.ep
        on_node = (min(per_node, s.ep) - 1) / s.ep
        seconds = pairs * on_node / self.link_bytes_per_second(min(per_node, s.ep))
        latency = ALLTOALL_BASE_SECONDS + ALLREDUCE_BASE_SECONDS
        if off_node:
            seconds = max(seconds, pairs * off_node / self.link_bytes_per_second(s.ep))
            latency += INTERNODE_LATENCY_SECONDS
        return latency + seconds

    def overlap_alltoall(self, step: float, alltoall: float) -> float:
        """A step under `--enable-two-batch-overlap`: one micro-batch's all-to-all runs under the other's math.

        `batch_overlap/two_batch_overlap.py` splits the batch in two and interleaves their stages, so the
        step takes the longer of compute and communication plus the part that cannot overlap
        (`TBO_EXPOSED_SHARE` of the shorter: the first dispatch, the last combine, halved GEMMs).
        """
        if not self.shape.two_batch_overlap or alltoall <= 0:
            return step
        rest = max(step - alltoall, 0.0)
        return max(rest, alltoall) + TBO_EXPOSED_SHARE * min(rest, alltoall)

    # -- steps -------------------------------------------------------------------------------------------------

    def pass_physical(self, tokens: int, attention_pairs: float, kv_reads: list[tuple[int, int]],
                      math_efficiency: float, prefill: bool = False, logit_tokens: int | None = None) -> float:
        """Unscaled seconds of one forward pass over `tokens` tokens of one attention-DP rank.

        `attention_pairs` sums, over query tokens, the context each attends to; `kv_reads` lists
        (context tokens, requests) whose KV the pass streams from HBM; `logit_tokens` (every token when None)
        are the tokens the LM head runs on.
        """
        s = self.shape
        nbytes = s.weight_bytes_read(tokens * s.attention_dp)
        nbytes += sum(s.kv_bytes_read(context, requests) for context, requests in kv_reads)
        flops = s.linear_flops(tokens) + s.attention_flops(attention_pairs)
        if logit_tokens is not None and logit_tokens < tokens:
            flops -= s.lm_head_flops(tokens - logit_tokens)
        gpu = max(nbytes / self.hbm_bytes_per_second, flops / (self.peak_flops * math_efficiency))
        step = gpu + self.collective_seconds(tokens, prefill)
        return self.overlap_alltoall(step, self.moe_alltoall_seconds(tokens, prefill))

    def decode_physical(self, batch: int, context_tokens: int, query_tokens: int = 1) -> float:
        """Unscaled seconds of a decode (or verify) step: `query_tokens` tokens per request, CUDA-graphed."""
        tokens = batch * query_tokens
        step = self.pass_physical(tokens, float(context_tokens) * query_tokens, [(context_tokens, batch)],
                                  DECODE_MATH_EFFICIENCY)
        if tokens > self.cuda_graph_max_bs():
            # Eager launches: the step cannot finish before its kernels are launched.
            step = max(step, EAGER_KERNELS_PER_LAYER * KERNEL_LAUNCH_SECONDS * self.shape.model.num_layers)
        return DECODE_OVERHEAD_SECONDS + step

    def cuda_graph_max_bs(self) -> int:
        configured = self.shape.server.cuda_graph_max_bs
        return configured if configured else DEFAULT_CUDA_GRAPH_MAX_BS

    def prefill_physical(self, new_tokens: int, cached_tokens: int, requests: int, decode_batch: int = 0,
                         decode_context: int = 0) -> float:
        """Unscaled seconds of an extend batch, optionally carrying a decode batch (mixed chunk)."""
        n = max(new_tokens, 1)
        r = max(min(requests, n), 1)
        cached = max(cached_tokens, 0)
        per_new, per_cached = n / r, cached / r
        # Causal attention: each new token attends to the cached prefix and to the new tokens before it.
        pairs = r * (per_new * per_cached + per_new * (per_new + 1) / 2) + decode_context
        tokens = n + decode_batch
        reads = [(cached + n, r), (decode_context, decode_batch)]
        # An extend batch computes logits only for each request's last token (SGLang's LogitsProcessor
        # prunes to the last positions unless logprobs of the prompt are asked for).
        return PREFILL_OVERHEAD_SECONDS + self.pass_physical(tokens, pairs, reads, PREFILL_MATH_EFFICIENCY,
                                                             prefill=True, logit_tokens=r + decode_batch)

    def prefill_seconds(self, new_tokens: int, cached_tokens: int, requests: int) -> float:
        return self.prefill_physical(new_tokens, cached_tokens, requests) * self.clock

    def decode_seconds(self, batch: int, context_tokens: int) -> float:
        return self.decode_physical(max(batch, 1), max(context_tokens, 0)) * self.clock

    def mixed_seconds(self, new_tokens: int, cached_tokens: int, requests: int, batch: int,
                      context_tokens: int) -> float:
        """One forward pass carrying a prefill chunk and a decode batch (`--enable-mixed-chunk`): weights are
        read once, so it costs less than a prefill step followed by a decode step."""
        if batch <= 0:
            return self.prefill_seconds(new_tokens, cached_tokens, requests)
        mixed = self.prefill_physical(new_tokens, cached_tokens, requests, batch, max(context_tokens, 0))
        return max(mixed, self.decode_physical(batch, max(context_tokens, 0))) * self.clock

    def speculative_step_seconds(self, batch: int, context_tokens: int, draft_tokens: int, draft_steps: int,
                                 topk: int = 1) -> float:
        """An EAGLE round: `draft_steps` draft passes over `batch x topk` tokens, then one target verify of
        `draft_tokens` tokens per request (tree attention reads each request's KV once)."""
        batch = max(batch, 1)
        verify = self.decode_physical(batch, max(context_tokens, 0), query_tokens=max(draft_tokens, 1))
        return (verify + max(draft_steps, 0) * self.draft_pass_physical(batch * max(topk, 1),
                                                                          context_tokens)) * self.clock

    def draft_pass_physical(self, tokens: int, context_tokens: int) -> float:
        """One pass of the EAGLE3 draft head (sharded like the target) over `tokens` tokens."""
        s = self.shape
        m = s.model
        per_layer = (s.params.attention + s.params.dense) / max(m.num_layers, 1)
        params = per_layer + 3 * m.hidden_size * m.hidden_size + EAGLE_DRAFT_VOCAB * m.hidden_size
        nbytes = params * 2.0 / s.tp + s.kv_bytes_read(context_tokens, 1) / max(m.kv_layers, 1)
        flops = 2.0 * params * tokens / s.tp
        gpu = max(nbytes / self.hbm_bytes_per_second, flops / (self.peak_flops * DECODE_MATH_EFFICIENCY))
        return DRAFT_PASS_OVERHEAD_SECONDS + gpu + self.allreduce_seconds(s.tp, s.allreduce_bytes(tokens))

    def transfer_seconds(self, nbytes: float, gbps: float) -> float:
        """Time to move `nbytes` over a `gbps` GB/s link (HiCache, PD KV transfer), on this model's clock."""
        return max(nbytes, 0.0) / (max(gbps, 1e-9) * 1e9) * self.clock

    def expert_share(self, batch: int, context_tokens: int) -> float:
        """Share of a decode step spent in MoE layers (experts and their all-to-all), for EP imbalance."""
        s = self.shape
        if not s.moe_layers:
            return 0.0
        routed = max(batch, 1) * s.attention_dp
        expert_bytes = s.weight_bytes_read(routed) - s.weight_bytes_read(0)
        expert_flops = 2.0 * max(batch, 1) * s.params.experts_active / s.tp
        moe = max(expert_bytes / self.hbm_bytes_per_second,
                  expert_flops / (self.peak_flops * DECODE_MATH_EFFICIENCY))
        moe += self.moe_alltoall_seconds(max(batch, 1), prefill=False)
        return min(moe / self.decode_physical(max(batch, 1), max(context_tokens, 0)), 1.0)

    def memo_key(self) -> object:
        s = self.shape
        return ("roofline", self.clock, msgspec.json.encode(s.model), msgspec.json.encode(s.server),
                msgspec.json.encode(self.hardware))

    def describe(self) -> str:
        clock = {CASEBOOK_CLOCK: "the casebook's clock (x8)", PHYSICAL_CLOCK: "physical clock"}.get(
            self.clock, f"clock x{self.clock:g}")
        return f"analytical roofline on {self.gpu.name}, {clock}"

    def bound_tokens_per_second(self) -> float:
        """Generated tokens/s no step sequence can beat: every token costs 2 x active params FLOPs at peak."""
        return self.shape.tp * self.peak_flops / (2.0 * self.shape.model.params_active)

    def threshold_batch_size(self) -> float:
        """Decode batch where weight math time equals weight read time (the casebook's threshold batch)."""
        s = self.shape
        per_token_flops = s.linear_flops(1) / (self.peak_flops * DECODE_MATH_EFFICIENCY)
        weight_seconds = s.weight_bytes_read(0) / self.hbm_bytes_per_second if not s.moe_layers else \
            s.weight_bytes_read(10**9) / self.hbm_bytes_per_second
        return weight_seconds / per_token_flops if per_token_flops > 0 else math.inf


class RooflineCostModel(CostModel):
    """Analytical step costs from datasheet figures; needs nothing installed."""

    name: ClassVar[str] = "roofline"
    description: ClassVar[str] = ("Analytical roofline (HBM bytes vs tensor-core FLOPs, NVLink collectives, "
                                  "scheduler overhead) on the physical clock")

    def __init__(self, clock: float = PHYSICAL_CLOCK) -> None:
        self.clock = clock

    def available(self) -> bool:
        return True

    def bind(self, model: ModelSpec, hardware: Hardware, server: ServerConfig) -> RooflineStep:
        return RooflineStep(shape=StepShape.of(model, server), gpu=hardware.spec, hardware=hardware,
                            clock=self.clock)


class CasebookClockCostModel(RooflineCostModel):
    """The roofline slowed to the casebook's clock, to set simulated figures beside the casebook's printed ones."""

    name: ClassVar[str] = "roofline-casebook-clock"
    description: ClassVar[str] = ("Analytical roofline x8: the casebook's simulated clock, for side-by-side "
                                  "comparison with its printed figures; not for sizing hardware")

    def __init__(self) -> None:
        super().__init__(clock=CASEBOOK_CLOCK)
