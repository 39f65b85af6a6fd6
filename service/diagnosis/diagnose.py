"""The casebook's diagnosis as a function: read a benchmark in order and name the technique to try next."""

from __future__ import annotations

from collections.abc import Callable

from service.diagnosis.bench_output import parse_bench_output
from service.diagnosis.bench_rules import BENCH_RULES
from service.diagnosis.findings import Diagnosis, DiagnosisContext, Finding
from service.diagnosis.metrics_scrape import parse_metrics_scrape
from service.diagnosis.observed import Observed
from service.diagnosis.server_log import read_server_log
from service.diagnosis.server_rules import SERVER_RULES
from service.diagnosis.target_rules import TARGET_RULES
from service.domain import Scenario, WorkloadProfile, resolve_model

ReadingRule = Callable[[Observed], Finding | None]
# The casebook's reading order: the bench block (steps 1-4), then the server metrics (5-9), then the targets.
READING_ORDER: tuple[ReadingRule, ...] = (*BENCH_RULES, *SERVER_RULES, *TARGET_RULES)
_SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}


def diagnose(
    bench_output: str,
    metrics_scrape: str | None = None,
    profile: WorkloadProfile | None = None,
    *,
    context: DiagnosisContext | None = None,
) -> Diagnosis:
    """Read a bench_serving result the way the casebook does and name the technique to try next.

    Args:
        bench_output: bench_serving's printed result block (any version, or the casebook's abridged
            blocks) or a line of its `--output-file` JSONL.
        metrics_scrape: The body of the server's `/metrics` (`sglang:` or `sglang_` names), if scraped.
        profile: The workload profile (prefix sharing rate, peak rate, total requests for a deadline).
        context: What bench_serving does not print: SLO, failure rate, model kind, workers, server log.

    Returns:
        Findings in the casebook's reading order and the next technique: the first cause found
        (critical before warning), else the first missed target's technique.

    Raises:
        DiagnosisInputError: an input cannot be read; the message names it and what to pass instead.
    """
    context = context or DiagnosisContext()
    log_text = "\n".join(text for text in (bench_output, context.server_log) if text)
    observed = Observed(
        bench=parse_bench_output(bench_output),
        metrics=parse_metrics_scrape(metrics_scrape) if metrics_scrape else None,
        log=read_server_log(log_text),
        profile=profile,
        context=context,
    )
    findings = [finding for rule in READING_ORDER if (finding := rule(observed)) is not None]
    next_finding = _next_finding(findings)
    return Diagnosis(
        findings=findings,
        next_technique=next_finding.technique if next_finding else None,
        next_reason=_next_reason(next_finding),
        summary=_summary(findings, next_finding),
        bench=observed.bench.figures,
        bench_fields=observed.bench.fields,
        max_concurrency=observed.bench.max_concurrency,
        server=observed.metrics.server if observed.metrics else None,
        missing=_missing(observed),
    )


def _next_finding(findings: list[Finding]) -> Finding | None:
    """Causes before symptoms (fix the bottleneck, not the figure); critical first; then reading order."""
    actionable = [f for f in findings if f.technique is not None]
    if not actionable:
        return None
    return min(actionable, key=lambda f: (f.kind != "cause", _SEVERITY_RANK[f.severity], f.step))


def _next_reason(finding: Finding | None) -> str:
    if finding is None:
        return "No finding calls for a change: the figures are the baseline to compare later rounds with."
    return f"{finding.technique} addresses '{finding.id}' (reading step {finding.step}): {finding.title}"


def _summary(findings: list[Finding], next_finding: Finding | None) -> str:
    lines = [f"[{f.severity}] {f.title}" for f in findings if f.severity != "info"]
    if not lines:
        lines = ["No anomaly in the figures given."]
    if next_finding is not None:
        lines.append(f"Next: {next_finding.technique}.")
    return "\n".join(lines)


def _missing(obs: Observed) -> list[str]:
    missing = []
    if obs.metrics is None:
        missing.append("metrics: a /metrics scrape adds token_usage, num_queue_reqs, cache_hit_rate and "
                       "retractions (reading steps 5-8).")
    if obs.profile is None:
        missing.append("profile: a workload profile adds the prefix sharing rate (step 7) and the peak rate or "
                       "total requests the throughput must carry.")
    if obs.context.slo is None:
        missing.append("slo: targets (TTFT p95, ITL median, failure rate, deadline) say which figures miss.")
    if obs.figure("max_itl_ms") is None and obs.figure("p99_itl_ms") is None:
        missing.append("bench_output: Max ITL (ms) is needed for the scheduler-stall reading (step 3).")
    return missing


def context_from_scenario(
    scenario: Scenario, *, failure_rate: float | None = None, server_log: str | None = None
) -> DiagnosisContext:
    """Build the diagnosis context from a scenario file: SLO, model kind, workers, TP and EP sizes."""
    try:
        is_moe: bool | None = resolve_model(scenario.model).is_moe
    except (KeyError, FileNotFoundError, ValueError):
        is_moe = None
    groups = scenario.deployment.groups
    unified = [g for g in groups if g.role == "unified"] or groups
    first = unified[0].server if unified else None
    return DiagnosisContext(
        slo=scenario.slo,
        failure_rate=failure_rate,
        model_is_moe=is_moe,
        workers=sum(g.replicas for g in unified),
        tp_size=first.tp_size if first else None,
        ep_size=first.ep_size if first else None,
        router_policy=scenario.deployment.router.policy if scenario.deployment.router else None,
        server_log=server_log,
    )
