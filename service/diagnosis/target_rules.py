"""Step 10: the figures against the stated targets (SLO, failure rate, deadline, peak rate)."""

from __future__ import annotations

from typing import TypedDict

from service.diagnosis import casebook as cb
from service.diagnosis.findings import Evidence, Finding
from service.diagnosis.observed import Observed

TARGET_STEP = 10


def failure_rate(obs: Observed) -> Finding | None:
    """Outputs that fail to parse or validate: prompt-only JSON leaves a few percent (casebook case 4)."""
    rate = obs.context.failure_rate
    if rate is None:
        return None
    limit = obs.slo.failure_rate_max
    if rate <= (limit or 0.0):
        return None
    return Finding(
        id="failure_rate_over_target", step=TARGET_STEP, severity="critical", kind="cause",
        title=f"Failure rate {rate:.2%} exceeds the target {(limit or 0.0):.2%}: constrain decoding with a grammar "
              "backend instead of asking for the format in the prompt.",
        evidence={"failure_rate": rate, "failure_rate_max": limit or 0.0},
        rule=cb.FAILURE_RATE.text, source=cb.FAILURE_RATE.source, technique=cb.GRAMMAR,
    )


def ttft_over_slo(obs: Observed) -> Finding | None:
    """TTFT against the SLO; bench blocks that omit P95 are judged from the median and P99."""
    for percentile, target in (("p95", obs.slo.ttft_p95_ms), ("p99", obs.slo.ttft_p99_ms),
                               ("median", obs.slo.ttft_median_ms)):
        if target is not None:
            verdict = _percentile_verdict(obs, "ttft", percentile, target)
            if verdict is not None:
                return _latency_finding("ttft_over_slo", "TTFT", percentile, target, verdict,
                                        cb.TTFT_SLO, cb.CHUNKED_PREFILL)
    return None


def itl_over_slo(obs: Observed) -> Finding | None:
    """Median ITL against the SLO (memory-bound decode: FP8 halves the bytes read per step)."""
    target = obs.slo.itl_median_ms
    if target is None:
        return None
    verdict = _percentile_verdict(obs, "itl", "median", target)
    if verdict is None:
        return None
    return _latency_finding("itl_over_slo", "ITL", "median", target, verdict, cb.ITL_SLO, cb.QUANTIZATION)


def _percentile_verdict(obs: Observed, series: str, percentile: str, target: float) -> tuple[str, Evidence] | None:
    """Return (how it was judged, evidence) when the percentile is over target, else None."""
    exact = obs.figure(f"{percentile}_{series}_ms")
    if exact is not None:
        return (f"is {exact:,.2f} ms, over the SLO of {target:,.0f} ms", {f"{percentile}_{series}_ms": exact}) \
            if exact > target else None
    if percentile != "p95":
        return None
    # P95 lies between the median and P99: a median over target means P95 is too, a P99 under it means not.
    median, p99 = obs.figure(f"median_{series}_ms"), obs.figure(f"p99_{series}_ms")
    if median is not None and median > target:
        return (f"is over the SLO of {target:,.0f} ms: the median is already {median:,.2f} ms",
                {f"median_{series}_ms": median})
    if p99 is not None and p99 > target and (median is None or median <= target):
        return (f"is likely over the SLO of {target:,.0f} ms: P95 is not printed and P99 is {p99:,.2f} ms",
                {f"median_{series}_ms": median, f"p99_{series}_ms": p99})
    return None


def _latency_finding(ident: str, name: str, percentile: str, target: float, verdict: tuple[str, Evidence],
                     rule: cb.Rule, technique: str) -> Finding:
    judged, evidence = verdict
    return Finding(
        id=ident, step=TARGET_STEP, severity="critical", kind="symptom",
        title=f"{name} {percentile} {judged}.",
        evidence=evidence | {f"slo_{name.lower()}_{percentile}_ms": target},
        rule=rule.text, source=rule.source, technique=technique,
    )


def throughput_short_of_deadline(obs: Observed) -> Finding | None:
    """Output throughput against what a deadline requires (casebook case 3: 8,333 tok/s for 12 h)."""
    output, total, hours = obs.figure("output_throughput"), _deadline_tokens(obs), obs.slo.deadline_hours
    if not output or not total or not hours:
        return None
    required = total / (hours * 3600.0)
    if output >= required:
        return None
    shortfall = required / output
    return Finding(
        id="throughput_short_of_deadline", step=TARGET_STEP, severity="critical", kind="symptom",
        title=f"Output throughput {output:,.0f} tok/s is {shortfall:.1f}x short of the {required:,.0f} tok/s the "
              f"{hours:g} h deadline needs (estimated completion {total / output / 3600.0:.1f} h).",
        evidence={"output_throughput": output, "required_output_throughput": round(required, 1),
                  "deadline_hours": hours, "deadline_output_tokens": total,
                  "estimated_completion_hours": round(total / output / 3600.0, 1)},
        rule=cb.DEADLINE.text, source=cb.DEADLINE.source, **_shortfall_technique(obs, shortfall),
    )


def _deadline_tokens(obs: Observed) -> float | None:
    if obs.slo.deadline_output_tokens:
        return obs.slo.deadline_output_tokens
    profile = obs.profile
    if profile is not None and profile.total_requests:
        return float(profile.total_requests * profile.output.median)
    return None


def throughput_short_of_peak(obs: Observed) -> Finding | None:
    """Request (or output) throughput against the peak the service must carry."""
    measured, target, unit = _peak_target(obs)
    if measured is None or target is None or measured >= target:
        return None
    shortfall = target / measured if measured else float("inf")
    key = "request_throughput" if unit == "req/s" else "output_throughput"
    return Finding(
        id="throughput_short_of_peak", step=TARGET_STEP, severity="critical", kind="symptom",
        title=f"{measured:,.2f} {unit} carries {measured / target:.0%} of the {target:,.2f} {unit} peak.",
        evidence={key: measured, f"peak_{key}": target, "shortfall": round(shortfall, 2)},
        rule=cb.PEAK.text, source=cb.PEAK.source, **_shortfall_technique(obs, shortfall),
    )


def _peak_target(obs: Observed) -> tuple[float | None, float | None, str]:
    slo, profile = obs.slo, obs.profile
    if slo.min_output_throughput:
        return obs.figure("output_throughput"), slo.min_output_throughput, "tok/s"
    peak = slo.min_request_throughput or (profile.peak_request_rate if profile is not None else None)
    return obs.figure("request_throughput"), peak, "req/s"


class _Remedy(TypedDict):
    """The `technique` and `alternatives` fields of a throughput finding."""

    technique: str
    alternatives: list[str]


def _shortfall_technique(obs: Observed, shortfall: float) -> _Remedy:
    if shortfall >= cb.MODEL_SELECTION_SHORTFALL:
        return {"technique": cb.MODEL_SELECTION, "alternatives": [cb.PARALLELISM, cb.BATCH_PARAMETERS]}
    if obs.context.model_is_moe:
        return {"technique": cb.MOE_PARALLELISM, "alternatives": [cb.PARALLELISM, cb.PD_DISAGGREGATION]}
    return {"technique": cb.PARALLELISM, "alternatives": [cb.BATCH_PARAMETERS, cb.MODEL_SELECTION]}


TARGET_RULES = (failure_rate, ttft_over_slo, itl_over_slo, throughput_short_of_deadline, throughput_short_of_peak)
