"""`sglang-tuner calc ...`: the casebook's capacity, throughput, cost and HiCache arithmetic.

Memory is in the casebook's units: KB = 1,024 bytes, GB = 10^6 KB (see `service.calc.units`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
import msgspec

from service import calc
from service.calc import CalcInputError, bounds
from service.domain import GPU_CATALOGUE, ModelSpec, gpu_spec, resolve_model

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
# The calculators' argument names as this command's options.
_OPTIONS = {"num_layers": "--layers", "num_kv_heads": "--kv-heads", "bytes_per_token": "--kv-bytes-per-token",
            "size_gb": "--hicache-size", "hicache_size_gb": "--hicache-size", "deadline_s": "--deadline-hours",
            "output_tokens_per_s": "--output-tps"}


def _sized(bound: calc.Bound, *, integer: bool = False) -> click.IntRange | click.FloatRange:
    """A click type refusing values outside `bound` (`service.calc.bounds`), naming the option."""
    if integer:
        low = int(bound.low) + (1 if bound.low_open else 0)
        return click.IntRange(low, int(bound.high))
    return click.FloatRange(bound.low, bound.high, min_open=bound.low_open)


def _refused(err: CalcInputError) -> click.BadParameter:
    return click.BadParameter(str(err), param_hint=_OPTIONS.get(err.field, "--" + err.field.replace("_", "-")))


def register(main: click.Group) -> None:
    """Add the `calc` command group to the CLI."""
    main.add_command(calc_group)


@click.group("calc")
def calc_group() -> None:
    """Casebook calculators: KV memory and capacity, threshold batch, throughput, cost, HiCache."""


def _emit(result: Any, as_json: bool, lines: list[str]) -> None:
    if as_json:
        click.echo(msgspec.json.encode(result).decode())
    else:
        click.echo("\n".join(lines))


def _json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")(func)


def _kv_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options: list[Decorator] = [
        click.option("--model", "model_ref",
                     help="Shipped model id (e.g. Qwen/Qwen3.6-27B) or a folder with config.json."),
        click.option("--layers", type=_sized(bounds.POSITIVE_COUNT, integer=True), help="Layers with a KV cache."),
        click.option("--kv-heads", type=_sized(bounds.POSITIVE_COUNT, integer=True), help="KV heads per layer (GQA)."),
        click.option("--head-dim", type=_sized(bounds.WIDTH, integer=True), help="Head dimension (GQA)."),
        click.option("--kv-lora-rank", type=_sized(bounds.WIDTH, integer=True),
                     help="MLA latent width (use with --qk-rope-head-dim)."),
        click.option("--qk-rope-head-dim", type=_sized(bounds.ROPE_WIDTH, integer=True), default=0,
                     show_default=True, help="MLA rope key width."),
        click.option("--kv-bytes-per-token", "kv_bytes", type=_sized(bounds.KV_BYTES, integer=True),
                     help="KV bytes per token, given directly."),
        click.option("--kv-dtype", default="bf16", show_default=True, help="KV cache dtype (bf16, fp8_e5m2...)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _model(model_ref: str | None) -> ModelSpec | None:
    if model_ref is None:
        return None
    try:
        return resolve_model(model_ref)
    except KeyError as err:
        raise click.BadParameter(str(err.args[0]), param_hint="--model") from err


def _kv_bytes(model_ref: str | None, layers: int | None, kv_heads: int | None, head_dim: int | None,
              kv_lora_rank: int | None, qk_rope_head_dim: int, kv_bytes: int | None, kv_dtype: str,
              required: bool = True) -> int | None:
    try:
        if kv_bytes is not None:
            return kv_bytes
        model = _model(model_ref)
        if model is not None:
            return calc.model_kv_bytes_per_token(model, kv_dtype)
        if layers and kv_lora_rank:
            return calc.mla_kv_bytes_per_token(layers, kv_lora_rank, qk_rope_head_dim, kv_dtype)
        if layers and kv_heads and head_dim:
            return calc.kv_bytes_per_token(layers, kv_heads, head_dim, kv_dtype)
    except CalcInputError as err:
        raise _refused(err) from err
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--kv-dtype") from err
    if required:
        raise click.UsageError("give --model, or --layers with --kv-heads and --head-dim (or --kv-lora-rank for "
                               "MLA), or --kv-bytes-per-token")
    return None


@calc_group.command("kv-per-token")
@_kv_options
@_json_option
def kv_per_token_command(as_json: bool, **kv: Any) -> None:
    """KV cache bytes per token (casebook: 2 x layers x KV heads x head dim x dtype bytes)."""
    per_token = _kv_bytes(**kv)
    assert per_token is not None
    result = {"kv_bytes_per_token": per_token, "kv_kb_per_token": per_token / calc.KB, "kv_dtype": kv["kv_dtype"]}
    _emit(result, as_json, [f"KV per token ({kv['kv_dtype']}): {per_token:,} bytes = {per_token / calc.KB:g} KB"])


@calc_group.command("kv-memory")
@click.option("--requests", type=_sized(bounds.REQUESTS, integer=True), required=True, help="Concurrent requests.")
@click.option("--tokens", type=_sized(bounds.TOKENS, integer=True), required=True, help="Context tokens per request.")
@_kv_options
@_json_option
def kv_memory_command(requests: int, tokens: int, as_json: bool, **kv: Any) -> None:
    """KV memory held by N concurrent requests of L tokens."""
    per_token = _kv_bytes(**kv)
    assert per_token is not None
    gb = calc.kv_memory_gb(per_token, tokens, requests)
    result = {"requests": requests, "tokens": tokens, "kv_bytes_per_token": per_token, "kv_gb": gb}
    _emit(result, as_json, [f"{tokens:,} tokens x {per_token / calc.KB:g} KB x {requests} requests = {gb:.1f} GB"])


@calc_group.command("kv-capacity")
@click.option("--gpu", default="H100-SXM", show_default=True, help="GPU from the catalogue.")
@click.option("--gpus", type=_sized(bounds.POSITIVE_COUNT, integer=True), default=1, show_default=True,
              help="GPUs holding one copy of the model.")
@click.option("--gpu-memory-gb", type=_sized(bounds.POOL_GIGABYTES),
              help="Memory per GPU; defaults to the catalogue's HBM.")
@click.option("--weights-gb", type=_sized(bounds.GIGABYTES),
              help="Weight memory; defaults to the --model's at --weight-dtype.")
@click.option("--weight-dtype", default="bf16", show_default=True, help="Weight dtype for --model.")
@click.option("--headroom-gb", type=_sized(bounds.GIGABYTES), default=0.0, show_default=True,
              help="Activation and buffer headroom.")
@click.option("--document-tokens", type=_sized(bounds.TOKENS, integer=True),
              help="Tokens per document, to count cacheable documents.")
@click.option("--hicache-ratio", type=_sized(bounds.RATIO), help="HiCache host pool as a multiple of the GPU pool.")
@click.option("--hicache-size", "hicache_size_gb", type=_sized(bounds.POOL_GIGABYTES),
              help="HiCache host pool in GB per GPU, as SGLang reads it (overrides ratio).")
@_kv_options
@_json_option
def kv_capacity_command(gpu: str, gpus: int, gpu_memory_gb: float | None, weights_gb: float | None,
                        weight_dtype: str, headroom_gb: float, document_tokens: int | None,
                        hicache_ratio: float | None, hicache_size_gb: float | None, as_json: bool,
                        **kv: Any) -> None:
    """KV capacity in tokens and documents: GPU memory x count - weights - headroom (+ HiCache host tier)."""
    per_token = _kv_bytes(**kv)
    assert per_token is not None
    memory = (gpu_memory_gb if gpu_memory_gb is not None else _gpu(gpu).hbm_gb) * gpus
    if weights_gb is None:
        model = _model(kv["model_ref"])
        if model is None:
            raise click.UsageError("give --weights-gb, or --model to compute the weights")
        weights_gb = calc.weight_memory_gb(model.params_total, weight_dtype)
    try:
        cap = calc.kv_capacity(memory, weights_gb, headroom_gb, per_token, document_tokens=document_tokens,
                               hicache_ratio=hicache_ratio, hicache_size_gb=hicache_size_gb, ranks=gpus)
    except CalcInputError as err:
        raise _refused(err) from err
    except ValueError as err:
        raise click.UsageError(str(err)) from err
    lines = [f"{memory:g} GB - {weights_gb:g} GB weights - {headroom_gb:g} GB headroom = "
             f"{cap.kv_available_gb:g} GB KV = {cap.kv_tokens:,} tokens"]
    if cap.documents is not None:
        lines.append(f"{cap.documents} documents of {document_tokens:,} tokens ({cap.document_gb:.2f} GB each) on GPU")
    if cap.host_pool_gb:
        lines.append(f"host pool {cap.host_pool_gb:g} GB = {cap.host_tokens:,} tokens"
                     + (f", {cap.host_documents} documents; {cap.total_documents} in all"
                        if cap.host_documents is not None else ""))
    _emit(cap, as_json, lines)


def _gpu(name: str) -> Any:
    try:
        return gpu_spec(name)
    except KeyError as err:
        raise click.BadParameter(str(err.args[0]), param_hint="--gpu") from err


@calc_group.command("weight-memory")
@click.option("--model", "model_ref", help="Shipped model id or a folder with config.json.")
@click.option("--params", type=_sized(bounds.PARAMS), help="Parameter count (e.g. 27e9), instead of --model.")
@click.option("--dtype", default="bf16", show_default=True, help="Weight dtype (bf16, fp8, int4...).")
@_json_option
def weight_memory_command(model_ref: str | None, params: float | None, dtype: str, as_json: bool) -> None:
    """Weight memory: parameters x bytes per parameter (27B at FP8 = 27 GB)."""
    model = _model(model_ref)
    count = model.params_total if model is not None else params
    if count is None:
        raise click.UsageError("give --model or --params")
    gb = calc.weight_memory_gb(count, dtype)
    result = {"params": count, "dtype": dtype, "weights_gb": gb}
    _emit(result, as_json, [f"{count / 1e9:g}B params at {dtype}: {gb:g} GB"])


@calc_group.command("threshold-batch")
@click.option("--gpu", required=True, help=f"GPU from the catalogue ({', '.join(GPU_CATALOGUE)}).")
@click.option("--dtype", type=click.Choice(["bf16", "fp8"]), default="bf16", show_default=True)
@_json_option
def threshold_batch_command(gpu: str, dtype: str, as_json: bool) -> None:
    """Threshold batch size: peak dense TFLOP/s over HBM bandwidth (H200 206, H100 295)."""
    spec = _gpu(gpu)
    size = calc.threshold_batch_size(spec, dtype)
    tflops = spec.fp8_tflops if dtype == "fp8" else spec.bf16_tflops
    result = {"gpu": spec.name, "dtype": dtype, "tflops": tflops, "hbm_tbps": spec.hbm_bandwidth_tbps,
              "threshold_batch_size": size}
    line = f"{spec.name}: {tflops:g} TFLOP/s / {spec.hbm_bandwidth_tbps:g} TB/s = threshold batch {size}"
    _emit(result, as_json, [line])


@calc_group.command("required-throughput")
@click.option("--requests", type=_sized(bounds.REQUESTS, integer=True), required=True, help="Requests in the job.")
@click.option("--input-tokens", type=_sized(bounds.TOKEN_MEAN), required=True, help="Mean input tokens per request.")
@click.option("--output-tokens", type=_sized(bounds.TOKEN_MEAN), required=True,
              help="Mean output tokens per request.")
@click.option("--deadline-hours", type=_sized(calc.Bound(0, bounds.SECONDS.high / 3600, low_open=True)),
              required=True, help="Hours allowed.")
@_json_option
def required_throughput_command(requests: int, input_tokens: float, output_tokens: float,
                                deadline_hours: float, as_json: bool) -> None:
    """Input and output tok/s a batch job needs to meet its deadline."""
    try:
        need = calc.required_throughput(requests, input_tokens, output_tokens, deadline_hours * 3600)
    except CalcInputError as err:
        raise _refused(err) from err
    _emit(need, as_json, [f"output {need.output_tokens_per_s:,.0f} tok/s, input {need.input_tokens_per_s:,.0f} tok/s "
                          f"over {need.deadline_s:,.0f} s"])


@calc_group.command("cost")
@click.option("--price-per-hour", type=_sized(bounds.PRICE), required=True,
              help="Price of one unit (node or GPU) per hour.")
@click.option("--units", type=_sized(bounds.POSITIVE_COUNT, integer=True), default=1, show_default=True,
              help="Units (nodes or GPUs) in the deployment.")
@click.option("--output-tps", type=_sized(bounds.RATE), required=True,
              help="Sustained output tok/s of the whole deployment.")
@_json_option
def cost_command(price_per_hour: float, units: int, output_tps: float, as_json: bool) -> None:
    """Cost per 1M output tokens ($32/node-hour x 16 nodes at 112,000 tok/s = $1.27)."""
    hourly = price_per_hour * units
    try:
        cost = calc.cost_per_million_output_tokens(hourly, output_tps)
    except CalcInputError as err:
        raise _refused(err) from err
    result = {"price_per_hour": hourly, "output_tokens_per_s": output_tps, "cost_per_million_output_tokens": cost}
    _emit(result, as_json, [f"${hourly:g}/hour at {output_tps:,.0f} tok/s = ${cost:.2f} per 1M output tokens"])


@calc_group.command("hicache-break-even")
@click.option("--tokens", type=_sized(bounds.TOKENS, integer=True), required=True,
              help="Prefix tokens to restore (e.g. one document).")
@click.option("--params", type=_sized(bounds.PARAMS), help="Active parameters per token; defaults to the --model's.")
@click.option("--gpu", default="H100-SXM", show_default=True, help="GPU from the catalogue.")
@click.option("--gpus", type=_sized(bounds.POSITIVE_COUNT, integer=True), default=1, show_default=True,
              help="GPUs sharing the prefill (TP size).")
@click.option("--compute-dtype", type=click.Choice(["bf16", "fp8"]), default="fp8", show_default=True)
@click.option("--efficiency", type=_sized(bounds.FRACTION), default=0.6, show_default=True,
              help="Fraction of peak FLOP/s reached.")
@click.option("--bandwidth-gbps", type=_sized(bounds.RATE),
              help="Host-to-GPU GB/s; defaults to the GPU's PCIe figure.")
@_kv_options
@_json_option
def hicache_break_even_command(tokens: int, params: float | None, gpu: str, gpus: int, compute_dtype: str,
                               efficiency: float, bandwidth_gbps: float | None, as_json: bool, **kv: Any) -> None:
    """Recompute time vs host transfer time for a cached prefix; HiCache pays when the ratio exceeds 1."""
    spec = _gpu(gpu)
    per_token = _kv_bytes(**kv)
    assert per_token is not None
    if params is None:
        model = _model(kv["model_ref"])
        if model is None:
            raise click.UsageError("give --params, or --model to use its active parameters")
        params = model.params_active
    tflops = spec.fp8_tflops if compute_dtype == "fp8" else spec.bf16_tflops
    try:
        even = calc.hicache_break_even(tokens, params, tflops, gpus, per_token,
                                       bandwidth_gbps or spec.pcie_gbps, efficiency)
    except CalcInputError as err:
        raise _refused(err) from err
    verdict = "offloading pays" if even.offload_pays else "HiCache is detrimental"
    _emit(even, as_json, [f"recompute {even.recompute_ms:.0f} ms vs transfer {even.transfer_ms:.0f} ms "
                          f"({even.kv_gb:.2f} GB): ratio {even.ratio:.1f}x, {verdict}"])


@calc_group.command("page-waste")
@click.option("--shared-tokens", type=click.IntRange(0, int(bounds.TOKENS.high)),
              help="Leading tokens two prefixes have in common.")
@click.option("--shared-through", type=click.IntRange(0, int(bounds.TOKENS.high) - 1),
              help="0-based index of the last identical token (casebook style).")
@click.option("--page-size", type=_sized(bounds.POSITIVE_COUNT, integer=True), required=True,
              help="--page-size of the server.")
@click.option("--document-tokens", type=_sized(bounds.TOKENS, integer=True),
              help="Document length, to express the worst case as a fraction.")
@_kv_options
@_json_option
def page_waste_command(shared_tokens: int | None, shared_through: int | None, page_size: int,
                       document_tokens: int | None, as_json: bool, **kv: Any) -> None:
    """Page boundary waste: shared tokens in the diverging page that must be recomputed (at most page - 1)."""
    if (shared_tokens is None) == (shared_through is None):
        raise click.UsageError("give exactly one of --shared-tokens and --shared-through")
    shared = shared_tokens if shared_tokens is not None else int(shared_through or 0) + 1
    per_token = _kv_bytes(**kv, required=False)
    try:
        waste = calc.page_boundary_waste(shared, page_size, document_tokens=document_tokens,
                                         bytes_per_token=per_token)
    except CalcInputError as err:
        raise _refused(err) from err
    lines = [f"{waste.reusable_tokens:,} tokens reusable, {waste.wasted_tokens} wasted "
             f"(at most {waste.max_wasted_tokens} with page size {page_size})"]
    if waste.max_waste_fraction is not None:
        lines.append(f"worst case {waste.max_waste_fraction:.1%} of {document_tokens:,} tokens "
                     f"({waste.document_pages} pages)")
    if waste.transfer_unit_mb is not None:
        lines.append(f"transfer unit {waste.transfer_unit_mb:.1f} MB per page")
    _emit(waste, as_json, lines)
