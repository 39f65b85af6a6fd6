"""Model specification built from a Hugging Face `config.json`.

Covers dense GQA transformers, MoE, MLA (DeepSeek-style latent KV) and hybrid linear attention (some
layers keep a fixed-size recurrent state instead of a KV cache). Parameter counts come from a sidecar
`model.toml` when the model ships with the project (so the casebook's stated figures hold), otherwise
they are estimated from the config.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import tomllib
from enum import StrEnum
from pathlib import Path
from typing import Any

import msgspec

DTYPE_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "auto": 2.0, "fp8": 1.0, "fp8_e5m2": 1.0,
                                 "fp8_e4m3": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5}


class Architecture(StrEnum):
    DENSE = "dense"
    MOE = "moe"


class AttentionKind(StrEnum):
    GQA = "gqa"
    MLA = "mla"
    HYBRID_LINEAR = "hybrid_linear"


class ModelSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What the tuner needs to know about a model."""

    name: str
    architecture: Architecture
    attention: AttentionKind
    params_total: float
    params_active: float
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_context: int
    intermediate_size: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    full_attention_layers: int = 0
    # Sliding-window attention layers SGLang keeps in its hybrid SWA pool (gpt-oss: every other layer, a
    # 128-token window): a token there costs `SWA_FULL_TOKENS_RATIO` of a full layer's bytes.
    sliding_layers: int = 0
    linear_state_bytes_per_request: int = 0
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    provenance: str = ""
    # An EAGLE3 draft trained for this model (a Hugging Face id or a folder), from `model.toml`; "" when none
    # is known, so speculative decoding is proposed only with a draft the scenario names.
    eagle3_draft: str = ""
    # Multi-token-prediction layers the checkpoint carries (DeepSeek's num_nextn_predict_layers, Qwen3.5's
    # mtp_num_hidden_layers): SGLang drafts with them (`--speculative-algorithm NEXTN`), no separate draft.
    mtp_layers: int = 0
    # config.json's quantization_config for a checkpoint stored quantized: its quant_method ("fp8", "awq", ...)
    # and bits per weight (0 when the method is not one read here, so its size is unknown).
    prequantized: str = ""
    prequantized_bits: int = 0

    @property
    def kv_layers(self) -> int:
        """Layers that keep a per-token KV cache."""
        return self.full_attention_layers or self.num_layers

    def kv_bytes_per_token(self, kv_dtype: str = "bf16") -> int:
        """KV cache bytes per token across all layers (casebook: 2 x layers x kv_heads x head_dim x bytes).

        With sliding-window layers, SGLang's hybrid SWA pool gives them `SWA_FULL_TOKENS_RATIO` tokens per
        full-layer token (`model_executor/pool_configurator.py`: cell = full layers + ratio x SWA layers), and
        a pool's size in tokens is the full layers' (`max_total_num_tokens = full_tokens`).
        """
        width = dtype_bytes(kv_dtype)
        if self.attention is AttentionKind.MLA:
            # MLA stores one compressed latent plus the rope key per token per layer.
            return int(self.kv_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * width)
        layers = self.kv_layers - self.sliding_layers + SWA_FULL_TOKENS_RATIO * self.sliding_layers
        return int(2 * layers * self.num_kv_heads * self.head_dim * width)

    def weight_bytes(self, weight_dtype: str = "bf16") -> float:
        """Weight bytes as served in `weight_dtype`; a checkpoint stored in fewer bits loads in those."""
        return self.params_total * self._bytes_per_weight(weight_dtype)

    def active_weight_bytes(self, weight_dtype: str = "bf16") -> float:
        """Bytes read per decode step when every active parameter is touched once."""
        return self.params_active * self._bytes_per_weight(weight_dtype)

    def _bytes_per_weight(self, weight_dtype: str) -> float:
        served = dtype_bytes(weight_dtype)
        return min(served, self.prequantized_bits / 8) if self.prequantized_bits else served

    @property
    def is_moe(self) -> bool:
        return self.architecture is Architecture.MOE


def dtype_bytes(dtype: str | None) -> float:
    """Bytes per element for a weight or KV dtype name (`fp8`, `fp8_e5m2`, `bf16`, `auto`...)."""
    key = (dtype or "auto").lower()
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


def _get(cfg: dict[str, Any], *names: str, default: Any = None) -> Any:
    text = cfg.get("text_config")
    for source in (cfg, text if isinstance(text, dict) else {}):
        for name in names:
            if source.get(name) is not None:
                return source[name]
    return default


def estimate_params(cfg: dict[str, Any]) -> tuple[float, float]:
    """Estimate (total, active) parameters from a config when no sidecar states them."""
    hidden = int(_get(cfg, "hidden_size"))
    layers = int(_get(cfg, "num_hidden_layers"))
    heads = int(_get(cfg, "num_attention_heads"))
    kv_heads = int(_get(cfg, "num_key_value_heads", default=heads))
    head_dim = int(_get(cfg, "head_dim", default=hidden // heads))
    vocab = int(_get(cfg, "vocab_size", default=32000))
    attn = hidden * head_dim * (heads * 2 + kv_heads * 2)
    experts = int(_get(cfg, "num_experts", "n_routed_experts", "num_local_experts", default=0))
    if experts:
        moe_inter = int(_get(cfg, "moe_intermediate_size", "intermediate_size"))
        top_k = int(_get(cfg, "num_experts_per_tok", "num_experts_per_token", default=8))
        shared = int(_get(cfg, "n_shared_experts", "num_shared_experts", default=0))
        per_expert = 3 * hidden * moe_inter
        mlp_total, mlp_active = per_expert * (experts + shared), per_expert * (top_k + shared)
    else:
        mlp_total = mlp_active = 3 * hidden * int(_get(cfg, "intermediate_size"))
    embed = (1 if _get(cfg, "tie_word_embeddings", default=False) else 2) * vocab * hidden
    # DeepSeek-style MoE keeps its first layers dense (`first_k_dense_replace`), with the dense MLP width.
    dense = min(layers, int(_get(cfg, "first_k_dense_replace", default=0) or 0)) if experts else 0
    dense_layers = dense * (attn + 3 * hidden * int(_get(cfg, "intermediate_size", default=0) or 0))
    moe_layers = layers - dense
    return (float(dense_layers + moe_layers * (attn + mlp_total) + embed),
            float(dense_layers + moe_layers * (attn + mlp_active) + embed))


# SGLang's `--swa-full-tokens-ratio` fallback (0.5.23 `arg_groups/fields/schedule.py`), and the model types
# it sizes with the hybrid SWA pool (`is_hybrid_swa_model` names architectures; a model it leaves out keeps
# every layer whole, as Gemma 2/3 and OLMo 3 do). gpt-oss gets that pool from SGLang 0.5.15; 0.5.2 (and 0.5.9
# under trtllm_mha, B200's default) keep its layers whole, which a ModelSpec, shared by every version, does not
# follow: on those versions its pool comes out about 11% larger than SGLang's.
SWA_FULL_TOKENS_RATIO = 0.8
_HYBRID_SWA_POOL = frozenset({"gpt_oss"})


def _sliding_layers(cfg: dict[str, Any], layer_types: object) -> int:
    """Layers SGLang keeps in its hybrid SWA pool: `sliding_attention` entries of a model type it pools so."""
    if not isinstance(layer_types, list) or not _get(cfg, "sliding_window", default=None) \
            or cfg.get("model_type") not in _HYBRID_SWA_POOL:
        return 0
    sliding = sum(1 for t in layer_types if str(t) == "sliding_attention")
    return sliding if sliding < len(layer_types) else 0


def model_from_config(cfg: dict[str, Any], name: str, sidecar: dict[str, Any] | None = None) -> ModelSpec:
    """Build a ModelSpec from a parsed config.json; `sidecar` may state params and provenance."""
    sidecar = sidecar or {}
    hidden = int(_get(cfg, "hidden_size"))
    heads = int(_get(cfg, "num_attention_heads"))
    layers = int(_get(cfg, "num_hidden_layers"))
    experts = int(_get(cfg, "num_experts", "n_routed_experts", "num_local_experts", default=0))
    kv_lora = int(_get(cfg, "kv_lora_rank", default=0) or 0)
    layer_types = _get(cfg, "layer_types", default=None)
    full_layers = 0
    attention = AttentionKind.MLA if kv_lora else AttentionKind.GQA
    if isinstance(layer_types, list) and any("linear" in str(t) for t in layer_types):
        attention = AttentionKind.HYBRID_LINEAR
        full_layers = sum(1 for t in layer_types if "full" in str(t))
    total, active = estimate_params(cfg)
    overrides = dict(sidecar.get("overrides", {}))
    if "attention" in overrides:
        attention = AttentionKind(overrides.pop("attention"))
    linear_state = 0
    if attention is AttentionKind.HYBRID_LINEAR:
        k_dim = int(_get(cfg, "linear_key_head_dim", default=128))
        v_dim = int(_get(cfg, "linear_value_head_dim", default=128))
        v_heads = int(_get(cfg, "linear_num_value_heads", default=heads))
        # Recurrent state per linear layer: heads x k_dim x v_dim in fp32.
        linear_state = (layers - full_layers) * v_heads * k_dim * v_dim * 4
    spec = ModelSpec(
        name=name,
        architecture=Architecture.MOE if experts else Architecture.DENSE,
        attention=attention,
        params_total=float(sidecar.get("params_total", total)),
        params_active=float(sidecar.get("params_active", active)),
        num_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_kv_heads=int(_get(cfg, "num_key_value_heads", default=heads)),
        head_dim=int(_get(cfg, "head_dim", default=hidden // heads)),
        vocab_size=int(_get(cfg, "vocab_size", default=32000)),
        max_context=int(_get(cfg, "max_position_embeddings", default=32768)),
        intermediate_size=int(_get(cfg, "intermediate_size", default=0) or 0),
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=int(_get(cfg, "qk_rope_head_dim", default=0) or 0),
        full_attention_layers=full_layers,
        sliding_layers=0 if attention is AttentionKind.HYBRID_LINEAR else _sliding_layers(cfg, layer_types),
        linear_state_bytes_per_request=linear_state,
        num_experts=experts,
        experts_per_token=int(_get(cfg, "num_experts_per_tok", "num_experts_per_token", default=0) or 0),
        moe_intermediate_size=int(_get(cfg, "moe_intermediate_size", default=0) or 0),
        provenance=str(sidecar.get("provenance", "estimated from config.json")),
        eagle3_draft=str(sidecar.get("eagle3_draft", "")),
        mtp_layers=int(_get(cfg, "num_nextn_predict_layers", "mtp_num_hidden_layers", default=0) or 0),
        prequantized=_quant_method(cfg),
        prequantized_bits=_quant_bits(cfg),
    )
    return msgspec.structs.replace(spec, **overrides) if overrides else spec


# quantization_config methods whose bits per weight are read here (SGLang's `srt/layers/quantization` names).
_EIGHT_BIT = ("fp8", "fbgemm_fp8", "modelopt", "modelopt_fp8", "w8a8_fp8", "w8a8_int8")
_FOUR_BIT = ("mxfp4", "modelopt_fp4", "w4afp8")
_BITS_FIELD = ("awq", "awq_marlin", "gptq", "gptq_marlin", "compressed-tensors", "auto-round")


def _quant_method(cfg: dict[str, Any]) -> str:
    quant = _get(cfg, "quantization_config")
    return str(quant.get("quant_method") or "unknown") if isinstance(quant, dict) else ""


def _quant_bits(cfg: dict[str, Any]) -> int:
    """Bits per weight of a checkpoint stored quantized, or 0 when they are not known."""
    quant = _get(cfg, "quantization_config")
    method = _quant_method(cfg)
    if not isinstance(quant, dict) or not method:
        return 0
    if method in _EIGHT_BIT:
        return 8
    if method in _FOUR_BIT:
        return 4
    if method in _BITS_FIELD:
        bits = quant.get("bits", quant.get("w_bit"))
        return int(bits) if isinstance(bits, int) and 0 < bits <= 16 else 0
    return 0


MODELS_DIR = Path(__file__).parent / "models"


def load_model_dir(path: Path, name: str | None = None) -> ModelSpec:
    """Load a folder holding `config.json` and, optionally, a `model.toml` sidecar."""
    cfg = json.loads((path / "config.json").read_text())
    sidecar_path = path / "model.toml"
    sidecar = tomllib.loads(sidecar_path.read_text()) if sidecar_path.exists() else {}
    return model_from_config(cfg, name or str(sidecar.get("name", path.name)), sidecar)


def shipped_models() -> dict[str, Path]:
    """Models that ship with the project: Hugging Face id -> folder."""
    found: dict[str, Path] = {}
    for sidecar in sorted(MODELS_DIR.glob("*/model.toml")):
        found[str(tomllib.loads(sidecar.read_text())["name"])] = sidecar.parent
    return found


# Bundled configs whose parameter count `estimate_params` reproduces within a few percent (Llama-3.1 8B/70B/405B,
# Qwen3 dense and MoE, Mixtral, DeepSeek-V3/R1/V3.2, Kimi-K2, gpt-oss, MiMo). Others (Llama 4's interleaved
# MoE, Nemotron-H's Mamba layers, vision towers, DeepSeek-V4's attention) are left out rather than mis-sized.
_ESTIMATED_MODEL_TYPES = frozenset({"llama", "qwen3", "qwen3_moe", "mixtral", "deepseek_v3", "deepseek_v32",
                                    "kimi_k2", "gpt_oss", "mimo"})
# aiconfigurator-core ships the config.json of the models it has kernel data for (its successor's name first).
_BUNDLING_PACKAGES = ("aisimulate_core", "aiconfigurator_core")


@functools.cache
def bundled_configs() -> dict[str, Path]:
    """Model configs bundled with aiconfigurator-core: Hugging Face id -> config.json.

    `model_configs/Qwen--Qwen3-32B_config.json` is `Qwen/Qwen3-32B`. Checkpoints whose quantization lives in
    a separate `hf_quant_config.json` (ModelOpt's NVFP4 exports) are left out: their config.json alone would
    read as BF16 weights.
    """
    for package in _BUNDLING_PACKAGES:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(next(iter(spec.submodule_search_locations))) / "model_configs"
        found: dict[str, Path] = {}
        for path in sorted(folder.glob("*_config.json")):
            stem = path.name.removesuffix("_config.json")
            if stem.endswith("_hf_quant") or (folder / f"{stem}_hf_quant_config.json").exists() or "--" not in stem:
                continue
            try:
                cfg = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # a file the package ships broken names no model
            if not isinstance(cfg, dict) or cfg.get("model_type") not in _ESTIMATED_MODEL_TYPES:
                continue
            found[stem.replace("--", "/", 1)] = path
        return found
    return {}


def known_model_ids() -> list[str]:
    """Every model id `resolve_model` accepts without a folder: shipped ones first, then bundled configs."""
    shipped = shipped_models()
    return [*shipped, *(name for name in bundled_configs() if name not in shipped)]


# Words of a Hugging Face id that name a post-trained or dated release of a model (Instruct, Chat, Thinking,
# -0324, -2507), and Meta's renaming of its Llama 3.1 repositories (`Llama-3.1-8B` was `Meta-Llama-3.1-8B`).
_VARIANT_WORD = re.compile(r"instruct|chat|thinking|it|\d{4}", re.IGNORECASE)
_RENAMES = (("meta-llama/Llama-3.1-", "meta-llama/Meta-Llama-3.1-"),)


def plain_model_id(ref: str) -> str:
    """`ref` without the words that name a release of a model: `Qwen/Qwen3-30B-A3B-Instruct-2507` is
    `Qwen/Qwen3-30B-A3B`."""
    org, _, name = ref.rpartition("/")
    plain = "-".join(word for word in name.split("-") if not _VARIANT_WORD.fullmatch(word)) or name
    return f"{org}/{plain}" if org else plain


def variant_base(ref: str) -> str:
    """The known model `ref` names under another spelling or looks like a post-trained variant of, or "".

    An instruct or dated release usually keeps its base's architecture, but not always its context window
    (Qwen3-30B-A3B-Instruct-2507 reads 262,144 tokens where Qwen3-30B-A3B reads 40,960), so the door names
    the base for the user to choose instead of sizing the variant by it silently.
    """
    stems = {ref, plain_model_id(ref)}
    for old, new in _RENAMES:
        stems |= {stem.replace(old, new, 1) for stem in stems if stem.startswith(old)}
    known = known_model_ids()
    ids = set(known)
    found = sorted(stem for stem in stems if stem != ref and stem in ids)
    if found:
        return found[0]
    # A release of a known release (`Kimi-K2-Instruct-0905` of `Kimi-K2-Instruct`): matched without the words.
    plain: dict[str, str] = {}
    for name in sorted(known):
        plain.setdefault(plain_model_id(name), name)
    bases = sorted(base for stem in stems if (base := plain.get(plain_model_id(stem))) and base != ref)
    return bases[0] if bases else ""


def resolve_model(ref: str, base: Path | None = None) -> ModelSpec:
    """A shipped model by Hugging Face id, a local folder holding a config.json, or a model whose config.json
    aiconfigurator-core bundles (parameter counts then estimated from the config)."""
    shipped = shipped_models()
    if ref in shipped:
        return load_model_dir(shipped[ref])
    path = Path(ref)
    if base is not None and not path.is_absolute():
        path = base / path
    if (path / "config.json").exists():
        return load_model_dir(path, name=ref)
    bundled = bundled_configs().get(ref)
    if bundled is not None:
        spec = model_from_config(json.loads(bundled.read_text()), ref)
        return msgspec.structs.replace(spec, provenance=f"config.json bundled with aiconfigurator-core "
                                                        f"({bundled.name}); parameters estimated from it")
    known = ", ".join(shipped)
    raise KeyError(f"unknown model {ref!r}: not a shipped model ({known}), a model whose config.json "
                   "aiconfigurator-core bundles, nor a folder with config.json")


def known_draft(ref: str) -> str:
    """The EAGLE3 draft known for model `ref` (its `model.toml`'s `eagle3_draft`), or "" when none is known.

    A draft is trained on one target model's hidden states and vocabulary, so no name is ever derived from the
    target's: `<model>-eagle3` exists for the casebook's Qwen3.6 models only because they ship saying so.
    """
    try:
        return resolve_model(ref).eagle3_draft
    except (KeyError, OSError, ValueError):
        return ""


def draft_after_switch(ref: str, algorithm: str | None) -> str:
    """The draft a speculating server takes when it switches to model `ref`, or "" when it has none: with
    NEXTN the new model's own MTP layer (the model itself), otherwise its known EAGLE3 draft."""
    if (algorithm or "").upper() == "NEXTN":
        try:
            return ref if resolve_model(ref).mtp_layers else ""
        except (KeyError, OSError, ValueError):
            return ""
    return known_draft(ref)
