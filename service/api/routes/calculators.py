"""The casebook's calculators over HTTP: KV per token, KV capacity, threshold batch, throughput, HiCache.

Memory is in the casebook's units (KB = 1,024 bytes, GB = 10^6 KB); see `service.calc.units`.
"""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Router, post
from litestar.params import JSONBody

from service import calc
from service.api.auth import SECURITY
from service.api.problems import Problem, invalid, problem_responses
from service.calc import CalcInputError, bounds
from service.domain import GpuSpec, ModelSpec, gpu_spec, resolve_model

_READ = {"scope": "read"}
_ERRORS = problem_responses(400, 401, 403, 413, 415, 422)


# Every size is bounded (`service.calc.bounds`): a negative or overflowing one is a 400 naming the field.
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Count = Annotated[int, bounds.schema(bounds.POSITIVE_COUNT, integer=True)]
Width = Annotated[int, bounds.schema(bounds.WIDTH, integer=True)]
RopeWidth = Annotated[int, bounds.schema(bounds.ROPE_WIDTH, integer=True)]
KvBytes = Annotated[int, bounds.schema(bounds.KV_BYTES, integer=True)]
Tokens = Annotated[int, bounds.schema(bounds.TOKENS, integer=True)]
TokenMean = Annotated[float, bounds.schema(bounds.TOKEN_MEAN)]
Requests = Annotated[int, bounds.schema(bounds.REQUESTS, integer=True)]
Seconds = Annotated[float, bounds.schema(bounds.SECONDS)]
Gigabytes = Annotated[float, bounds.schema(bounds.GIGABYTES)]
PoolGigabytes = Annotated[float, bounds.schema(bounds.POOL_GIGABYTES)]
Ratio = Annotated[float, bounds.schema(bounds.RATIO)]


class KvSource(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where KV bytes per token come from: a shipped model, GQA shape, MLA shape, or a given number."""

    model: Name | None = None
    layers: Count | None = None
    kv_heads: Count | None = None
    head_dim: Width | None = None
    kv_lora_rank: Width | None = None
    qk_rope_head_dim: RopeWidth = 0
    kv_bytes_per_token: KvBytes | None = None
    kv_dtype: Name = "bf16"


class KvPerToken(msgspec.Struct, kw_only=True):
    kv_bytes_per_token: int
    kv_kb_per_token: float
    kv_dtype: str


class KvCapacityRequest(KvSource, kw_only=True, forbid_unknown_fields=True):
    """KV capacity of a GPU set after weights and activation headroom (casebook case 2)."""

    gpu: Name = "H100-SXM"
    gpus: Count = 1
    weights_gb: Gigabytes | None = None
    weight_dtype: Name = "bf16"
    headroom_gb: Gigabytes = 0.0
    document_tokens: Tokens | None = None
    hicache_ratio: Ratio | None = None
    hicache_size_gb: PoolGigabytes | None = None


class ThresholdBatchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Where decode turns compute-bound: peak dense FLOP/s over HBM bandwidth."""

    gpu: Name
    dtype: Name = "bf16"


class ThresholdBatch(msgspec.Struct, kw_only=True):
    gpu: str
    dtype: str
    threshold_batch_size: int


class ThroughputRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Tokens per second needed to finish `requests` within `deadline_s` (casebook case 3)."""

    requests: Requests
    input_tokens: TokenMean
    output_tokens: TokenMean
    deadline_s: Seconds


# The calculators' argument names where the request's differ.
_API_FIELDS = {"num_layers": "layers", "num_kv_heads": "kv_heads", "bytes_per_token": "kv_bytes_per_token",
               "gpu_memory_gb": "gpus", "weights_gb": "weights_gb"}


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
    except CalcInputError as exc:
        raise invalid(_API_FIELDS.get(exc.field, exc.field), str(exc), "see the ranges in /schema") from exc
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
    memory, per_token = spec.hbm_gb * data.gpus, _kv_bytes(data)
    try:
        return calc.kv_capacity(memory, weights, data.headroom_gb, per_token,
                                document_tokens=data.document_tokens, hicache_ratio=data.hicache_ratio,
                                hicache_size_gb=data.hicache_size_gb, ranks=data.gpus)
    except CalcInputError as exc:
        raise invalid(_API_FIELDS.get(exc.field, exc.field), str(exc), "see the ranges in /schema") from exc
    except ValueError as exc:
        # The weights alone fill the GPUs, or the headroom takes what they leave.
        field = "headroom_gb" if weights < memory else ("weights_gb" if data.weights_gb is not None else "model")
        raise Problem(422, "invalid-capacity", "Nothing left for KV", str(exc), field=field,
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
    except CalcInputError as exc:
        raise invalid(exc.field, str(exc), "see the ranges in /schema") from exc


calculators_router = Router(path="/v1/calculators", tags=["calculators"],
                            route_handlers=[kv_per_token, kv_capacity, threshold_batch, required_throughput])
