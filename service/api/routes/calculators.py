"""The casebook's calculators over HTTP: KV per token, KV capacity, threshold batch, throughput, HiCache.

Memory is in the casebook's units (KB = 1,024 bytes, GB = 10^6 KB); see `service.calc.units`.
"""

from __future__ import annotations

import msgspec
from litestar import Router, post
from litestar.params import JSONBody

from service import calc
from service.api.auth import SECURITY
from service.api.problems import Problem, invalid, problem_responses
from service.domain import GpuSpec, ModelSpec, gpu_spec, resolve_model

_READ = {"scope": "read"}
_ERRORS = problem_responses(400, 401, 403, 413, 422)


class KvSource(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where KV bytes per token come from: a shipped model, GQA shape, MLA shape, or a given number."""

    model: str | None = None
    layers: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int = 0
    kv_bytes_per_token: int | None = None
    kv_dtype: str = "bf16"


class KvPerToken(msgspec.Struct, kw_only=True):
    kv_bytes_per_token: int
    kv_kb_per_token: float
    kv_dtype: str


class KvCapacityRequest(KvSource, kw_only=True, forbid_unknown_fields=True):
    """KV capacity of a GPU set after weights and activation headroom (casebook case 2)."""

    gpu: str = "H100-SXM"
    gpus: int = 1
    weights_gb: float | None = None
    weight_dtype: str = "bf16"
    headroom_gb: float = 0.0
    document_tokens: int | None = None
    hicache_ratio: float | None = None
    hicache_size_gb: float | None = None


class ThresholdBatchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where decode turns compute-bound: peak dense FLOP/s over HBM bandwidth."""

    gpu: str
    dtype: str = "bf16"


class ThresholdBatch(msgspec.Struct, kw_only=True):
    gpu: str
    dtype: str
    threshold_batch_size: int


class ThroughputRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Tokens per second needed to finish `requests` within `deadline_s` (casebook case 3)."""

    requests: int
    input_tokens: float
    output_tokens: float
    deadline_s: float


def _model(name: str) -> ModelSpec:
    try:
        return resolve_model(name)
    except KeyError as exc:
        raise invalid("model", str(exc.args[0]), "a shipped model id such as Qwen/Qwen3.6-27B") from exc


def _kv_bytes(source: KvSource) -> int:
    try:
        if source.kv_bytes_per_token is not None:
            return source.kv_bytes_per_token
        if source.model is not None:
            return calc.model_kv_bytes_per_token(_model(source.model), source.kv_dtype)
        if source.layers and source.kv_lora_rank:
            return calc.mla_kv_bytes_per_token(source.layers, source.kv_lora_rank, source.qk_rope_head_dim,
                                               source.kv_dtype)
        if source.layers and source.kv_heads and source.head_dim:
            return calc.kv_bytes_per_token(source.layers, source.kv_heads, source.head_dim, source.kv_dtype)
    except ValueError as exc:
        raise invalid("kv_dtype", str(exc), "bf16, fp16, fp8_e5m2 or fp8_e4m3") from exc
    raise invalid("model", "no KV shape given", "give model, or layers+kv_heads+head_dim, or layers+kv_lora_rank, "
                  "or kv_bytes_per_token")


def _gpu(name: str) -> GpuSpec:
    try:
        return gpu_spec(name)
    except KeyError as exc:
        raise invalid("gpu", str(exc.args[0]), "a GPU from the catalogue, e.g. 'H100-SXM' or 'H200-SXM'") from exc


@post("/kv-per-token", operation_id="calcKvPerToken", opt=_READ, security=SECURITY, responses=_ERRORS,
      status_code=200, sync_to_thread=False)
def kv_per_token(data: JSONBody[KvSource]) -> KvPerToken:
    """KV cache bytes per token of a model or attention shape."""
    per_token = _kv_bytes(data)
    return KvPerToken(kv_bytes_per_token=per_token, kv_kb_per_token=per_token / calc.KB, kv_dtype=data.kv_dtype)


@post("/kv-capacity", operation_id="calcKvCapacity", opt=_READ, security=SECURITY, responses=_ERRORS,
      status_code=200, sync_to_thread=False)
def kv_capacity(data: JSONBody[KvCapacityRequest]) -> calc.KvCapacity:
    """Tokens (and documents) of KV that fit after weights and headroom, with an optional HiCache host pool."""
    spec = _gpu(data.gpu)
    weights = data.weights_gb
    if weights is None:
        if data.model is None:
            raise invalid("weights_gb", "weights_gb or model is required", "give the weights' size or a model id")
        weights = calc.weight_memory_gb(_model(data.model).params_total, data.weight_dtype)
    try:
        return calc.kv_capacity(spec.hbm_gb * data.gpus, weights, data.headroom_gb, _kv_bytes(data),
                                document_tokens=data.document_tokens, hicache_ratio=data.hicache_ratio,
                                hicache_size_gb=data.hicache_size_gb)
    except ValueError as exc:
        raise Problem(422, "invalid-capacity", "Nothing left for KV", str(exc), field="headroom_gb",
                      hint="fewer weights (FP8), more GPUs, or less headroom") from exc


@post("/threshold-batch", operation_id="calcThresholdBatch", opt=_READ, security=SECURITY, responses=_ERRORS,
      status_code=200, sync_to_thread=False)
def threshold_batch(data: JSONBody[ThresholdBatchRequest]) -> ThresholdBatch:
    """The batch size where decode turns compute-bound on a GPU (speculative decoding pays below it)."""
    try:
        size = calc.threshold_batch_size(_gpu(data.gpu), data.dtype)
    except ValueError as exc:
        raise invalid("dtype", str(exc), "bf16 or fp8") from exc
    return ThresholdBatch(gpu=data.gpu, dtype=data.dtype, threshold_batch_size=size)


@post("/required-throughput", operation_id="calcRequiredThroughput", opt=_READ, security=SECURITY,
      responses=_ERRORS, status_code=200, sync_to_thread=False)
def required_throughput(data: JSONBody[ThroughputRequest]) -> calc.RequiredThroughput:
    """Input and output tokens per second a batch job needs to meet its deadline."""
    try:
        return calc.required_throughput(data.requests, data.input_tokens, data.output_tokens, data.deadline_s)
    except (ValueError, ZeroDivisionError) as exc:
        raise invalid("deadline_s", str(exc) or "deadline must be positive", "a deadline in seconds above 0") from exc


calculators_router = Router(path="/v1/calculators", tags=["calculators"],
                            route_handlers=[kv_per_token, kv_capacity, threshold_batch, required_throughput])
