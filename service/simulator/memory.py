"""Resolved server settings and the KV pool, as SGLang 0.5.23 sizes them at startup.

Defaults follow `arg_groups/memory_hook.py` (chunked_prefill_size and decode CUDA-graph max_bs by GPU
memory; mem_fraction_static = (GPU memory - reserved) / GPU memory with reserved = 512 MB +
1.5 MB per activation token + TP/8 GB + graph buffers, floored at 10 GB on GPUs above 60 GB) and
`schedule_policy.py` (max_prefill_tokens 16384, page size 1 on CUDA).
"""

from __future__ import annotations

from dataclasses import dataclass

from service.domain import AttentionKind, Hardware, ModelSpec, ServerConfig, dtype_bytes

GIB = 1024**3
MIB = 1024**2
DEFAULT_MAX_PREFILL_TOKENS = 16384
# `arg_groups/speculative_hook.py` _handle_eagle_family: EAGLE/EAGLE3/NEXTN/STANDALONE reset an unset
# --max-running-requests to 48 ("Max running requests is reset to 48 for speculative decoding").
SPECULATIVE_MAX_RUNNING = 48
SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
# What lives outside the static pool, in (1 - mem_fraction_static) x HBM (`model_executor/model_runner.py`
# sizes the KV pool as available memory minus that share): the attention backends' constant metadata
# (512 MB, `memory_hook.py`'s own constant) and decode CUDA-graph buffers (2 MB per captured batch size,
# `memory_hook.py` reserve_for_graph_mb), plus the activations of the largest forward pass and the
# sampler's float32 logits and probabilities for the largest decode batch (computed from the model below).
ATTENTION_METADATA_BYTES = 512 * MIB
GRAPH_BYTES_PER_BATCH = 2 * MIB
# Weight share an EAGLE3 draft head adds (one decoder layer plus its projections) relative to the target.
DRAFT_WEIGHT_SHARE = 0.03


# Share of a node's host memory free for HiCache pools once the OS, the servers' processes and their pinned
# buffers are up, and SGLang's own reserve (`mem_cache/pool_host/base.py` HICACHE_HOST_MEMORY_RESERVE_BYTES).
HOST_FREE_SHARE = 0.8
HICACHE_HOST_RESERVE_GIB = 10


class ServerStartError(ValueError):
    """The server would not start (weights do not fit, no room for any KV cache, or no activation headroom)."""


class WeightsDoNotFit(ServerStartError):
    """The weights leave no room for a KV cache in the static pool: no start on any machine of this GPU."""


class HostMemoryShort(ServerStartError):
    """The HiCache host pool asks for more host memory than the node leaves this server."""


@dataclass(frozen=True, slots=True)
class ResolvedServer:
    """One server instance's effective scheduler settings and KV pool."""

    chunked_prefill_size: int | None
    max_prefill_tokens: int
    max_running_requests: int
    mem_fraction_static: float
    page_size: int
    schedule_conservativeness: float
    pool_tokens: int
    kv_bytes_per_token: float
    kv_bytes_per_gpu_token: float
    weights_per_gpu_bytes: float
    attention_dp: int
    world_size: int

    @property
    def rank_pool_tokens(self) -> int:
        """The pool one scheduler holds: under DP attention each rank has its own scheduler and pool (the
        server's `pool_tokens` is their sum), and SGLang bounds a request by its rank's pool."""
        return self.pool_tokens // max(self.attention_dp, 1)

    @property
    def device_pool_bytes(self) -> float:
        """The KV pool's bytes over all of the server's GPUs: each attention-DP group holds its share of the
        tokens, each GPU its heads of them (an MLA latent is replicated on every GPU of a group)."""
        return self.pool_tokens / max(self.attention_dp, 1) * self.kv_bytes_per_gpu_token * self.world_size


# SGLang refuses a prompt of `max_req_len - 5` tokens or more (`validate_input_length`).
PROMPT_MARGIN = 5


def request_bound(model: ModelSpec, resolved: ResolvedServer, context_length: object) -> int:
    """SGLang's `max_req_len` (`managers/tp_worker.py`): min(context length, one scheduler's KV pool) - 1."""
    return min(context_window(model, context_length), resolved.rank_pool_tokens) - 1


def context_window(model: ModelSpec, context_length: object) -> int:
    """The server's context length: the model's `max_position_embeddings`, or a smaller `--context-length`."""
    if isinstance(context_length, int | float) and not isinstance(context_length, bool) and context_length > 0:
        return min(model.max_context, int(context_length))
    return model.max_context


def default_chunked_prefill(hbm_gb: float) -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda-graph max_bs) by GPU memory, from `memory_hook.py`."""
    if hbm_gb < 20:
        return 2048, 8
    if hbm_gb < 60:
        return 4096, 32
    if hbm_gb < 160:
        return 8192, 256
    return 16384, 512


def default_mem_fraction(hbm_gb: float, server: ServerConfig, chunk: int | None, max_prefill: int,
                         graph_bs: int) -> float:
    """mem_fraction_static when unset: the activation and graph reserve subtracted from GPU memory."""
    gpu_mb = hbm_gb * 1024
    activation_tokens = max(chunk if chunk and chunk > 0 else max_prefill, 2048)
    reserved = 512 + activation_tokens * 1.5 + server.tp_size * server.pp_size / 8 * 1024 + graph_bs * 2
    if gpu_mb > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mb - reserved) / gpu_mb, 3)


def weights_per_gpu(model: ModelSpec, server: ServerConfig) -> float:
    """Weight bytes on each GPU: dense parts split by TP, experts split by EP, redundant experts added."""
    total = model.weight_bytes(server.weight_dtype)
    world = max(server.tp_size * server.pp_size, 1)
    if server.speculative_algorithm:
        total *= 1 + DRAFT_WEIGHT_SHARE
    if model.is_moe and model.num_experts and server.ep_num_redundant_experts:
        expert_bytes = _expert_weight_bytes(model, server)
        total += expert_bytes * server.ep_num_redundant_experts / model.num_experts
    return total / world


def _expert_weight_bytes(model: ModelSpec, server: ServerConfig) -> float:
    per_expert = 3 * model.hidden_size * (model.moe_intermediate_size or model.intermediate_size)
    return per_expert * model.num_experts * model.num_layers * dtype_bytes(server.weight_dtype)


def kv_bytes_per_gpu_token(model: ModelSpec, server: ServerConfig, attention_tp: int) -> float:
    """KV bytes one token costs on one GPU: GQA heads split over attention TP, MLA latent replicated."""
    full = model.kv_bytes_per_token(server.kv_dtype)
    if model.attention is AttentionKind.MLA:
        return float(full)
    return full / max(min(attention_tp, model.num_kv_heads), 1)


def activation_bytes_per_token(model: ModelSpec, server: ServerConfig) -> float:
    """Peak live activation bytes per prefill token on one GPU (BF16 activations, one layer at a time).

    Residual, normed input and layer output (3 x hidden), the QKV projection and attention output split
    over attention TP, the MLP's gate/up output and activation (3 x intermediate / TP; for MoE, the routed
    copies of each token over its experts), and an FP8 activation-quant buffer when weights are FP8.
    """
    tp = max(server.tp_size, 1)
    attention_tp = max(tp // max(server.attention_dp_size, 1), 1)
    q = model.num_attention_heads * model.head_dim
    kv = 2 * max(model.num_kv_heads, 1) * model.head_dim
    if model.is_moe:
        inter: float = (model.moe_intermediate_size or model.intermediate_size) * max(model.experts_per_token, 1)
        ep = max(server.ep_size, 1)
        inter = inter / max(tp // ep, 1)
    else:
        inter = model.intermediate_size / tp
    width = 3 * model.hidden_size + (q + kv) / attention_tp + q / attention_tp + 3 * inter
    quant = max(model.hidden_size, inter) if server.weight_dtype == "fp8" else 0.0
    return 2.0 * width + quant


def headroom_needed_bytes(model: ModelSpec, server: ServerConfig, pass_tokens: int, graph_bs: int,
                          max_running: int) -> float:
    """Memory one GPU needs outside the static pool: activations, graph buffers, metadata and sampler."""
    sampler = 2 * 4 * model.vocab_size * min(max_running, graph_bs if graph_bs else max_running)
    return (pass_tokens * activation_bytes_per_token(model, server) + graph_bs * GRAPH_BYTES_PER_BATCH
            + ATTENTION_METADATA_BYTES + sampler)


def check_headroom(model: ModelSpec, hbm_gb: float, server: ServerConfig, frac: float, pass_tokens: int,
                   graph_bs: int, max_running: int) -> None:
    """Raise `ServerStartError` (CUDA out of memory at start) when the non-static share cannot hold a pass.

    SGLang captures CUDA graphs and runs a profiling forward at start, so a too-large mem-fraction-static
    fails there, before any request; a larger pool alone never causes retractions.
    """
    budget = hbm_gb * GIB * (1.0 - frac)
    needed = headroom_needed_bytes(model, server, pass_tokens, graph_bs, max_running)
    if needed > budget:
        raise ServerStartError(
            f"CUDA out of memory at start: mem-fraction-static {frac:.2f} leaves {budget / GIB:.2f} GiB of "
            f"{hbm_gb:.0f} GiB per GPU outside the static pool, but a {pass_tokens}-token forward pass, CUDA "
            f"graphs for batch {graph_bs} and the sampler need {needed / GIB:.2f} GiB")


def resolve_server(model: ModelSpec, hardware: Hardware, server: ServerConfig) -> ResolvedServer:
    """Effective settings and pool size of one server instance; raises ServerStartError if it can't start."""
    spec = hardware.spec
    chunk_default, graph_bs = default_chunked_prefill(spec.hbm_gb)
    chunk = server.chunked_prefill_size if server.chunked_prefill_size is not None else chunk_default
    chunk_size = None if chunk is None or chunk <= 0 else chunk
    whole_chunk = chunk_size  # the memory defaults are derived before the DP-attention division
    attention_dp = max(server.attention_dp_size, 1)
    conservativeness = server.schedule_conservativeness if server.schedule_conservativeness is not None else 1.0
    if attention_dp > 1:
        # `arg_groups/parallel_hook.py` _handle_data_parallelism: under DP attention every rank's scheduler
        # chunks at chunked_prefill_size // attn_dp_size and schedules 0.3x as conservatively.
        chunk_size = max(chunk_size // attention_dp, 1) if chunk_size else None
        conservativeness *= 0.3
    max_prefill = server.max_prefill_tokens or DEFAULT_MAX_PREFILL_TOKENS
    if server.max_running_requests:
        graph_bs = min(graph_bs, server.max_running_requests)
    frac = server.mem_fraction_static or default_mem_fraction(spec.hbm_gb, server, whole_chunk, max_prefill,
                                                                   graph_bs)
    if server.cuda_graph_max_bs:
        graph_bs = server.cuda_graph_max_bs
    attention_tp = max(server.tp_size // attention_dp, 1)
    weights = weights_per_gpu(model, server)
    free = spec.hbm_gb * GIB * frac - weights
    if free <= 0:
        raise WeightsDoNotFit(
            f"{model.name} needs {weights / GIB:.1f} GiB of weights per GPU but mem-fraction-static {frac:.2f} "
            f"of {spec.hbm_gb:.0f} GiB leaves {spec.hbm_gb * frac:.1f} GiB (tp-size {server.tp_size})")
    per_token = kv_bytes_per_gpu_token(model, server, attention_tp)
    state = model.linear_state_bytes_per_request / max(attention_tp, 1)
    page = server.page_size or 1
    pool = int(free / per_token) // page * page * attention_dp
    if pool < page * 16:
        raise WeightsDoNotFit(f"KV cache pool too small ({pool} tokens) for {model.name}")
    max_running = server.max_running_requests or _default_max_running(model, server, pool)
    if state:
        max_running = min(max_running, int(free * 0.1 / state) * attention_dp or 1)
    if server.mem_fraction_static:
        check_headroom(model, spec.hbm_gb, server, frac, chunk_size or max_prefill, graph_bs,
                       max(max_running // attention_dp, 1))
    return ResolvedServer(
        chunked_prefill_size=chunk_size, max_prefill_tokens=max_prefill, max_running_requests=max_running,
        mem_fraction_static=frac, page_size=page,
        schedule_conservativeness=conservativeness,
        pool_tokens=pool, kv_bytes_per_token=float(model.kv_bytes_per_token(server.kv_dtype)),
        kv_bytes_per_gpu_token=per_token,
        weights_per_gpu_bytes=weights, attention_dp=attention_dp,
        world_size=max(server.tp_size * server.pp_size, 1))


def server_starts(model: ModelSpec, hardware: Hardware, server: ServerConfig) -> bool:
    """Whether one instance of `server` starts on `hardware` (resolve_server raises no ServerStartError)."""
    try:
        resolve_server(model, hardware, server)
    except ServerStartError:
        return False
    return True


def _default_max_running(model: ModelSpec, server: ServerConfig, pool: int) -> int:
    if (server.speculative_algorithm or "").upper() in SPECULATIVE_ALGORITHMS:
        return SPECULATIVE_MAX_RUNNING
    return min(max(int(pool / max(model.max_context, 1) * 512), 2048), 4096)


def host_budget_bytes(hardware: Hardware, replicas_per_node: float) -> float:
    """Host memory one server's HiCache pool may take: the node's free memory (HOST_FREE_SHARE of
    `host_dram_gb`) less SGLang's reserve, split over the servers on the node (`mem_cache/pool_host/base.py`
    host_memory_budget_bytes: free memory less 10 GiB, split over the ranks)."""
    free = hardware.host_dram_gb * GIB * HOST_FREE_SHARE - HICACHE_HOST_RESERVE_GIB * GIB
    return free / max(replicas_per_node, 1.0)


def node_ranks(resolved: ResolvedServer, hardware: Hardware) -> int:
    """The server's GPU ranks on one node: all of them, or a node's worth for a server over several nodes."""
    return max(1, min(resolved.world_size, hardware.gpus_per_node))


def host_pool_tokens(resolved: ResolvedServer, server: ServerConfig, hardware: Hardware, replicas_per_node: float
                     ) -> int:
    """HiCache host pool in tokens: `--hicache-size` overrides `--hicache-ratio` x the device pool (default 2.0).

    SGLang sizes the host pool per rank (`mem_cache/pool_host/base.py`): `--hicache-size` is GB (1e9 bytes) on
    every GPU's rank, holding `size / bytes per token on that GPU` tokens, so a TP4 server with
    `--hicache-size 100` pins 400 GB; a ratio multiplies each rank's device pool.

    Raises HostMemoryShort where the pool asks for more than the node's host memory leaves the server:
    SGLang's host pool checks the free memory before it allocates ("Not enough host memory available.
    Requesting ... Please reduce the size of the hierarchical cache.") and the server does not start.
    """
    if not server.enable_hierarchical_cache:
        return 0
    # SGLang checks each rank against the free memory of its own node over the ranks there (`ranks_per_host`):
    # a server over two nodes pins half its host pool on each.
    on_node = node_ranks(resolved, hardware) / resolved.world_size
    if server.hicache_size:
        per_rank = server.hicache_size * 1e9
        tokens = per_rank / resolved.kv_bytes_per_gpu_token * max(resolved.attention_dp, 1)
        requested = per_rank * resolved.world_size * on_node
    else:
        ratio = server.hicache_ratio if server.hicache_ratio is not None else 2.0
        tokens, requested = resolved.pool_tokens * ratio, resolved.device_pool_bytes * ratio * on_node
    budget, ranks = host_budget_bytes(hardware, replicas_per_node), node_ranks(resolved, hardware)
    if requested > budget:
        servers = max(replicas_per_node, 1.0)
        raise HostMemoryShort(
            f"Not enough host memory available for the HiCache host pool: requesting {requested / 1e9:.1f} GB "
            f"({int(tokens):,} tokens over {ranks} GPU rank{'s' if ranks != 1 else ''} on the node) "
            f"but only {max(budget, 0) / 1e9:.1f} GB is free for this server "
            f"({HOST_FREE_SHARE:.0%} of hardware.host_dram_gb = {hardware.host_dram_gb:g}, less SGLang's "
            f"{HICACHE_HOST_RESERVE_GIB} GiB reserve, over {servers:g} server{'s' if servers != 1 else ''} on the "
            "node); "
            "reduce --hicache-ratio or --hicache-size (GB per GPU rank), or give hardware.host_dram_gb")
    return int(tokens)
