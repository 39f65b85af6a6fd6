"""sglang-tuner's public facade: what plugins and policies may import.

Plugins import from `service` only (never `service.<private module>`), so the internals can move freely.
"""

from service.calibration import (
    CalibratedCostModel,
    Observation,
    cost_model_for,
    fit_calibration,
    simulate_chosen,
    simulate_with,
)
from service.components import (
    Applicability,
    CostModel,
    MeasuredHere,
    Playbook,
    Policy,
    Prediction,
    RoundContext,
    Runner,
    RunnerCapabilities,
    StepCostModel,
    Technique,
    TuningContext,
)
from service.cost_model_choice import choose_cost_model
from service.domain import *  # noqa: F403
from service.domain import __all__ as _domain_all
from service.domain.model import bundled_configs, model_from_config, shipped_models
from service.hookspecs import hookimpl
from service.loadgen import (
    WARM_PROMPTS_SEED_OFFSET,
    LoadAborted,
    LoadPlan,
    PhaseResult,
    PromptRequest,
    bench_figures,
    bench_module,
    bench_serving_argv,
    bench_serving_warm_argv,
    build_prompts,
    json_failures,
    read_bench_output,
    read_cache_tiers,
    request_samples,
    run_load,
    sglang_available,
    write_bench_traces,
)
from service.logs import get_logger
from service.playbooks import load_playbook, load_playbook_dir
from service.scenario import scenario_sharing
from service.scenario_check import check_candidate, check_scenario
from service.settings import PhaseDeadlines, RunnerSettings, load_runner_settings
from service.sglang import ROUTER, RenderedLaunch, RenderRefused, ValidationIssue, render_scenario, validate_argv
from service.simulator import simulate_round
from service.simulator.memory import (
    SPECULATIVE_ALGORITHMS,
    SPECULATIVE_MAX_RUNNING,
    ResolvedServer,
    ServerStartError,
    default_chunked_prefill,
    host_budget_bytes,
    node_ranks,
    resolve_server,
    server_starts,
)
from service.simulator.speculative import keeps_mixed_chunk

__all__ = [
    "WARM_PROMPTS_SEED_OFFSET",
    "Applicability",
    "CalibratedCostModel",
    "MeasuredHere",
    "Observation",
    "Prediction",
    "cost_model_for",
    "fit_calibration",
    "simulate_with",
    "simulate_chosen",
    "choose_cost_model",
    "CostModel",
    "Playbook",
    "Policy",
    "RoundContext",
    "Runner",
    "RunnerCapabilities",
    "StepCostModel",
    "Technique",
    "TuningContext",
    "get_logger",
    "hookimpl",
    "simulate_round",
    "ResolvedServer",
    "SPECULATIVE_ALGORITHMS",
    "SPECULATIVE_MAX_RUNNING",
    "ServerStartError",
    "default_chunked_prefill",
    "host_budget_bytes",
    "node_ranks",
    "keeps_mixed_chunk",
    "resolve_server",
    "server_starts",
    "LoadAborted",
    "LoadPlan",
    "PhaseDeadlines",
    "PhaseResult",
    "PromptRequest",
    "ROUTER",
    "RenderRefused",
    "RenderedLaunch",
    "RunnerSettings",
    "ValidationIssue",
    "bench_figures",
    "bench_module",
    "bench_serving_argv",
    "bench_serving_warm_argv",
    "build_prompts",
    "load_runner_settings",
    "read_bench_output",
    "read_cache_tiers",
    "render_scenario",
    "request_samples",
    "json_failures",
    "run_load",
    "sglang_available",
    "write_bench_traces",
    "validate_argv",
    "check_candidate",
    "check_scenario",
    "scenario_sharing",
    "model_from_config",
    "bundled_configs",
    "shipped_models",
    "load_playbook",
    "load_playbook_dir",
    *_domain_all,
]
