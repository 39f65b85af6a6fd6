"""Compiling aiconfigurator-core engines for a ModelSpec and ServerConfig, cached per process.

aiconfigurator-core reads a Hugging Face `config.json` (offline: `HF_HUB_OFFLINE=1` and a local folder or a
model it bundles). The model's own shipped folder is tried first; a dense or MoE GQA model without one gets a
Qwen3-shaped config written from its ModelSpec; anything else is mapped to the bundled model of the same kind
and nearest size, and the mapping is reported in the step model's provenance.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import json
import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from plugins.cost_models.shapes import FP8_QUANTIZATIONS
from service import (
    AttentionKind,
    Hardware,
    ModelSpec,
    ServerConfig,
    bundled_configs,
    model_from_config,
    shipped_models,
)

# aiconfigurator-core's import name: its successor installs as `aisimulate_core` (0.12's `aiconfigurator_core`
# warns that its name goes away), so the successor's name is tried first.
AIC_MODULES = ("aisimulate_core", "aiconfigurator_core")


def aic_module_name() -> str | None:
    """The installed aiconfigurator-core module name, or None when neither is importable."""
    for name in AIC_MODULES:
        if name in sys.modules:
            if sys.modules[name] is not None:
                return name
            continue
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


def aic_import(path: str = "") -> Any:
    """aiconfigurator-core's module `path` (e.g. "sdk.operations") under whichever name is installed."""
    name = aic_module_name()
    if name is None:
        raise ImportError(f"none of {', '.join(AIC_MODULES)} is installed")
    return importlib.import_module(f"{name}.{path}" if path else name)

# aiconfigurator-core's system names for the GPUs it has SGLang data for.
AIC_SYSTEMS: dict[str, str] = {"H100-SXM": "h100_sxm", "H200-SXM": "h200_sxm"}
# Bundled models by kind, with total parameters, for mapping a model aiconfigurator cannot read.
BUNDLED_BY_KIND: dict[tuple[str, bool], list[tuple[str, float]]] = {
    ("gqa", False): [("Qwen/Qwen3-8B", 8.2e9), ("Qwen/Qwen3-32B", 32.8e9)],
    ("gqa", True): [("Qwen/Qwen3-30B-A3B", 30.5e9), ("Qwen/Qwen3-235B-A22B", 235e9)],
    ("hybrid_linear", False): [("Qwen/Qwen3.5-27B", 27e9)],
    ("hybrid_linear", True): [("Qwen/Qwen3.5-35B-A3B", 35e9), ("Qwen/Qwen3.5-122B-A10B", 122e9),
                              ("Qwen/Qwen3.5-397B-A17B", 397e9)],
    ("mla", True): [("sgl-project/DeepSeek-V4-Flash-FP8", 284e9), ("deepseek-ai/DeepSeek-V3", 671e9)],
}


@dataclass(frozen=True)
class EngineKey:
    """What a compiled engine depends on: the config it read, the system, the parallel layout and quant modes."""

    model_path: str
    system: str
    tp: int
    attention_dp: int
    moe_tp: int
    moe_ep: int
    gemm_quant: str | None
    moe_quant: str | None
    kv_quant: str | None
    fmha_quant: str | None


@dataclass
class CompiledEngine:
    """A compiled engine, or why there is none; `source` says which config answered, `proxy` the bundled
    model it measured when that is another model (the nearest of the same kind)."""

    engine: Any | None
    source: str
    error: str = ""
    proxy: str | None = None
    # The engine compiled but has no data for a typical decode and prefill: it answers only the steps it can.
    partial: bool = False


_ENGINES: dict[EngineKey, CompiledEngine] = {}


def aic_system(hardware: Hardware) -> str | None:
    """aiconfigurator-core's system name for this hardware, or None when it has no SGLang data for it."""
    return AIC_SYSTEMS.get(hardware.spec.name)


def quant_modes(server: ServerConfig, fmha_quant: str | None) -> dict[str, str | None]:
    """aiconfigurator quant modes for SGLang's `--quantization` and `--kv-cache-dtype`.

    FP8 KV runs FP8 attention (FlashAttention-3 FP8 kernels) unless `fmha_quant` says otherwise.
    """
    fp8_weights = (server.quantization or "").lower() in FP8_QUANTIZATIONS
    fp8_kv = server.kv_dtype.startswith("fp8")
    return {
        "gemm_quant_mode": "fp8" if fp8_weights else None,  # SGLang online W8A8 FP8 (per-tensor)
        "moe_quant_mode": "fp8_block" if fp8_weights else None,
        "kvcache_quant_mode": "fp8" if fp8_kv else None,
        "fmha_quant_mode": fmha_quant or ("fp8" if fp8_kv else None),
    }


def config_candidates(model: ModelSpec) -> list[tuple[str, str]]:
    """Configs to try in order, each as (path or bundled name, provenance note)."""
    found: list[tuple[str, str]] = []
    shipped = shipped_models().get(model.name)
    if shipped is not None and (shipped / "config.json").exists():
        found.append((str(shipped), f"{model.name}'s shipped config.json"))
    elif model.name in bundled_configs():
        found.append((model.name, f"{model.name}'s own config.json as aiconfigurator-core bundles it"))
    elif model.attention is AttentionKind.GQA:
        found.append((synthesized_config(model), f"a Qwen3-shaped config.json written from {model.name}'s spec"))
    nearest = nearest_bundled(model)
    if nearest is not None and nearest != model.name:
        found.append((nearest, f"bundled {nearest}, the nearest model of the same kind to {model.name}"))
    return found


def nearest_bundled(model: ModelSpec) -> str | None:
    """The bundled model of the same attention kind and MoE-ness with the closest parameter count."""
    candidates = BUNDLED_BY_KIND.get((model.attention.value, model.is_moe), [])
    if not candidates:
        return None
    return min(candidates, key=lambda item: abs(item[1] - model.params_total))[0]


def bundled_spec(name: str) -> ModelSpec | None:
    """The ModelSpec of a bundled model from aiconfigurator-core's own config.json (None if unreadable)."""
    try:
        folder = Path(aic_import().__file__).parent / "model_configs"
        cfg = json.loads((folder / f"{name.replace('/', '--')}_config.json").read_text())
        return model_from_config(cfg, name)
    except Exception:  # noqa: BLE001 - no spec means no scaling, and the source still names the proxy
        return None


def synthesized_config(model: ModelSpec) -> str:
    """Write a Qwen3 (dense) or Qwen3-MoE config.json for a GQA model and return its folder."""
    cfg: dict[str, Any] = {
        "architectures": ["Qwen3MoeForCausalLM" if model.is_moe else "Qwen3ForCausalLM"],
        "model_type": "qwen3_moe" if model.is_moe else "qwen3",
        "hidden_size": model.hidden_size, "num_hidden_layers": model.num_layers,
        "num_attention_heads": model.num_attention_heads, "num_key_value_heads": model.num_kv_heads,
        "head_dim": model.head_dim, "vocab_size": model.vocab_size, "max_position_embeddings": model.max_context,
        "intermediate_size": model.intermediate_size or 4 * model.hidden_size, "torch_dtype": "bfloat16",
        "tie_word_embeddings": False, "rms_norm_eps": 1e-6, "rope_theta": 1000000, "hidden_act": "silu",
    }
    if model.is_moe:
        cfg.update(num_experts=model.num_experts, num_experts_per_tok=model.experts_per_token,
                   moe_intermediate_size=model.moe_intermediate_size, decoder_sparse_step=1)
    folder = Path(tempfile.gettempdir()) / "sglang-tuner-aic" / model.name.replace("/", "--")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg, indent=1))
    return str(folder)


def parallel_layout(model: ModelSpec, server: ServerConfig) -> tuple[int, int, int, int]:
    """(tp, attention_dp, moe_tp, moe_ep): aiconfigurator needs moe_tp x moe_ep == tp x attention_dp."""
    tp = max(server.tp_size, 1)
    adp = max(min(server.attention_dp_size, tp), 1)
    attention_tp = max(tp // adp, 1)
    if not model.is_moe:
        return attention_tp, adp, 1, 1
    ep = max(min(server.ep_size, tp), 1)
    return attention_tp, adp, max(tp // ep, 1), ep


def compile_engine(model: ModelSpec, hardware: Hardware, server: ServerConfig,
                   fmha_quant: str | None = None) -> CompiledEngine:
    """The first config that compiles for this layout (cached per key), or the reasons none did."""
    system = aic_system(hardware)
    if system is None:
        return CompiledEngine(None, "", f"aiconfigurator-core has no SGLang data for {hardware.spec.name}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # configs are local; never reach for the hub
    tp, adp, moe_tp, moe_ep = parallel_layout(model, server)
    requested = quant_modes(server, fmha_quant)
    # FP8 checkpoints (DeepSeek-V4-Flash-FP8) carry their own quant config; its modes are the second try. A
    # BF16 checkpoint quantized at load (`--quantization fp8`) has no such modes: its BF16 rows would price an
    # FP8 server as BF16, so it gets none (the cost model prices it from its BF16 twin, `bind`).
    variants = [(requested, "")]
    if server.weight_dtype == "fp8" and fmha_quant is None and model.prequantized:
        variants.append((dict.fromkeys(requested), ", quant modes from the checkpoint"))
    errors: list[str] = []
    partial: CompiledEngine | None = None
    for (path, note), (modes, how) in itertools.product(config_candidates(model), variants):
        key = EngineKey(path, system, tp, adp, moe_tp, moe_ep, modes["gemm_quant_mode"], modes["moe_quant_mode"],
                        modes["kvcache_quant_mode"], modes["fmha_quant_mode"])
        if key not in _ENGINES:
            _ENGINES[key] = _compile(key, note + how)
        compiled = _ENGINES[key]
        if path == nearest_bundled(model) and path != model.name and compiled.engine is not None:
            compiled = replace(compiled, proxy=path)
        if compiled.engine is not None and _answers(compiled.engine):
            return compiled
        partial = partial or (compiled if compiled.engine is not None else None)
        errors.append(compiled.error or f"{note}: no data for a 1,024-token decode and prefill")
    # An engine that compiled but misses data for typical steps still answers the steps it can.
    if partial is not None:
        return replace(partial, partial=True)
    return CompiledEngine(None, "", "; ".join(errors) or f"no aiconfigurator config for {model.name}")


def _answers(engine: Any) -> bool:
    """Whether the engine has data for a typical decode and prefill (a compiled spec can still miss ops)."""
    try:
        return engine.decode_step_latency(8, 1024, 0) > 0 and engine.predict_prefill_latency(1, 1024, 0) > 0
    except Exception:  # noqa: BLE001 - missing perf data: try the next config
        return False


def _compile(key: EngineKey, note: str) -> CompiledEngine:
    try:
        AicEngine = aic_import().AicEngine
        aic_compile = aic_import("sdk").compile_engine
        spec = aic_compile(key.model_path, key.system, "sglang", tp_size=key.tp, attention_dp_size=key.attention_dp,
                           moe_tp_size=key.moe_tp, moe_ep_size=key.moe_ep, gemm_quant_mode=key.gemm_quant,
                           moe_quant_mode=key.moe_quant, kvcache_quant_mode=key.kv_quant,
                           fmha_quant_mode=key.fmha_quant)
        return CompiledEngine(AicEngine.from_spec(spec), note)
    except Exception as exc:  # noqa: BLE001 - any compile failure means "answer analytically", never a crash
        return CompiledEngine(None, "", f"{note}: {type(exc).__name__}: {str(exc)[:200]}")


def uses_alltoall(model: ModelSpec, server: ServerConfig) -> bool:
    """Whether SGLang runs this server's MoE layers through an all-to-all backend (DeepEP) with EP > 1."""
    backend = (server.moe_a2a_backend or "none").lower()
    return model.is_moe and backend != "none" and parallel_layout(model, server)[3] > 1


def gathers_moe_input(model: ModelSpec, server: ServerConfig) -> bool:
    """Whether SGLang gathers every DP-attention rank's tokens for this server's EP MoE layers (no all-to-all).

    With `--moe-a2a-backend none` the sparse MLP runs in ScatterMode.FULL (0.5.2 `layers/communicator.py`
    _compute_mlp_mode; 0.5.23 `layers/moe/utils.py` is_moe_input_scattered_across_dp_ranks): every rank's
    tokens are gathered onto each GPU of the instance, which runs its own experts on all of them, and the
    output is reduced back. `--enable-ep-moe` (0.5.2) only set ep_size = tp_size, so it ran this path.
    """
    _, adp, _, ep = parallel_layout(model, server)
    return model.is_moe and adp > 1 and ep > 1 and not uses_alltoall(model, server)


def gather_dispatch_ops_json(model: ModelSpec, server: ServerConfig) -> str | None:
    """aiconfigurator's MoE dispatch pair for this layout (gather before the experts, reduce after), as ops JSON.

    aiconfigurator-core prices an SGLang EP layout with these ops, SGLang's `--moe-a2a-backend none` path; the
    `aiconfigurator` cost model evaluates them on their own to take them out of a measured step when the
    server runs DeepEP instead. None when the ops cannot be built.
    """
    if not model.is_moe or not model.num_experts:
        return None
    tp, adp, moe_tp, moe_ep = parallel_layout(model, server)
    try:
        aic_ops = aic_import("sdk.operations")
        common = aic_import("sdk.common")
        build_ops_json = aic_import("sdk.engine").build_ops_json

        quant = common.MoEQuantMode.fp8_block if fp8_block_experts(server) else None
        ops = [aic_ops.MoEDispatch(f"moe_{'pre' if pre else 'post'}_dispatch", model.num_layers, model.hidden_size,
                                   model.experts_per_token, model.num_experts, moe_tp, moe_ep, adp, pre,
                                   quant_mode=quant, attn_cp_size=1, backend="sglang")
               for pre in (True, False)]
        return str(build_ops_json(ops))
    except Exception:  # noqa: BLE001 - an aiconfigurator without these ops: the caller answers analytically
        return None


def fp8_block_experts(server: ServerConfig) -> bool:
    """Whether the routed experts run FP8 block-quantized (`--quantization fp8` or an FP8 checkpoint)."""
    return (server.quantization or "").lower() in FP8_QUANTIZATIONS or server.weight_dtype == "fp8"


# The routing aiconfigurator-core's DeepSeek-family models price MoE steps under (`workload_distribution`
# "power_law", alpha 1.01 in `sdk/models/deepseek*.py`; its generic MoE and Qwen3.5 models use 1.2).
DEEPSEEK_ROUTING = "power_law_1.01"
# The routed-expert shape of aiconfigurator-core's SGLang DeepEP expert rows (`deepep_moe`, DeepSeek-V3:
# hidden, expert intermediate, top-k, experts), FP8 block weights only, and the EP sizes they were measured at.
DEEPEP_REFERENCE_SHAPE = (7168, 2048, 8, 256)
DEEPEP_MEASURED_EP = (4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class ExpertSwap:
    """The routed-expert op a measured step prices, and SGLang's DeepEP expert op to price in its place.

    `token_scale` converts the model's tokens to the reference shape's tokens of the same per-GPU GEMM work
    (top-k x hidden x intermediate); 1.0 for a model of DeepSeek-V3's expert shape. `deepep_context` and
    `deepep_generation` price the extend and decode ops as (ops JSON, weight, token factor) parts whose
    weighted sum is the op: each part is DeepSeek-V3's rows at one EP size (the server's for extend batches,
    `weight_matched_ep` for decode), read at `token_scale` x its token factor tokens (that EP size over the
    server's), the tokens of the same per-GPU GEMM work.
    """

    fused_json: str
    deepep_context: tuple[tuple[str, float, float], ...]
    deepep_generation: tuple[tuple[str, float, float], ...]
    token_scale: float
    note: str


def weight_matched_ep(local_experts: float) -> tuple[tuple[int, float], ...]:
    """The measured EP sizes, with weights, whose DeepSeek-V3 local expert bytes bracket `local_experts`.

    DeepGEMM's masked kernel (DeepEP low-latency batches) streams every local expert's weights once: on few
    tokens per rank its measured decode rows grow with the local experts (under aiconfigurator's
    power-law routing, at 8 tokens per rank: 0.480, 0.335, 0.183, 0.110 and 0.076 ms per layer at EP4 to
    EP64, `wideep_generation_moe_perf`). A model whose experts weigh less is read at the EP size of the same
    local bytes, linear in between; past EP4's 64 experts, EP4's row scaled by the bytes; below EP256's one
    expert, EP256's row.
    """
    ref_e = DEEPEP_REFERENCE_SHAPE[3]
    points = sorted((ref_e / ep, ep) for ep in DEEPEP_MEASURED_EP)
    if local_experts <= points[0][0]:
        return ((points[0][1], 1.0),)
    for (lo, ep_lo), (hi, ep_hi) in zip(points, points[1:], strict=False):
        if local_experts <= hi:
            frac = (local_experts - lo) / (hi - lo)
            return tuple((ep, w) for ep, w in ((ep_lo, 1.0 - frac), (ep_hi, frac)) if w > 0)
    most, ep_most = points[-1]
    return ((ep_most, local_experts / most),)


def deepep_expert_swap(model: ModelSpec, server: ServerConfig) -> ExpertSwap | None:
    """Under `--moe-a2a-backend deepep` SGLang runs the routed experts on DeepGEMM, not the fused Triton kernel.

    `layers/quantization/fp8.py` is_deepgemm_moe_runner_backend_enabled: `--moe-runner-backend auto` with a
    DeepEP all-to-all resolves to DeepGEMM (grouped contiguous GEMM for normal-mode batches, masked for
    low-latency ones). aiconfigurator-core prices every EP step with its fused-MoE rows (`moe_perf`, the
    `none` backend's Triton kernel) and measures SGLang's DeepEP expert kernels separately
    (`MoEExpertCompute`, kernel source `deepep_moe`, DeepSeek-V3's shape). The swap applies to DeepSeek-family
    (MLA) models, whose measured steps use the routing above; None otherwise, and without FP8 block weights,
    EP or the op in aiconfigurator.
    """
    if model.attention is not AttentionKind.MLA or not uses_alltoall(model, server) or not fp8_block_experts(server):
        return None
    _, adp, moe_tp, moe_ep = parallel_layout(model, server)
    inter = model.moe_intermediate_size or model.intermediate_size
    ref_h, ref_i, ref_k, ref_e = DEEPEP_REFERENCE_SHAPE
    scale = (model.experts_per_token * model.hidden_size * inter) / (ref_k * ref_h * ref_i)
    try:
        aic_ops = aic_import("sdk.operations")
        common = aic_import("sdk.common")
        build_ops_json = aic_import("sdk.engine").build_ops_json

        quant = common.MoEQuantMode.fp8_block
        fused = aic_ops.MoE("routed_experts", model.num_layers, model.hidden_size, inter, model.experts_per_token,
                            model.num_experts, moe_tp, moe_ep, quant, DEEPSEEK_ROUTING, adp)

        def deepep(phase: str, ep: int) -> str:
            op = aic_ops.MoEExpertCompute("routed_experts", model.num_layers, hidden_size=ref_h, inter_size=ref_i,
                                          topk=ref_k, num_experts=ref_e, moe_ep_size=ep, quant_mode=quant,
                                          workload_distribution=DEEPSEEK_ROUTING, attention_dp_size=adp,
                                          inference_phase=phase)
            return str(build_ops_json([op]))

        # Decode: V3's rows at the EP size whose local experts weigh what this model's do.
        local = model.num_experts / moe_ep * (model.hidden_size * inter) / (ref_h * ref_i)
        matched = weight_matched_ep(local)
        generation = tuple((deepep("generation", ep), weight, ep / moe_ep) for ep, weight in matched)
        fused_json, context = str(build_ops_json([fused])), ((deepep("context", moe_ep), 1.0, 1.0),)
    except Exception:  # noqa: BLE001 - an aiconfigurator without these ops keeps the fused rows
        return None
    own = (model.hidden_size, inter, model.experts_per_token, model.num_experts) == DEEPEP_REFERENCE_SHAPE
    decode_at = " / ".join(f"EP{ep}" for ep, _ in matched)
    note = ("its own shape" if own else
            f"DeepSeek-V3's expert shape at {scale:.2f}x the tokens (the same per-GPU GEMM work); decode at "
            f"{decode_at}, the same local expert bytes")
    return ExpertSwap(fused_json, context, generation, scale, note)
