"""Screening a step's candidates on a calibrated prediction before any of them is measured.

A runner that predicts (`Runner.predict`, the `hybrid` runner) prices every candidate of a step and the
accepted baseline on the same seeds with a simulator calibrated on its own measurements. The policy then
judges the predicted candidate against the predicted baseline three times: as predicted, optimistically
(throughputs raised and latencies lowered by the prediction's uncertainty) and pessimistically. Then:

- a candidate the policy rolls back even optimistically, where no reading of the noise would keep it
  (`Decision.noise_could_keep`: a change not yet beyond noise read as real, as more seeds of a measured
  round could prove it), cannot change the decision: it is closed as a predicted rollback, its predicted
  figures kept and marked, and never measured;
- of the candidates the policy keeps even pessimistically, the best `top_k` by predicted rank (SLO targets
  missed, then the objective, as a step's alternatives are ranked) are measured, and so is any other that
  could still outrank them: one whose optimistic rank beats the `top_k`-th's pessimistic rank; the rest
  are closed as predicted, ranked below them;
- every other candidate (its verdict within the uncertainty) is measured.

The uncertainty is the runner's (how well its calibration fits what it measured, more for a layout it never
measured), widened by how far the job's earlier predictions were from the measurements that followed, on the
predicted change from the baseline, the quantity a screen's verdict rests on (`widened`): at least the
median of those errors, and at least the largest one of the candidate's own technique. An error is the
simulator misjudging one mechanism (EAGLE3's acceptance on this traffic, how a grammar compile queues); the
measured round then joins the fit, and the same mechanism tried again carries its error, while another
technique is priced at the job's typical error rather than at its worst.

Every decision to keep a candidate is made on measured figures; a measured candidate's decision says how
far its prediction was from the measurement.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from service.components import Prediction
from service.domain import SLO, Decision, Objective, RoundResult, Verdict
from service.engine.alternatives import objective_key
from service.engine.measure import mean_result
from service.engine.slo import slo_checks

THROUGHPUTS = ("request_throughput", "input_throughput", "output_throughput", "total_throughput")
LATENCIES = tuple(f"{stat}_{figure}_ms" for figure in ("e2e_latency", "ttft", "tpot", "itl")
                  for stat in ("mean", "median", "p90", "p95", "p99")) + ("max_itl_ms",)
# The figures a measured candidate's decision compares with its prediction.
COMPARED = (("output_throughput", "output tok/s"), ("median_itl_ms", "median ITL"), ("p95_ttft_ms", "p95 TTFT"))
MAX_UNCERTAINTY = 0.9  # a latency shifted by it stays positive


def widened(prediction: Prediction, technique: str, errors: list[tuple[str, float]]) -> Prediction:
    """`prediction` trusted no more than the job's earlier predictions earned: its uncertainty raised to the
    median of `errors` (technique, change error) and to the largest error of `technique`'s own."""
    if not errors:
        return prediction
    typical = statistics.median(e for _, e in errors)
    own = max((e for t, e in errors if t == technique), default=0.0)
    u = min(max(prediction.uncertainty, typical, own), MAX_UNCERTAINTY)
    if u <= prediction.uncertainty:
        return prediction
    why = (f"{technique}'s earlier prediction in this job erred by {own:.0%}" if own >= typical else
           f"the median error of this job's {len(errors)} earlier predictions is {typical:.0%}")
    return dataclasses.replace(prediction, uncertainty=u, basis=f"{prediction.basis}; widened to ±{u:.0%}: {why}")


def shifted(result: RoundResult, uncertainty: float, *, better: bool) -> RoundResult:
    """`result` as if the prediction erred by `uncertainty` in the candidate's favour (`better`) or against it."""
    up, down = (1 + uncertainty, 1 - uncertainty) if better else (1 - uncertainty, 1 + uncertainty)
    bench = result.bench
    changes: dict[str, float | None] = {name: getattr(bench, name) * up for name in THROUGHPUTS}
    changes.update({name: getattr(bench, name) * down for name in LATENCIES})
    if bench.request_goodput is not None:
        changes["request_goodput"] = bench.request_goodput * up
    samples = msgspec.structs.replace(result.samples, ttft_ms=[v * down for v in result.samples.ttft_ms],
                                      e2e_ms=[v * down for v in result.samples.e2e_ms],
                                      tpot_ms=[v * down for v in result.samples.tpot_ms])
    cost = result.cost_per_1m_output_tokens
    return msgspec.structs.replace(result, bench=msgspec.structs.replace(bench, **changes), samples=samples,
                                   cost_per_1m_output_tokens=None if cost is None else cost / up)


@dataclass
class Screen:
    """A candidate's prediction and the policy's three readings of it against the predicted baseline."""

    prediction: Prediction
    baseline: Prediction  # the accepted baseline, predicted on the same seeds with the same calibration
    decision: Decision
    optimistic: Decision
    pessimistic: Decision
    rank: tuple[int, float, float]  # as `alternatives.rank_key`, smaller is better: as predicted,
    rank_optimistic: tuple[int, float, float]  # ... with the prediction erring in the candidate's favour,
    rank_pessimistic: tuple[int, float, float]  # ... and against it

    @property
    def clear_rollback(self) -> bool:
        # Not when a reading of the noise would keep it: measured, more seeds could.
        return self.optimistic.verdict is Verdict.ROLLBACK and not self.optimistic.noise_could_keep

    @property
    def clear_keep(self) -> bool:
        return self.pessimistic.verdict.keeps_candidate()

    def closing(self, why: str) -> Decision:
        """The decision of a candidate closed on its prediction alone: a rollback whose reasons and figures say
        what was predicted (the round keeps no results: nothing was measured)."""
        u = self.prediction.uncertainty
        guess = mean_result(self.prediction.results).bench
        shown = "; ".join(f"{label} {getattr(guess, name):.4g}" for name, label in COMPARED)
        reasons = [f"predicted, not measured: {why}", *self.decision.reasons,
                   f"predicted {shown} ({self.prediction.basis}; trusted to ±{u:.0%})"]
        figures = {**self.decision.figures, "predicted": 1.0, "uncertainty": u,
                   **{f"predicted_{name}": float(getattr(guess, name)) for name, _ in COMPARED}}
        return msgspec.structs.replace(self.decision, verdict=Verdict.ROLLBACK, reasons=reasons, figures=figures)


Decide = Callable[[list[RoundResult], list[RoundResult], SLO, Objective], Decision]


def screen(decide: Decide, baseline: Prediction, candidate: Prediction, slo: SLO, objective: Objective) -> Screen:
    """The policy's readings of `candidate` against `baseline` (both predicted on the same seeds)."""
    u = candidate.uncertainty
    better = [shifted(r, u, better=True) for r in candidate.results]
    worse = [shifted(r, u, better=False) for r in candidate.results]
    return Screen(prediction=candidate, baseline=baseline, decision=decide(baseline.results, candidate.results, slo, objective),
                  optimistic=decide(baseline.results, better, slo, objective),
                  pessimistic=decide(baseline.results, worse, slo, objective),
                  rank=_rank(candidate.results, slo, objective), rank_optimistic=_rank(better, slo, objective),
                  rank_pessimistic=_rank(worse, slo, objective))


def _rank(results: list[RoundResult], slo: SLO, objective: Objective) -> tuple[int, float, float]:
    missed = sum(1 for check in slo_checks(results, slo) if not check.met)
    return missed, objective_key(objective, slo, results), -mean_result(results).bench.output_throughput


def closed_by_prediction(screens: list[Screen | None], top_k: int) -> dict[int, str]:
    """Which of a group's candidates (by position) are closed on their prediction, and why."""
    closed: dict[int, str] = {}
    top_k = max(top_k, 1)
    keeps = sorted((s.rank, i) for i, s in enumerate(screens) if s is not None and s.clear_keep)
    if len(keeps) > top_k:
        bar = screens[keeps[top_k - 1][1]]
        assert bar is not None
        for _, i in keeps[top_k:]:
            s = screens[i]
            if s is not None and s.rank_optimistic > bar.rank_pessimistic:
                closed[i] = (f"the policy keeps it even at the pessimistic end, but even at its optimistic end it "
                             f"ranks below the {top_k} best predicted alternative(s) of this step at their "
                             "pessimistic end, which are measured")
    for i, s in enumerate(screens):
        if s is not None and s.clear_rollback:
            closed[i] = "the policy rolls it back even if the prediction errs in its favour by its uncertainty"
    return closed


def with_prediction_error(decision: Decision, screen: Screen, measured: list[RoundResult],
                          baseline: list[RoundResult]) -> Decision:
    """A measured candidate's decision with how far its prediction was from the measurement: on each compared
    figure, the predicted value against the measured one (`prediction_error_*`), and the predicted change from
    the baseline against the measured change (`change_error_*`: (predicted candidate / predicted baseline) /
    (measured candidate / measured baseline) - 1), which is what the screen's verdict rests on."""
    if not measured:
        return decision
    # On the seeds predicted: a round the policy extended to more seeds is compared on its first ones.
    seeds = len(screen.prediction.results)
    truth = mean_result(measured[:seeds]).bench
    guess = mean_result(screen.prediction.results).bench
    truth_base = mean_result(baseline[:seeds]).bench if len(baseline) >= seeds else None
    guess_base = mean_result(screen.baseline.results).bench
    parts, figures = [], dict(decision.figures)
    for name, label in COMPARED:
        real, predicted = getattr(truth, name), getattr(guess, name)
        if real > 0 and predicted > 0:
            error = predicted / real - 1
            text = f"{label} {predicted:.4g} predicted, {real:.4g} measured ({error:+.1%}"
            figures[f"prediction_error_{name}"] = error
            real_base = getattr(truth_base, name) if truth_base is not None else 0.0
            predicted_base = getattr(guess_base, name)
            if real_base > 0 and predicted_base > 0:
                predicted_change, real_change = predicted / predicted_base - 1, real / real_base - 1
                figures[f"change_error_{name}"] = (1 + predicted_change) / (1 + real_change) - 1
                text += f"; change {predicted_change:+.1%} predicted, {real_change:+.1%} measured"
            parts.append(text + ")")
    note = (f"measured: its predicted verdict ({screen.decision.verdict.value}) was within the prediction's "
            f"±{screen.prediction.uncertainty:.0%}; " + "; ".join(parts))
    return msgspec.structs.replace(decision, reasons=[*decision.reasons, note], figures=figures)


def change_error(decision: Decision) -> float | None:
    """The largest error of a measured round's predicted change on the compared figures (None: not screened)."""
    errors = [abs(v) for k, v in decision.figures.items() if k.startswith("change_error_")]
    return max(errors) if errors else None
