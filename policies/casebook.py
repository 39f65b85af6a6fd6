"""The built-in policies: `casebook` (the default) and `slo_only`.

`casebook` decides as the casebook does by hand: measurement check -> SLO gate (failure rate first) ->
failure rate -> metric-change pattern -> objective.
`slo_only` keeps the measurement check and the SLO gate, then looks only at the objective's own figure.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import msgspec

from policies.branching import slo_vetoed_win
from policies.changes import Direction, MetricChange
from policies.evaluation import Evaluation, evaluate, gate_verdict, measurement_error, reread, slo_lines, within_noise
from policies.objectives import failure_verdict, objective_change, objective_override, pattern_verdict
from policies.patterns import MEANING, classify
from policies.settings import PolicySettings
from policies.slo_gate import averaged, gate, slo_checks
from policies.slo_interval import Reading, judge_percentiles, judged_checks, judgement_text
from policies.wording import describe, detail_lines, figures, goodput_figures, headline
from service import SLO, Decision, Objective, Pattern, Policy, RoundResult, SLOCheck, Verdict


class _MeasuredPolicy(Policy):
    """Shared frame: fail closed on bad measurements, then judge, then explain."""

    def __init__(self, settings: PolicySettings | None = None) -> None:
        self.settings = settings or PolicySettings()

    def decide(self, baseline: list[RoundResult], candidate: list[RoundResult], slo: SLO,
               objective: Objective) -> Decision:
        """Judge the candidate's repeats against the baseline's (see the class docstring)."""
        error = measurement_error(baseline, candidate)
        if error is not None:
            return Decision(verdict=Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE, policy=self.name,
                            reasons=[f"{error}: not comparable, never accepted"])
        ev = evaluate(in_seed_order(baseline), in_seed_order(candidate), slo, self.settings)
        verdict, pattern, sentence, notes = self._judge(ev, slo, objective)
        # The judgements more seeds could leave it at (every uncertain change read as real, better or worse;
        # every SLO target within noise read as met or missed): unsettled when one differs.
        readings = [] if verdict is Verdict.ERROR else [self._judge(other, slo, objective) for other in _readings(ev)]
        good_lines, good_figures = goodput_figures(baseline, candidate)
        return Decision(
            verdict=verdict, pattern=pattern, policy=self.name,
            reasons=[sentence, *notes, *slo_lines(ev), *good_lines, *detail_lines(ev.changes)],
            figures={**figures(ev.changes, ev.cand_checks, ev.base_checks), **good_figures},
            slo_checks=ev.cand_checks, baseline_slo_checks=ev.base_checks,
            unsettled=any(other[:2] != (verdict, pattern) for other in readings),
            noise_could_keep=not verdict.keeps_candidate() and any(other[0].keeps_candidate() for other in readings),
            slo_vetoed_win=slo_vetoed_win(ev, self._judge, slo, objective, verdict, self.settings.alpha_improvement),
            same_as_baseline=_same_as_baseline(ev, verdict, pattern, readings),
        )

    def _judge(self, ev: Evaluation, slo: SLO, objective: Objective) -> tuple[Verdict, Pattern, str, list[str]]:
        raise NotImplementedError

    def slo_checks(self, result: RoundResult | list[RoundResult], slo: SLO) -> list[SLOCheck]:
        """The SLO checks this policy decides by, for one round or its repeats: percentile targets on the
        pooled requests of every repeat, the other targets on the mean over repeats."""
        results = in_seed_order(result if isinstance(result, list) else [result])
        judged = judge_percentiles(results, slo, self.settings.slo_confidence)
        return judged_checks(slo_checks(averaged(results), slo), judged)

    def _gated(self, ev: Evaluation, slo: SLO,
               objective: Objective) -> tuple[Verdict, str] | tuple[Verdict, Pattern, str, list[str]] | None:
        """The SLO gate's (verdict, phrase); or, when it rolls back only on targets within noise and the
        rest of the judgement rolls back too, that judgement: its reason is the one the figures prove."""
        gated = gate_verdict(ev)
        if gated is None or gated[0] is not Verdict.ROLLBACK or not ev.gate.broken:
            return gated
        if any(ev.cand_judged.get(c.name) is None or ev.cand_judged[c.name].reading is not Reading.WITHIN_NOISE
               for c in ev.gate.broken):
            return gated
        rest = self._judge(reread(ev, candidate_met=True), slo, objective)
        if rest[0].keeps_candidate() or rest[0] is Verdict.INCONCLUSIVE:
            return gated
        unsure = ", ".join(judgement_text(ev.cand_judged[c.name]) for c in ev.gate.broken)
        return rest[0], rest[1], rest[2], [*rest[3], f"the SLO gate would roll it back too ({unsure})"]


def _same_as_baseline(ev: Evaluation, verdict: Verdict, pattern: Pattern,
                      readings: list[tuple[Verdict, Pattern, str, list[str]]]) -> bool:
    """Nothing moved: the pattern table's "nothing changed" on every reading of the noise, every compared figure
    (the failure rate among them) inside its noise band or unmeasured, and no SLO target the baseline met broken."""
    if verdict is not Verdict.ROLLBACK or pattern is not Pattern.NOTHING_CHANGED or ev.gate.broken:
        return False
    if any(other[1] is not Pattern.NOTHING_CHANGED for other in readings):
        return False
    moved = [c for c in ev.changes if c.direction not in (Direction.FLAT, Direction.UNKNOWN)]
    return not moved and any(c.spec.key == "output_throughput" and c.direction is Direction.FLAT for c in ev.changes)


class CasebookPolicy(_MeasuredPolicy):
    """The casebook's judgement: SLO gate, failure rate first, the metric-change pattern table, objective."""

    name: ClassVar[str] = "casebook"

    def _judge(self, ev: Evaluation, slo: SLO, objective: Objective) -> tuple[Verdict, Pattern, str, list[str]]:
        pattern = classify(ev.changes, self.settings)
        shown = pattern or Pattern.NOT_APPLICABLE
        gated = self._gated(ev, slo, objective)
        if gated is not None:
            return gated if len(gated) == 4 else (gated[0], shown, f"{headline(ev.changes)}: {gated[1]}", [])
        failure = failure_verdict(ev.failure)
        if failure is not None:
            return failure[0], shown, f"{describe(ev.failure)}: {failure[1]}", []
        if pattern is None:
            return Verdict.INCONCLUSIVE, shown, f"{_sample_counts(ev)}: inconclusive, baseline kept", []
        verdict, pattern, sentence, notes = self._read(ev, pattern, slo, objective)
        hopeful = _hopeful(ev, self.settings.alpha_regression)
        if not verdict.keeps_candidate() and hopeful is not None:
            # The verdict hinges on improvements noise cannot confirm yet: say so, so that more repeats
            # can decide (the engine measures more seeds) instead of calling it "nothing changed".
            hoped = classify(hopeful.changes, self.settings)
            if hoped is not None and self._read(hopeful, hoped, slo, objective)[0].keeps_candidate():
                unproven = [c for c in ev.changes if _suggestive(c, self.settings.alpha_regression)]
                return (Verdict.INCONCLUSIVE, pattern, f"{headline(ev.changes)}: inconclusive: "
                        f"{', '.join(describe(c) for c in unproven)} not yet beyond noise, baseline kept", notes)
        return verdict, pattern, sentence, notes

    def _read(self, ev: Evaluation, pattern: Pattern, slo: SLO,
              objective: Objective) -> tuple[Verdict, Pattern, str, list[str]]:
        """The pattern's verdict, read again pessimistically before keeping, then the objective's say."""
        uncertain = [c for c in ev.changes if c.direction is Direction.UNCERTAIN]
        verdict, phrase = pattern_verdict(pattern, ev, slo, objective, self.settings)
        notes: list[str] = []
        unproven_worse = [c for c in uncertain if not c.improves]
        if verdict.keeps_candidate() and unproven_worse:
            # Fail safe: a large worsening that noise cannot rule out is read as real before keeping.
            pattern = classify(ev.changes, self.settings, pessimistic=True) or pattern
            verdict, phrase = pattern_verdict(pattern, ev, slo, objective, self.settings, pessimistic=True)
            notes.append("counted as worse because noise cannot rule it out: "
                         + ", ".join(describe(c) for c in unproven_worse))
        headline_text = headline(ev.changes) + (f" ({notes[0]})" if notes else "")
        target = objective_change(objective, ev.comparison, ev.changes, slo)
        override = objective_override(verdict, objective, target)
        if override is not None and target is not None:
            verdict, phrase = override
            sentence = f"{describe(target)} with {headline_text}: {MEANING[pattern]}, {phrase}"
            return verdict, pattern, sentence, notes
        return verdict, pattern, f"{headline_text}: {MEANING[pattern]}, {phrase}", notes


def in_seed_order(results: list[RoundResult]) -> list[RoundResult]:
    """The repeats in traffic-seed order (then by their figures), so the order they were handed over in
    never changes a decision: pooling, pairing and the bootstrap's draws all follow this order."""
    def key(r: RoundResult) -> tuple[bool, int, bytes]:
        seed = r.provenance.seed
        return seed is None, seed if seed is not None else 0, msgspec.json.encode(r.bench, enc_hook=float)

    return sorted(results, key=key)


def _readings(ev: Evaluation) -> list[Evaluation]:
    """The evaluation as more seeds could leave it: every uncertain change read as real (better or worse), every
    SLO target within noise read as met or missed."""
    readings = []
    if any(c.direction is Direction.UNCERTAIN for c in ev.changes):
        readings += [_settled(ev, improving) for improving in (True, False)]
    if within_noise(ev):
        readings += [reread(ev, cand, base) for cand in (True, False) for base in (True, False)]
    return readings


def _settled(ev: Evaluation, improving: bool) -> Evaluation:
    """The evaluation with every uncertain change read as real: improvements better, worsenings worse
    (`improving`), or the reverse reading where only the uncertain worsenings count."""
    def settle(c: MetricChange) -> MetricChange:
        if c.direction is not Direction.UNCERTAIN:
            return c
        real = c.improves == improving
        direction = (Direction.BETTER if c.improves else Direction.WORSE) if real else Direction.FLAT
        return msgspec.structs.replace(c, direction=direction)

    changes = [settle(c) for c in ev.changes]
    if not improving:
        return dataclasses.replace(ev, changes=changes)
    # Improvements read as real prove the targets they meet too: a failure-rate SLO met on too few
    # requests to prove it yet outranks the latency target it trades (the casebook's xgrammar round).
    outcome = gate(ev.comparison, ev.slo, ev.base_checks, ev.cand_checks, ev.failure, ev.alpha, proven=True)
    return dataclasses.replace(ev, changes=changes, gate=outcome)


def _suggestive(change: MetricChange, alpha: float) -> bool:
    """An uncertain improvement with evidence at the level a worsening is called by, short of proof."""
    return (change.direction is Direction.UNCERTAIN and change.improves and change.p_value is not None
            and change.p_value < alpha)


def _hopeful(ev: Evaluation, alpha: float) -> Evaluation | None:
    """The evaluation with every suggestive improvement read as proven; None when there is none."""
    if not any(_suggestive(c, alpha) for c in ev.changes):
        return None
    changes = [msgspec.structs.replace(c, direction=Direction.BETTER) if _suggestive(c, alpha) else c
               for c in ev.changes]
    return dataclasses.replace(ev, changes=changes)


def _sample_counts(ev: Evaluation) -> str:
    base, cand = ev.comparison.baseline, ev.comparison.candidate
    return (f"too few samples or repeats to measure noise ({len(base.samples['ttft_ms'])} vs "
            f"{len(cand.samples['ttft_ms'])} requests with samples, {len(base.results)} vs "
            f"{len(cand.results)} repeats)")


class SLOOnlyPolicy(_MeasuredPolicy):
    """The SLO gate, then only the objective's figure: better beyond noise is accepted, worse rolled back."""

    name: ClassVar[str] = "slo_only"

    def _judge(self, ev: Evaluation, slo: SLO, objective: Objective) -> tuple[Verdict, Pattern, str, list[str]]:
        shown = classify(ev.changes, self.settings) or Pattern.NOT_APPLICABLE
        gated = self._gated(ev, slo, objective)
        if gated is not None:
            return gated if len(gated) == 4 else (gated[0], shown, f"{headline(ev.changes)}: {gated[1]}", [])
        change = objective_change(objective, ev.comparison, ev.changes, slo) or ev.change("output_throughput")
        verdict, phrase = {
            Direction.BETTER: (Verdict.ACCEPT, f"accepted on the {objective.kind} objective"),
            Direction.WORSE: (Verdict.ROLLBACK, f"rolled back on the {objective.kind} objective"),
            Direction.FLAT: (Verdict.ROLLBACK, "within the noise band: baseline kept"),
            Direction.UNCERTAIN: (Verdict.INCONCLUSIVE, "not significant: inconclusive, baseline kept"),
            Direction.UNKNOWN: (Verdict.INCONCLUSIVE, "too few samples or repeats: inconclusive, baseline kept"),
        }[change.direction]
        return verdict, shown, f"{describe(change)}: {phrase}", []

