"""The casebook's capacity calculation as door checks: weights against each GPU, prompts against the context
window and against the requests a server's KV pool admits.

Each check runs before anything launches; an error is a deployment that can never start or serve the traffic
at all, a warning one that refuses part of it.
"""

from __future__ import annotations

import msgspec

from service.domain import ModelSpec, Scenario, ServerConfig, resolve_model
from service.sglang.topology import group_field
from service.sglang.values import ValidationIssue
from service.simulator.memory import (
    PROMPT_MARGIN,
    WeightsDoNotFit,
    context_window,
    request_bound,
    resolve_server,
    server_starts,
    weights_per_gpu,
)


def check_capacity(scenario: Scenario) -> list[ValidationIssue]:
    """Weights that leave no pool, prompts past the context window, prompts past what the pool admits."""
    try:
        model = resolve_model(scenario.model)
    except (KeyError, OSError, ValueError):
        return []  # check_model has named it
    if model.prequantized and not model.prequantized_bits:
        # A checkpoint stored quantized in bits its config.json does not state cannot be sized.
        return check_context(scenario, model)
    fit = check_weights_fit(scenario, model)
    return fit + check_context(scenario, model) + ([] if fit else check_request_bound(scenario, model))


def check_context(scenario: Scenario, model: ModelSpec) -> list[ValidationIssue]:
    """Prompts longer than the model's context window, which SGLang refuses request by request.

    The window is the model's `max_position_embeddings`, or a smaller `--context-length` the server sets. A
    median prompt past it means most requests are refused (an error: nothing the job measured would be the
    traffic); a p95 prompt plus answer past it, that the longest few percent are (a warning).
    """
    workload = scenario.workload
    window = min(context_window(model, g.server.extra.get("--context-length")) for g in scenario.deployment.groups)
    source = (f"{model.name}'s context window of {window:,} tokens" if window == model.max_context else
              f"the server's --context-length of {window:,} tokens")
    median, tail = workload.input.median, workload.input.p95_tokens() + workload.output.p95_tokens()
    if median > window:
        return [ValidationIssue(
            field="workload.input.median",
            message=f"the median prompt of {median:,} tokens is longer than {source}; SGLang refuses every "
                    "request past it, so most of this traffic would never be served",
            hint=f"shorten the prompts below {window:,} tokens (retrieve or summarise), or choose a model with a "
                 "longer context")]
    if tail > window:
        return [ValidationIssue(
            field="workload.input.p95", severity="warning",
            message=f"a p95 prompt and answer take {tail:,} tokens, more than {source}: SGLang refuses the "
                    "longest few percent of requests (a real server's rounds count them as failed; the "
                    "simulator draws no prompt past the window, so its rounds leave them out)",
            hint=f"keep prompt and answer under {window:,} tokens, or choose a model with a longer context")]
    return []


def check_weights_fit(scenario: Scenario, model: ModelSpec) -> list[ValidationIssue]:
    """A server whose weights leave no KV cache in its static pool, which SGLang refuses at every start.

    The casebook's capacity calculation, done before the first round: weights per GPU (split by TP, experts by
    EP) against mem-fraction-static x HBM, sized as the simulator sizes the pool. A checkpoint stored quantized
    is sized in its own bits (config.json's quantization_config).
    """
    issues = []
    for index, group in enumerate(scenario.deployment.groups):
        try:
            resolve_server(model, scenario.hardware, group.server)
        except WeightsDoNotFit as exc:
            issues.append(_chunk_reserve_issue(model, scenario, index, group.server, exc) or ValidationIssue(
                field=group_field(index, "server.tp-size"), flag="--tp-size",
                message=f"the server cannot start: {exc}", hint=_fitting_hint(model, scenario, group.server)))
        except ValueError:
            continue  # other start failures (activation headroom) are the runner's to report
    return issues


def _chunk_reserve_issue(model: ModelSpec, scenario: Scenario, index: int, server: ServerConfig,
                         exc: WeightsDoNotFit) -> ValidationIssue | None:
    """The issue when it is the chunk, not the weights: SGLang's default mem-fraction-static sets aside 1.5 MB
    per token of the chunk (`memory_hook.py`), so a long chunk on a small GPU leaves the weights no room.

    None when the server would not start with SGLang's default chunk either (the weights are the cause).
    """
    chunk = server.chunked_prefill_size
    if server.mem_fraction_static is not None or chunk is None or chunk <= 0 or not server_starts(
            model, scenario.hardware, msgspec.structs.replace(server, chunked_prefill_size=None)):
        return None
    fits = next((size for size in (chunk // 2**i for i in range(1, 6)) if size >= 2048 and server_starts(
        model, scenario.hardware, msgspec.structs.replace(server, chunked_prefill_size=size))), None)
    smaller = f"a chunked-prefill-size of {fits} or less" if fits else "SGLang's default chunked-prefill-size"
    return ValidationIssue(
        field=group_field(index, "server.chunked-prefill-size"), flag="--chunked-prefill-size",
        message=f"the server cannot start: {exc}: SGLang's default mem-fraction-static sets aside 1.5 MB per "
                f"token of the {chunk}-token chunk for activations",
        hint=f"set mem-fraction-static explicitly, or use {smaller}")


def _fitting_hint(model: ModelSpec, scenario: Scenario, server: ServerConfig) -> str:
    """The smallest TP (within the hardware) whose weights take at most 80% of a GPU, and FP8 where it helps."""
    hbm = scenario.hardware.spec.hbm_gb * 1024**3
    options = []
    tp = server.tp_size
    while tp < scenario.hardware.total_gpus:
        tp *= 2
        wider = msgspec.structs.replace(server, tp_size=tp)
        if weights_per_gpu(model, wider) <= 0.8 * hbm:
            options.append(f"tp-size {tp} ({weights_per_gpu(model, wider) / 1024**3:.0f} GiB of weights per GPU)")
            break
    if server.weight_dtype != "fp8" and scenario.hardware.spec.supports_fp8:
        fp8 = msgspec.structs.replace(server, quantization="fp8")
        if weights_per_gpu(model, fp8) <= 0.8 * hbm:
            options.append(f'quantization = "fp8" ({weights_per_gpu(model, fp8) / 1024**3:.0f} GiB per GPU), '
                           "after a quality check")
    return ("use " + " or ".join(options)) if options else \
        "the model does not fit this hardware: use more or larger GPUs, or a smaller model"


def check_request_bound(scenario: Scenario, model: ModelSpec) -> list[ValidationIssue]:
    """Prompts a server's KV pool cannot admit, which SGLang refuses request by request.

    SGLang bounds a request by `max_req_len = min(context length, pool tokens) - 1` (`managers/tp_worker.py`)
    and refuses a prompt of `max_req_len - 5` tokens or more; under PD each pool checks its own. A median
    prompt past it is an error (most of the traffic refused), a p95 prompt a warning (the round runs and counts
    the refusals as failed requests). Where the context window is the tighter bound, `check_context` speaks.
    """
    workload = scenario.workload
    median, p95 = workload.input.median, workload.input.p95_tokens()
    for index, group in enumerate(scenario.deployment.groups):
        try:
            resolved = resolve_server(model, scenario.hardware, group.server)
        except ValueError:
            continue  # a server that does not start is check_weights_fit's, or the runner's, to report
        pool = resolved.rank_pool_tokens
        if pool >= context_window(model, group.server.extra.get("--context-length")):
            continue
        admitted = request_bound(model, resolved, group.server.extra.get("--context-length")) - PROMPT_MARGIN
        if p95 < admitted:
            continue
        holder = "DP-attention rank" if resolved.attention_dp > 1 else "instance"
        where = f"{group.name}'s KV pool of {pool:,} tokens per {holder} admits prompts under {admitted:,} tokens"
        hint = "give each instance " + _larger_pool_hint(model, scenario, group.server, p95 + PROMPT_MARGIN + 2)
        if median >= admitted:
            return [ValidationIssue(
                field=group_field(index, "server.tp-size"), flag="--tp-size",
                message=f"{where}; the median prompt of {median:,} tokens is refused, so most of this traffic "
                        "would never be served", hint=hint)]
        return [ValidationIssue(
            field=group_field(index, "server.tp-size"), flag="--tp-size", severity="warning",
            message=f"{where}; the p95 prompt of {p95:,} tokens is refused, so the longest few percent of "
                    "requests fail (every round counts them, and a job's baseline with refusals ends the job)",
            hint=hint)]
    return []


def _larger_pool_hint(model: ModelSpec, scenario: Scenario, server: ServerConfig, need: int) -> str:
    """The nearest changes whose pool admits `need` tokens: a wider TP the nodes hold, an FP8 KV cache."""
    options = []
    tp = server.tp_size
    while tp * 2 * server.pp_size <= scenario.hardware.gpus_per_node * scenario.hardware.nodes:
        tp *= 2
        pool = _pool(model, scenario, msgspec.structs.replace(server, tp_size=tp))
        if pool > need:
            options.append(f"more GPUs: tp-size {tp} (a pool of {pool:,} tokens)")
            break
    if server.kv_dtype == "bf16" and scenario.hardware.spec.supports_fp8:
        pool = _pool(model, scenario, msgspec.structs.replace(server, kv_cache_dtype="fp8_e5m2"))
        if pool > need:
            options.append(f'an FP8 KV cache: kv-cache-dtype = "fp8_e5m2" (a pool of {pool:,} tokens), after a '
                           "quality check")
    if not options:
        return f"a pool of more than {need:,} tokens: larger GPUs or a model with a smaller KV cache per token"
    return "a pool of more than " + f"{need:,} tokens: " + " or ".join(options)


def _pool(model: ModelSpec, scenario: Scenario, server: ServerConfig) -> int:
    try:
        return resolve_server(model, scenario.hardware, server).rank_pool_tokens
    except ValueError:
        return 0
