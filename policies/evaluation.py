"""What every policy computes first: the measurement check, the metric changes and the SLO gate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policies.changes import PATTERN_METRICS, Comparison, MetricChange, judge
from policies.settings import PolicySettings
from policies.slo_gate import GateOutcome, averaged, gate, slo_checks
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
    base_checks = slo_checks(averaged(baseline), slo)
    cand_checks = slo_checks(averaged(candidate), slo)
    failure = next(c for c in changes if c.spec.key == "failure_rate")
    outcome = gate(comparison, slo, base_checks, cand_checks, failure, settings.alpha_improvement)
    return Evaluation(comparison=comparison, changes=changes, base_checks=base_checks,
                      cand_checks=cand_checks, gate=outcome)


def gate_verdict(ev: Evaluation) -> tuple[Verdict, str] | None:
    """The SLO gate's verdict, failure-rate SLO first; None when the gate leaves it to the pattern."""
    broken = ev.gate.broken
    if ev.gate.breaks("failure_rate_max"):
        return Verdict.ROLLBACK, f"rolled back: breaks the failure-rate SLO the baseline met ({_checks(broken)})"
    if ev.gate.meets("failure_rate_max"):
        if broken:
            return (Verdict.KEEP_TRADEOFF, "kept: meeting the failure-rate SLO takes precedence over latency "
                    f"({_checks(broken)} now missed)")
        return Verdict.ACCEPT, "accepted: meets the failure-rate SLO the baseline missed"
    if broken:
        return Verdict.ROLLBACK, f"rolled back: breaks an SLO the baseline met ({_checks(broken)})"
    if ev.gate.newly_met:
        return Verdict.ACCEPT, f"accepted: meets an SLO the baseline missed ({_checks(ev.gate.newly_met)})"
    return None


def _checks(checks: list[SLOCheck]) -> str:
    return ", ".join(check_text(c) for c in checks)
