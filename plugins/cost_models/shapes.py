"""Per-GPU work of one forward step: bytes read from HBM, FLOPs and collective traffic.

`StepShape` turns a `ModelSpec` and a `ServerConfig` into the quantities a roofline needs for one GPU of one
server instance. It knows how SGLang shards a model: dense and attention weights split over the tensor-parallel
group (`--tp-size`), routed experts split over the expert-parallel group (`--ep-size`, each expert further split
`tp / ep` ways), attention under DP attention split only over `tp / attention_dp_size` GPUs, and KV heads split
over the attention TP group but replicated once that group is wider than the number of KV heads (MLA's single
latent head is replicated on every attention-TP rank, the reason casebook case 5 enables DP attention).
"""

from __future__ import annotations

from dataclasses import dataclass

from service import AttentionKind, ModelSpec, ServerConfig, dtype_bytes

# Activations travel between GPUs in BF16 (SGLang's all-reduce and DeepEP combine); DeepEP dispatch sends FP8.
ACTIVATION_BYTES = 2.0
# Weight quantizations that run W8A8 on FP8 tensor cores (SGLang `--quantization`).
FP8_QUANTIZATIONS = frozenset({"fp8", "w8a8_fp8", "modelopt_fp8", "fbgemm_fp8"})


@dataclass(frozen=True)
class ParameterSplit:
    """A model's parameters by how they are sharded: attention, other dense weights, routed experts."""

    attention: float
    dense: float
    experts_total: float
    experts_active: float
    num_experts: int

    @property
    def per_expert(self) -> float:
        return self.experts_total / self.num_experts if self.num_experts else 0.0


def split_parameters(model: ModelSpec) -> ParameterSplit:
    """Split `params_total` into attention, other dense weights and routed experts (sidecar totals win)."""
    heads, kv_heads, head_dim, hidden = (model.num_attention_heads, model.num_kv_heads, model.head_dim,
                                         model.hidden_size)
    if model.attention is AttentionKind.MLA:
        # q/o projections plus the latent down/up projections (DeepSeek-V3 layout, q_lora folded into q).
        per_layer = 2 * hidden * heads * head_dim + hidden * (model.kv_lora_rank + model.qk_rope_head_dim) \
            + model.kv_lora_rank * heads * head_dim * 2
    else:
        per_layer = hidden * head_dim * (2 * heads + 2 * kv_heads)
    attention = min(per_layer * model.num_layers, 0.5 * model.params_total)
    experts_total = 0.0
    experts_active = 0.0
    if model.is_moe and model.num_experts:
        moe_inter = model.moe_intermediate_size or model.intermediate_size
        experts_total = 3.0 * hidden * moe_inter * model.num_experts * model.num_layers
        # A config's layer count may include dense layers; never let experts exceed what the sidecar states.
        experts_total = min(experts_total, 0.97 * (model.params_total - attention))
        per_expert = experts_total / model.num_experts
        stated_active = model.params_active - (model.params_total - experts_total)
        experts_active = max(stated_active, per_expert * max(model.experts_per_token, 1))
        experts_active = min(experts_active, experts_total)
    dense = max(model.params_total - attention - experts_total, 0.0)
    return ParameterSplit(attention=attention, dense=dense, experts_total=experts_total,
                          experts_active=experts_active, num_experts=model.num_experts if experts_total else 0)


@dataclass(frozen=True)
class StepShape:
    """Sharding of one server instance and the per-GPU work of its steps."""

    model: ModelSpec
    server: ServerConfig
    params: ParameterSplit
    weight_bytes: float
    kv_bytes: float
    fp8_math: bool

    @classmethod
    def of(cls, model: ModelSpec, server: ServerConfig) -> StepShape:
        """The shape of `model` served with `server` (weights in FP8 when `--quantization fp8`)."""
        fp8 = (server.quantization or "").lower() in FP8_QUANTIZATIONS
        return cls(model=model, server=server, params=split_parameters(model),
                   weight_bytes=1.0 if fp8 else 2.0, kv_bytes=dtype_bytes(server.kv_dtype), fp8_math=fp8)

    # -- parallel layout ---------------------------------------------------------------------------------------

    @property
    def tp(self) -> int:
        return max(self.server.tp_size, 1)

    @property
    def attention_dp(self) -> int:
        return max(min(self.server.attention_dp_size, self.tp), 1)

    @property
    def attention_tp(self) -> int:
        return max(self.tp // self.attention_dp, 1)

    @property
    def ep(self) -> int:
        return max(min(self.server.ep_size, self.tp), 1) if self.params.num_experts else 1

    @property
    def expert_tp(self) -> int:
        """Ways each expert's weights are split (SGLang: moe_tp_size = tp_size / ep_size)."""
        return max(self.tp // self.ep, 1)

    @property
    def redundant_experts(self) -> int:
        return (self.server.ep_num_redundant_experts or 0) if self.server.enable_eplb else 0

    # -- bytes -------------------------------------------------------------------------------------------------

    def experts_touched(self, routed_tokens: int) -> float:
        """Expected share of an EP rank's experts hit by `routed_tokens` tokens under uniform top-k routing."""
        if not self.params.num_experts or routed_tokens <= 0:
            return 0.0
        k = self.params.experts_active / self.params.per_expert
        miss = max(1.0 - k / self.params.num_experts, 0.0)
        return 1.0 - miss ** routed_tokens

    def weight_bytes_read(self, tokens: int) -> float:
        """Weight bytes one GPU reads in a step whose MoE layers see `tokens` tokens from every DP rank."""
        p = self.params
        dense = p.attention / self.attention_tp + p.dense / self.tp
        slots = p.num_experts + self.redundant_experts
        experts = 0.0
        if p.num_experts:
            local_experts = slots / self.ep
            experts = local_experts * self.experts_touched(tokens) * p.per_expert / self.expert_tp
        return (dense + experts) * self.weight_bytes

    def kv_shards(self) -> int:
        """Ways one request's KV is split inside its attention-TP group."""
        if self.model.attention is AttentionKind.MLA:
            return 1
        return max(min(self.attention_tp, self.model.num_kv_heads), 1)

    def kv_bytes_read(self, context_tokens: int, requests: int) -> float:
        """KV (and linear-attention state) bytes one GPU reads to attend over `context_tokens` of context."""
        per_token = self.model.kv_bytes_per_token("bf16") / 2.0 * self.kv_bytes
        state = 2.0 * self.model.linear_state_bytes_per_request * requests  # read and write back each step
        return (per_token * context_tokens) / self.kv_shards() + state / self.attention_tp

    # -- FLOPs -------------------------------------------------------------------------------------------------

    def linear_flops(self, tokens: int) -> float:
        """GEMM FLOPs per GPU for `tokens` tokens of one attention-DP rank (balanced experts)."""
        p = self.params
        return 2.0 * tokens * (p.attention / self.attention_tp + (p.dense + p.experts_active) / self.tp)

    def lm_head_flops(self, tokens: int) -> float:
        """FLOPs per GPU of the LM head (vocabulary-parallel over the TP group) for `tokens` tokens."""
        m = self.model
        return min(2.0 * tokens * m.vocab_size * m.hidden_size / self.tp, self.linear_flops(tokens))

    def attention_flops(self, query_context_pairs: float) -> float:
        """Score and value FLOPs per GPU for the given sum over queries of the context each attends to."""
        m = self.model
        if m.attention is AttentionKind.MLA:
            per_pair = 2.0 * m.num_attention_heads * (2 * m.kv_lora_rank + m.qk_rope_head_dim)
        else:
            per_pair = 4.0 * m.num_attention_heads * m.head_dim
        return per_pair * m.kv_layers * query_context_pairs / self.attention_tp

    # -- collectives -------------------------------------------------------------------------------------------

    def allreduce_bytes(self, tokens: int) -> float:
        """Bytes of one hidden-state all-reduce for `tokens` tokens."""
        return tokens * self.model.hidden_size * ACTIVATION_BYTES

    def alltoall_bytes(self, tokens: int) -> float:
        """Bytes one GPU sends in an MoE layer's dispatch plus combine (FP8 out, BF16 back).

        A DP rank's `tokens` are shared out among its attention-TP GPUs before dispatch, so each sends its part.
        """
        k = self.params.experts_active / self.params.per_expert if self.params.num_experts else 0.0
        remote = (self.ep - 1) / self.ep
        return tokens / self.attention_tp * k * self.model.hidden_size * (1.0 + ACTIVATION_BYTES) * remote

    def alltoall_node_bytes(self, tokens: int, nodes: int) -> float:
        """Bytes one GPU sends over the node interconnect in a DeepEP normal-mode dispatch plus combine.

        Normal mode (`deepep_mode` normal, what `auto` runs for extend batches) sends a token once to every
        remote node holding one of its `k` experts and forwards it over NVLink there (DeepEP internode
        kernels), so the RDMA bytes scale with the distinct remote nodes a token reaches, not with `k`.
        """
        if nodes <= 1 or not self.params.num_experts:
            return self.alltoall_bytes(tokens)
        k = self.params.experts_active / self.params.per_expert
        remote_nodes = (nodes - 1) * (1.0 - (1.0 - 1.0 / nodes) ** k)
        return tokens / self.attention_tp * remote_nodes * self.model.hidden_size * (1.0 + ACTIVATION_BYTES)

    @property
    def a2a_backend(self) -> str | None:
        """The MoE all-to-all backend (`--moe-a2a-backend`), or None for SGLang's gather/all-reduce path.

        With `none` (the default) an EP MoE layer sees every token of every DP-attention rank: the hidden
        states are gathered over the whole TP group and the output all-reduced back
        (`layers/moe/utils.py` is_moe_input_scattered_across_dp_ranks is False); an all-to-all backend
        such as DeepEP sends each token only to the ranks holding its experts.
        """
        backend = (self.server.moe_a2a_backend or "none").lower()
        return None if backend == "none" or self.ep <= 1 or not self.params.num_experts else backend

    @property
    def two_batch_overlap(self) -> bool:
        """`--enable-two-batch-overlap`: two micro-batches, one's all-to-all hidden behind the other's math."""
        return self.a2a_backend is not None and bool(self.server.extra.get("--enable-two-batch-overlap"))

    @property
    def moe_layers(self) -> int:
        return self.model.num_layers if self.params.num_experts else 0
