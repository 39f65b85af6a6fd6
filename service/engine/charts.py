"""The data behind a job's charts: each headline figure per round (means and repeats), the SLO targets, and every
deployment measured in the job with its place on the Pareto frontiers.

A frontier keeps the deployments no other one beats on both of its figures: output tok/s per GPU (higher is
better) against p95 TTFT or median ITL (lower is better), and cost per 1M output tokens against p95 TTFT.
`pareto` is the frontier of all three of tok/s per GPU, p95 TTFT and median ITL together. Every figure is the
mean over the round's repeats, the figure its decision used; `source` says where it came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from service.domain import Round, RoundResult, RoundStatus, Scenario, Verdict, slo_checks
from service.engine.budget import Budget
from service.engine.delta import DeltaError
from service.engine.measure import mean_result
from service.engine.resume import resume_state

# Figures charted per round (bench_serving's names, plus the cost the runner computed).
HEADLINE_FIGURES = ["output_throughput", "p95_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p95_e2e_latency_ms",
                    "cost_per_1m_output_tokens"]
# SLO field -> the figure it bounds, and whether the figure must stay below the target.
SLO_FIGURES: dict[str, tuple[str, bool]] = {
    "ttft_p95_ms": ("p95_ttft_ms", True), "ttft_p99_ms": ("p99_ttft_ms", True),
    "ttft_median_ms": ("median_ttft_ms", True), "itl_median_ms": ("median_itl_ms", True),
    "itl_p99_ms": ("p99_itl_ms", True), "e2e_p95_ms": ("p95_e2e_latency_ms", True),
    "min_request_throughput": ("request_throughput", False), "min_output_throughput": ("output_throughput", False),
    "cost_per_1m_output_max": ("cost_per_1m_output_tokens", True), "failure_rate_max": ("failure_rate", True),
}
# Frontier name -> (figure, higher is better) pairs.
FRONTIERS: dict[str, tuple[tuple[str, bool], ...]] = {
    "p95_ttft_ms": (("output_throughput_per_gpu", True), ("p95_ttft_ms", False)),
    "median_itl_ms": (("output_throughput_per_gpu", True), ("median_itl_ms", False)),
    "cost_per_1m_output_tokens": (("cost_per_1m_output_tokens", False), ("p95_ttft_ms", False)),
}
PARETO: tuple[tuple[str, bool], ...] = (("output_throughput_per_gpu", True), ("p95_ttft_ms", False),
                                        ("median_itl_ms", False))
_DEPLOYMENT_FIGURES = ["output_throughput", "output_throughput_per_gpu", "request_throughput", "request_goodput",
                       "p95_ttft_ms", "p99_ttft_ms", "median_itl_ms", "p99_itl_ms", "p95_e2e_latency_ms",
                       "cost_per_1m_output_tokens", "failure_rate"]
_KEPT = (Verdict.ACCEPT, Verdict.KEEP_TRADEOFF)


class FlagChange(msgspec.Struct, kw_only=True):
    """One setting a round changed against the deployment it was judged against."""

    where: str  # a worker group's name, "router", or "" for the model and the client
    flag: str  # SGLang's spelling (`--tp-size`), `replicas`, `model` or `max_concurrency`
    before: Any = None
    after: Any = None


class ChartTarget(msgspec.Struct, kw_only=True):
    """An SLO target drawn on the charts of the figure it bounds."""

    name: str
    figure: str
    target: float
    lower_is_better: bool


class ChartRound(msgspec.Struct, kw_only=True):
    """One measured round: its figures (means over repeats) and each repeat's, and what it changed."""

    index: int
    technique: str
    summary: str
    line: int | None = None
    verdict: str | None = None
    pattern: str | None = None
    source: str
    figures: dict[str, float | None] = msgspec.field(default_factory=dict)
    repeats: dict[str, list[float]] = msgspec.field(default_factory=dict)
    changes: list[FlagChange] = msgspec.field(default_factory=list)


class ChartDeployment(msgspec.Struct, kw_only=True):
    """A deployment measured in the job, with its figures and its place on the frontiers."""

    round: int
    technique: str
    summary: str
    verdict: str | None = None
    line: int | None = None
    gpus: int
    source: str
    figures: dict[str, float | None] = msgspec.field(default_factory=dict)
    slo_met: bool | None = None
    pareto: bool = False
    frontiers: dict[str, bool] = msgspec.field(default_factory=dict)
    chosen: bool = False


class ReportCharts(msgspec.Struct, kw_only=True):
    """Everything the job's charts plot, for people (the web UI) and programs alike."""

    figures: list[str] = msgspec.field(default_factory=list)
    targets: list[ChartTarget] = msgspec.field(default_factory=list)
    rounds: list[ChartRound] = msgspec.field(default_factory=list)
    deployments: list[ChartDeployment] = msgspec.field(default_factory=list)
    chosen: int | None = None


def read_figure(result: RoundResult, name: str) -> float | None:
    """A figure of one result by name: a bench_serving key, `cost_per_1m_output_tokens` or `failure_rate`."""
    value = getattr(result.bench, name, None) if hasattr(result.bench, name) else getattr(result, name, None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def source_of(result: RoundResult) -> str:
    """Where a result's figures came from: `simulated (cost model)`, `emulated` or `measured`."""
    provenance = result.provenance
    source = provenance.source.value
    return f"{source} ({provenance.cost_model})" if provenance.cost_model else source


def build_charts(initial: Scenario, rounds: list[Round], scenarios: dict[int, Scenario],
                 chosen: int | None) -> ReportCharts:
    """The charts of a job.

    Args:
        initial: the job's starting scenario (its SLO, and the base of rounds whose base is not known).
        rounds: the job's rounds in index order; rounds without a full successful measurement are left out.
        scenarios: the deployment each measured round ran (round index -> scenario).
        chosen: the round whose deployment the job ended on (None while it runs).
    """
    targets = _targets(initial)
    figures = list(HEADLINE_FIGURES)
    figures += [t.figure for t in targets if t.figure not in figures]
    accepted: dict[int | None, Scenario] = {None: initial}
    chart_rounds: list[ChartRound] = []
    deployments: list[ChartDeployment] = []
    for round_ in sorted(rounds, key=lambda r: r.index):
        results = _ok_results(round_)
        scenario = scenarios.get(round_.index)
        if results is None or scenario is None:
            continue
        base = _base(round_, scenarios, accepted, initial)
        mean = mean_result(results)
        decision = round_.decision
        verdict = None if decision is None else decision.verdict.value
        summary = round_.delta.summary if round_.delta is not None else "starting point"
        chart_rounds.append(ChartRound(
            index=round_.index, technique=round_.technique, summary=summary, line=round_.line, verdict=verdict,
            pattern=None if decision is None else decision.pattern.value, source=source_of(results[0]),
            figures={name: read_figure(mean, name) for name in figures},
            repeats={name: [v for r in results if (v := read_figure(r, name)) is not None] for name in figures},
            changes=[] if round_.delta is None else flag_changes(base, scenario)))
        deployments.append(_deployment(round_, summary, verdict, mean, results[0], scenario, chosen))
        if round_.delta is None or (decision is not None and decision.verdict in _KEPT):
            accepted[round_.line] = scenario
    mark_frontiers(deployments)
    return ReportCharts(figures=figures, targets=targets, rounds=chart_rounds, deployments=deployments,
                        chosen=chosen if any(d.chosen for d in deployments) else None)


def _targets(scenario: Scenario) -> list[ChartTarget]:
    targets = []
    for name, (figure, lower) in SLO_FIGURES.items():
        value = getattr(scenario.slo, name, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            targets.append(ChartTarget(name=name, figure=figure, target=float(value), lower_is_better=lower))
    return targets


def _ok_results(round_: Round) -> list[RoundResult] | None:
    if not round_.results or any(r.status is not RoundStatus.OK for r in round_.results):
        return None
    return list(round_.results)


def _base(round_: Round, scenarios: dict[int, Scenario], accepted: dict[int | None, Scenario],
          initial: Scenario) -> Scenario:
    if round_.base is not None and round_.base in scenarios:
        return scenarios[round_.base]
    if round_.line is not None and round_.line not in accepted and round_.line in scenarios:
        return scenarios[round_.line]
    return accepted.get(round_.line, initial)


def _deployment(round_: Round, summary: str, verdict: str | None, mean: RoundResult, first: RoundResult,
                scenario: Scenario, chosen: int | None) -> ChartDeployment:
    gpus = scenario.deployment.total_gpus()
    figures = {name: read_figure(mean, name) for name in _DEPLOYMENT_FIGURES if name != "output_throughput_per_gpu"}
    throughput = figures.get("output_throughput")
    figures["output_throughput_per_gpu"] = throughput / gpus if throughput is not None and gpus > 0 else None
    checks = slo_checks(mean, scenario.slo)
    return ChartDeployment(round=round_.index, technique=round_.technique, summary=summary, verdict=verdict,
                           line=round_.line, gpus=gpus, source=source_of(first), figures=figures,
                           slo_met=all(c.met for c in checks) if checks else None, chosen=round_.index == chosen)


def mark_frontiers(deployments: list[ChartDeployment]) -> None:
    """Set each deployment's `frontiers` and `pareto` flags (a deployment lacking a figure is on no frontier of it)."""
    for name, axes in FRONTIERS.items():
        for deployment, on in zip(deployments, pareto_flags([d.figures for d in deployments], axes), strict=True):
            deployment.frontiers[name] = on
    for deployment, on in zip(deployments, pareto_flags([d.figures for d in deployments], PARETO), strict=True):
        deployment.pareto = on


def pareto_flags(points: list[dict[str, float | None]], axes: Iterable[tuple[str, bool]]) -> list[bool]:
    """For each point, whether no other point is at least as good on every axis and better on one."""
    axes = list(axes)
    keys: list[tuple[float, ...] | None] = []
    for point in points:
        values = [point.get(name) for name, _ in axes]
        keys.append(None if any(v is None for v in values)
                    else tuple(float(v) if higher else -float(v) for v, (_, higher) in zip(values, axes, strict=True)
                               if v is not None))
    return [key is not None and not any(other is not None and _dominates(other, key) for other in keys)
            for key in keys]


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x >= y for x, y in zip(a, b, strict=True)) and any(x > y for x, y in zip(a, b, strict=True))


# -- what a round changed -----------------------------------------------------------------------------------


def flag_changes(before: Scenario, after: Scenario) -> list[FlagChange]:
    """The settings that differ between two scenarios' deployments (and model, client concurrency)."""
    old, new = _settings(before), _settings(after)
    return [FlagChange(where=where, flag=flag, before=old.get((where, flag)), after=new.get((where, flag)))
            for where, flag in _ordered(old, new) if old.get((where, flag)) != new.get((where, flag))]


def _ordered(old: dict[tuple[str, str], Any], new: dict[tuple[str, str], Any]) -> list[tuple[str, str]]:
    return list(dict.fromkeys([*old, *new]))


def _settings(scenario: Scenario) -> dict[tuple[str, str], Any]:
    settings: dict[tuple[str, str], Any] = {("", "model"): scenario.model,
                                           ("", "max_concurrency"): scenario.bench.max_concurrency}
    deployment = scenario.deployment
    for group in deployment.groups:
        where = group.name if group.role == "unified" else f"{group.name} ({group.role})"
        settings[(where, "replicas")] = group.replicas
        server: dict[str, Any] = msgspec.to_builtins(group.server)
        extra = server.pop("extra", None) or {}
        for key, value in [*server.items(), *extra.items()]:
            if key != "model-path":
                settings[(where, f"--{key}")] = _plain(value)
    if deployment.router is not None:
        router: dict[str, Any] = msgspec.to_builtins(deployment.router)
        extra = router.pop("extra", None) or {}
        for key, value in [*router.items(), *extra.items()]:
            if key not in ("host", "port"):
                settings[("router", "--" + key.replace("_", "-"))] = _plain(value)
    return {k: v for k, v in settings.items() if v is not None}


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else msgspec.json.encode(value).decode()




def replayed_charts(initial: Scenario, rounds: list[Round], chosen: int | None) -> ReportCharts:
    """`build_charts` for committed rounds alone (a running job, or a report stored without charts): the
    deployment each round ran is rebuilt from the rounds as a resumed job rebuilds it."""
    try:
        scenarios = resume_state(initial, rounds, Budget(max_rounds=len(rounds) + 1)).scenarios
    except (DeltaError, KeyError, ValueError):
        scenarios = {}
    return build_charts(initial, rounds, scenarios, chosen)
