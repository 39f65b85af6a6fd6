"""The quality gate: some candidates may only be accepted with a passing user-supplied quality result.

Casebook case 1 (FP8: blind evaluation of 50 internal code cases before adoption) and case 3 (model
downsizing: 27B -> 9B accepted on a labelled validation set, 4B rejected for a 4.4-point accuracy drop).
"""

from __future__ import annotations

import msgspec

from service.domain import ConfigDelta, QualityResult, Scenario

# Downsizing is never accepted on speed alone (casebook case 3, "Lessons Learned").
ALWAYS_GATED = frozenset({"model_selection"})


class QualityVerdict(msgspec.Struct, frozen=True):
    """Whether a candidate passed the gate, with the sentence that says why."""

    passed: bool
    reason: str


def gate_required(delta: ConfigDelta, require_quality_for: list[str]) -> bool:
    """Whether this candidate needs a quality result before it may be accepted."""
    return delta.model is not None or delta.technique in ALWAYS_GATED or delta.technique in require_quality_for


def subjects_for(delta: ConfigDelta, scenario: Scenario) -> list[str]:
    """Names a user may give a quality result for this candidate, most specific first."""
    if delta.model is not None:
        return [delta.model]
    names = [f"{scenario.model}:{delta.technique}", delta.technique]
    quantization = delta.set_server.get("quantization")
    if isinstance(quantization, str):
        names[1:1] = [f"{scenario.model}:{quantization}", quantization]
    return names


def check_quality(delta: ConfigDelta, scenario: Scenario, results: list[QualityResult],
                  tolerance: float) -> QualityVerdict:
    """Judge the candidate by the first matching result: its `acceptable` flag, else metrics vs the reference.

    Without an explicit flag, every metric the candidate shares with the reference (the current model's
    result) may drop by at most `tolerance` (absolute; metrics are higher-is-better scores).
    """
    by_subject = {r.subject: r for r in results}
    subjects = subjects_for(delta, scenario)
    found = next((by_subject[s] for s in subjects if s in by_subject), None)
    if found is None:
        return QualityVerdict(False, f"no quality result for {subjects[0]!r}; supply one in the scenario's "
                                     "`quality` list before this change can be accepted")
    if found.acceptable is not None:
        word = "passed" if found.acceptable else "failed"
        note = f" ({found.note})" if found.note else ""
        return QualityVerdict(found.acceptable, f"quality {word} for {found.subject!r}{note}")
    reference = by_subject.get(scenario.model) or by_subject.get("baseline")
    if reference is None:
        return QualityVerdict(False, f"quality result for {found.subject!r} has no `acceptable` flag and there "
                                     f"is no reference result for {scenario.model!r} to compare it with")
    return _compare(found, reference, tolerance)


def _compare(candidate: QualityResult, reference: QualityResult, tolerance: float) -> QualityVerdict:
    shared = sorted(set(candidate.metrics) & set(reference.metrics))
    if not shared:
        return QualityVerdict(False, f"quality results for {candidate.subject!r} and {reference.subject!r} "
                                     "share no metric")
    drops = {m: reference.metrics[m] - candidate.metrics[m] for m in shared}
    worst = max(drops, key=lambda m: drops[m])
    figures = ", ".join(f"{m} {reference.metrics[m]:.3f} -> {candidate.metrics[m]:.3f}" for m in shared)
    if drops[worst] > tolerance:
        return QualityVerdict(False, f"quality gate failed for {candidate.subject!r}: {worst} drops "
                                     f"{drops[worst]:.3f} > {tolerance:.3f} allowed ({figures})")
    return QualityVerdict(True, f"quality within {tolerance:.3f} of {reference.subject!r} ({figures})")
