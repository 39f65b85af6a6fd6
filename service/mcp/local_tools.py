"""Tools that answer from this process alone: profiling, capacity, diagnosis, playbook choice, render, validate."""

from __future__ import annotations

import tempfile
from pathlib import Path

import anyio.to_thread
import msgspec

from service.calc import (
    kv_capacity,
    kv_memory_gb,
    model_kv_bytes_per_token,
    required_throughput,
    threshold_batch_size,
    weight_memory_gb,
)
from service.diagnosis import DiagnosisContext, DiagnosisInputError, diagnose
from service.domain import Scenario, gpu_spec, resolve_model
from service.loadgen.bench_serving import scenario_bench_argv
from service.mcp.inputs import (
    DiagnoseBenchmarkInput,
    PlanCapacityInput,
    ProfileWorkloadInput,
    RecommendPlaybookInput,
    ScenarioInput,
)
from service.mcp.playbook_choice import choose_playbook
from service.mcp.tools import ToolInputError, ToolResult, bounded
from service.profile import ProfileError, TokenizerNotFound, profile_log
from service.scenario import InputFileError, load_scenario, parse_scenario, scenario_from_data
from service.scenario_check import check_scenario
from service.sglang import RenderRefused, UnknownVersionError, errors, render_scenario


async def profile_workload(args: ProfileWorkloadInput) -> ToolResult:
    """Measure input/output lengths, prefix sharing and rates from a request log."""
    if (args.log_path is None) == (args.log_text is None):
        raise ToolInputError("invalid argument `log_path`/`log_text`: pass exactly one. Fix: a path the server "
                             "can read, or the JSON-lines text itself.")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(args.log_path) if args.log_path else Path(folder) / "requests.jsonl"
        if args.log_text is not None:
            path.write_text(args.log_text, encoding="utf-8")
        try:
            measured = await anyio.to_thread.run_sync(
                lambda: profile_log(path, Path(args.tokenizer), page_size=args.page_size))
        except (ProfileError, TokenizerNotFound, FileNotFoundError) as exc:
            raise ToolInputError(f"invalid argument `log_path`/`tokenizer`: {exc}. Fix: point at a readable "
                                 "JSON-lines log and a folder holding tokenizer.json.") from exc
    summary = (f"{measured.requests} requests: input median {measured.input_median:g} / p95 {measured.input_p95}, "
               f"output median {measured.output_median:g} / p95 {measured.output_p95}, prefix sharing rate "
               f"{measured.prefix_sharing_rate:.3f}, radix reuse {measured.radix_reuse_rate:.3f}.")
    data, truncated = bounded(measured)
    return ToolResult(summary=summary, data=data, truncated=truncated)


async def plan_capacity(args: PlanCapacityInput) -> ToolResult:
    """KV bytes per token, weights, KV for the peak, capacity left, threshold batch and deadline rate."""
    try:
        model, gpu = resolve_model(args.model), gpu_spec(args.gpu)
    except KeyError as exc:
        raise ToolInputError(f"invalid argument `model`/`gpu`: {exc.args[0]}. Fix: use a shipped model id "
                             "and a GPU kind from the hardware catalogue.") from exc
    per_token = model_kv_bytes_per_token(model, args.kv_dtype)
    weights = weight_memory_gb(model.params_total, args.weight_dtype)
    data: dict[str, object] = {"kv_bytes_per_token": per_token, "weights_gb": round(weights, 2),
                               "threshold_batch_size": threshold_batch_size(gpu)}
    lines = [f"{model.name}: {per_token / 1024:g} KB of KV per token ({args.kv_dtype}), weights {weights:.1f} GB "
             f"({args.weight_dtype}); threshold batch size on {gpu.name} is {data['threshold_batch_size']}."]
    if args.context_tokens and args.concurrency:
        peak = kv_memory_gb(per_token, args.context_tokens, args.concurrency)
        data["kv_for_peak_gb"] = round(peak, 2)
        lines.append(f"{args.concurrency} requests x {args.context_tokens:,} tokens need {peak:.1f} GB of KV.")
    try:
        capacity = kv_capacity(gpu.hbm_gb * args.gpus, weights, args.headroom_gb, per_token,
                               document_tokens=args.document_tokens, hicache_ratio=args.hicache_ratio)
    except ValueError as exc:
        raise ToolInputError(f"invalid argument `gpus`/`headroom_gb`: {exc}. Fix: add GPUs or lower headroom.") from exc
    data["capacity"] = msgspec.to_builtins(capacity)
    lines.append(f"{args.gpus}x{gpu.name} leaves {capacity.kv_available_gb:.0f} GB for KV: {capacity.kv_tokens:,} "
                 "tokens" + (f", {capacity.total_documents} documents" if capacity.total_documents is not None else ""))
    _add_deadline(args, data, lines)
    return ToolResult(summary="\n".join(lines), data=data)


def _add_deadline(args: PlanCapacityInput, data: dict[str, object], lines: list[str]) -> None:
    if not (args.batch_requests and args.batch_output_tokens and args.deadline_hours):
        return
    needed = required_throughput(args.batch_requests, args.batch_input_tokens or 0.0, args.batch_output_tokens,
                                 args.deadline_hours * 3600.0)
    data["required_throughput"] = msgspec.to_builtins(needed)
    lines.append(f"The {args.deadline_hours:g} h deadline needs {needed.output_tokens_per_s:,.0f} output tok/s.")


async def diagnose_benchmark(args: DiagnoseBenchmarkInput) -> ToolResult:
    """The casebook's reading order over a bench_serving result."""
    is_moe = None
    if args.model:
        try:
            is_moe = resolve_model(args.model).is_moe
        except KeyError as exc:
            raise ToolInputError(f"invalid argument `model`: {exc.args[0]}. Fix: a shipped model id, or omit it.") from exc
    context = DiagnosisContext(slo=args.slo, failure_rate=args.failure_rate, model_is_moe=is_moe,
                               workers=args.workers, tp_size=args.tp_size, ep_size=args.ep_size,
                               router_policy=args.router_policy, server_log=args.server_log)
    try:
        result = diagnose(args.bench_output, args.metrics, args.profile, context=context)
    except DiagnosisInputError as exc:
        raise ToolInputError(f"invalid argument: {exc}") from exc
    data, truncated = bounded(result)
    return ToolResult(summary=result.summary, data=data, truncated=truncated,
                      links={"techniques": "sglang-tuner://techniques"})


async def recommend_playbook(args: RecommendPlaybookInput) -> ToolResult:
    """Pick the casebook case whose constraint matches the workload and SLO."""
    name, reason = choose_playbook(args.workload, args.slo, args.hardware)
    return ToolResult(summary=f"Playbook {name}: {reason}", data={"playbook": name, "reason": reason},
                      links={"playbook": f"sglang-tuner://playbooks/{name}"})


def scenario_from_input(args: ScenarioInput) -> Scenario:
    """Decode the one scenario the input carries.

    Raises:
        ToolInputError: none or several given, or the scenario does not decode (file, line, field named).
    """
    given = [v for v in (args.scenario_toml, args.scenario, args.scenario_path) if v is not None]
    if len(given) != 1:
        raise ToolInputError("invalid argument `scenario`: pass exactly one of scenario_toml, scenario, "
                             "scenario_path. Fix: see examples/casebook/coding-assistant-final.toml for the format.")
    try:
        if args.scenario_toml is not None:
            return parse_scenario(args.scenario_toml)
        if args.scenario is not None:
            return scenario_from_data(args.scenario)
        return load_scenario(str(args.scenario_path))
    except InputFileError as exc:
        raise ToolInputError(f"invalid argument `scenario`: {exc}") from exc


async def render_launch_commands(args: ScenarioInput) -> ToolResult:
    """Exact argv lists for every worker and the router."""
    scenario = scenario_from_input(args)
    try:
        launch = render_scenario(scenario, sglang_version=args.sglang_version)
    except RenderRefused as exc:
        raise ToolInputError(f"invalid argument `scenario`: {exc}") from exc
    except UnknownVersionError as exc:
        raise ToolInputError(f"invalid argument `sglang_version`: {exc}") from exc
    lines = [f"{len(launch.workers)} worker(s) for SGLang {launch.sglang_version}"
             + (" behind a router" if launch.router else "") + "."]
    lines += [" ".join(f"{k}={v}" for k, v in w.env.items()) + " " + " ".join(w.argv) for w in launch.workers]
    if launch.router:
        lines.append(" ".join(launch.router.argv))
    target = launch.router.url if launch.router is not None else launch.workers[0].url
    bench = scenario_bench_argv(scenario, target, sglang_version=launch.sglang_version)
    lines.append("benchmark: " + " ".join(bench))
    data, truncated = bounded({**msgspec.to_builtins(launch), "bench": bench})
    return ToolResult(summary="\n".join(lines), data=data, truncated=truncated)


async def validate_config(args: ScenarioInput) -> ToolResult:
    """Every problem of a scenario's deployment for its SGLang version, with the fix."""
    scenario = scenario_from_input(args)
    # The check every door runs before a round (names, value ranges, flags, topology); an unknown version
    # is one of its issues.
    issues = check_scenario(scenario, sglang_version=args.sglang_version)
    blocking = errors(issues)
    summary = ("Valid: no blocking problem." if not blocking else f"{len(blocking)} blocking problem(s).")
    summary += "".join(f"\n- {i.field}: {i.message} ({i.hint})" for i in issues[:20])
    data, truncated = bounded({"valid": not blocking, "issues": issues})
    return ToolResult(summary=summary, data=data, truncated=truncated)
