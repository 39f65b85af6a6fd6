"""What every policy computes first: the measurement check, the metric changes and the SLO gate."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from policies.changes import PATTERN_METRICS, Comparison, MetricChange, judge
from policies.settings import PolicySettings
from policies.slo_gate import GateOutcome, averaged, gate, slo_checks
from policies.slo_interval import Reading, SLOJudgement, judge_percentiles, judged_checks, judgement_text
from policies.wording import check_text
from service import SLO, BenchFigures, RoundResult, RoundStatus, SLOCheck, Verdict


def measurement_error(baseline: Sequence[RoundResult], candidate: Sequence[RoundResult]) -> str | None:
    """Why the rounds cannot be compared (failed, partial, empty or non-finite), or None.

    Fails closed: a measurement that is not whole is an error, never evidence for a change.
    """
    for side, results in (("baseline", baseline), ("candidate", candidate)):
        if not results:
            return f"no {side} measurement to compare"
        for index, result in enumerate(results):
            where = f"{side} repeat {index + 1}" if len(results) > 1 else side
            if result.status is not RoundStatus.OK:
                phase = f" during {result.error_phase}" if result.error_phase else ""
                return f"{where} measurement {result.status.value}{phase}: {result.error or 'no error message'}"
            if result.bench.completed <= 0:
                return f"{where} completed no request"
            bad = [name for name in BenchFigures.__struct_fields__
                   if isinstance(getattr(result.bench, name), float) and not math.isfinite(getattr(result.bench, name))]
            if bad or not math.isfinite(result.failure_rate):
                return f"{where} reported non-finite figures ({', '.join(bad) or 'failure_rate'})"
    return None


@dataclass(frozen=True)
class Evaluation:
    """The measured comparison of a candidate with its baseline."""

    comparison: Comparison
    changes: list[MetricChange]
    base_checks: list[SLOCheck]
    cand_checks: list[SLOCheck]
    gate: GateOutcome
    slo: SLO
    alpha: float
    # Percentile targets judged on each side's pooled requests, with their intervals.
    base_judged: dict[str, SLOJudgement] = field(default_factory=dict)
    cand_judged: dict[str, SLOJudgement] = field(default_factory=dict)

    @property
    def failure(self) -> MetricChange:
        """The failure-rate change."""
        return next(c for c in self.changes if c.spec.key == "failure_rate")

    def change(self, key: str) -> MetricChange:
        """One metric's change by bench key."""
        return next(c for c in self.changes if c.spec.key == key)


def evaluate(baseline: Sequence[RoundResult], candidate: Sequence[RoundResult], slo: SLO,
             settings: PolicySettings) -> Evaluation:
    """Compare every pattern metric and the failure rate, and run the SLO gate."""
    comparison = Comparison(baseline, candidate, settings)
    changes = judge([*(comparison.raw(spec) for spec in PATTERN_METRICS), comparison.failure_rate()], settings)
    base_judged = judge_percentiles(baseline, slo, settings.slo_confidence)
    cand_judged = judge_percentiles(candidate, slo, settings.slo_confidence)
    base_checks = judged_checks(slo_checks(averaged(baseline), slo), base_judged)
    cand_checks = judged_checks(slo_checks(averaged(candidate), slo), cand_judged)
    failure = next(c for c in changes if c.spec.key == "failure_rate")
    outcome = gate(comparison, slo, base_checks, cand_checks, failure, settings.alpha_improvement)
    return Evaluation(comparison=comparison, changes=changes, base_checks=base_checks,
                      cand_checks=cand_checks, gate=outcome, slo=slo, alpha=settings.alpha_improvement,
                      base_judged=base_judged, cand_judged=cand_judged)


def within_noise(ev: Evaluation) -> bool:
    """Whether any percentile target, on either side, is within noise of its target."""
    return any(j.reading is Reading.WITHIN_NOISE for j in (*ev.base_judged.values(), *ev.cand_judged.values()))


def reread(ev: Evaluation, candidate_met: bool | None = None, baseline_met: bool | None = None) -> Evaluation:
    """The evaluation with every target that is within noise read as met or missed, side by side (None
    leaves a side as measured), and the gate run again: what more seeds could turn the decision into."""
    def settle(checks: list[SLOCheck], judged: dict[str, SLOJudgement], met: bool | None) -> list[SLOCheck]:
        if met is None:
            return checks
        return [msgspec.structs.replace(c, met=met)
                if c.name in judged and judged[c.name].reading is Reading.WITHIN_NOISE else c for c in checks]

    base = settle(ev.base_checks, ev.base_judged, baseline_met)
    cand = settle(ev.cand_checks, ev.cand_judged, candidate_met)
    outcome = gate(ev.comparison, ev.slo, base, cand, ev.failure, ev.alpha)
    return dataclasses.replace(ev, base_checks=base, cand_checks=cand, gate=outcome)


def slo_lines(ev: Evaluation) -> list[str]:
    """One line per percentile target: the pooled figure of each side with its interval and reading."""
    lines = []
    for name, cand in ev.cand_judged.items():
        base = ev.base_judged.get(name)
        line = f"SLO {name}: candidate {judgement_text(cand)}"
        if base is not None:
            line += f"; baseline {judgement_text(base)}"
        if (cand.reading is Reading.WITHIN_NOISE or (base is not None and base.reading is Reading.WITHIN_NOISE)):
            line += " (judged on the point estimate until more seeds settle it)"
        lines.append(line)
    return lines


def gate_verdict(ev: Evaluation) -> tuple[Verdict, str] | None:
    """The SLO gate's verdict, failure-rate SLO first; None when the gate leaves it to the pattern."""
    broken = ev.gate.broken
    if ev.gate.breaks("failure_rate_max"):
        return Verdict.ROLLBACK, f"rolled back: breaks the failure-rate SLO the baseline met ({_checks(ev, broken)})"
    if ev.gate.meets("failure_rate_max"):
        if broken:
            return (Verdict.KEEP_TRADEOFF, "kept: meeting the failure-rate SLO takes precedence over latency "
                    f"({_checks(ev, broken)} now missed)")
        return Verdict.ACCEPT, "accepted: meets the failure-rate SLO the baseline missed"
    if broken:
        return Verdict.ROLLBACK, f"rolled back: breaks an SLO the baseline met ({_checks(ev, broken)})"
    if ev.gate.newly_met:
        return Verdict.ACCEPT, f"accepted: meets an SLO the baseline missed ({_checks(ev, ev.gate.newly_met)})"
    return None


def _checks(ev: Evaluation, checks: list[SLOCheck]) -> str:
    """Each check named by its field; a percentile target with its pooled figure and interval, and when
    the interval straddles the target, that the point estimate decided."""
    parts = []
    for c in checks:
        judged = ev.cand_judged.get(c.name)
        if judged is None:
            parts.append(check_text(c))
            continue
        unsure = judged.reading is Reading.WITHIN_NOISE
        parts.append(f"{c.name}: {judgement_text(judged)}" + (", decided on the point estimate" if unsure else ""))
    return ", ".join(parts)
