"""Fitting a calibration: bounded least squares of the simulator's figures against measured rounds.

Each measured round is simulated again with trial corrections on the same seed, and the residuals are the
log ratios of simulated to measured figures: output throughput, median ITL, mean TPOT, median, mean and p95
TTFT, median end-to-end latency, and quantiles (p10 to p90) of the per-request TTFT and TPOT samples when
the round kept them. scipy's trust-region reflective solver fits the five corrections within their bounds;
the standard errors come from the Jacobian at the solution (the Gauss-Newton covariance scaled by the
residual variance).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from service.calibration.cost import CalibratedCostModel
from service.components import CostModel, RoundContext
from service.cost_model_choice import choose_cost_model
from service.domain import Provenance, RoundResult, RoundStatus, Scenario, Source, resolve_model
from service.domain.calibration import (
    NAMES,
    PARAMETERS,
    Calibration,
    Factors,
    Parameter,
    Residual,
    calibration_for,
    key_of,
)
from service.simulator import simulate_round

# (figure, weight): throughput and ITL weigh most, they carry most of what a decision turns on.
FIGURES: tuple[tuple[str, float], ...] = (
    ("output_throughput", 2.0), ("median_itl_ms", 2.0), ("mean_tpot_ms", 1.0), ("median_ttft_ms", 1.0),
    ("mean_ttft_ms", 0.5), ("p95_ttft_ms", 1.0), ("median_e2e_latency_ms", 1.0))
QUANTILES = (10, 25, 50, 75, 90)
SAMPLE_WEIGHT = 0.4
MIN_SAMPLES = 8
# Fewer figures than parameters still fit: the prior settles what they leave open, and the standard errors
# say how little they pinned down.
MIN_FIGURES = 2
START = (1.0, 1.0, 0.5, 0.2, 1.0)
X_SCALE = np.array([0.3, 0.3, 1.0, 1.0, 2.0])  # the size of a typical correction of each parameter
FRONTEND = NAMES.index("frontend_ms")
# A failed simulation counts as this log error on every figure, so the solver steers away from it.
FAILED_RESIDUAL = math.log(10.0)
# A weak pull toward no correction, so a direction the rounds cannot tell apart settles on the smaller
# correction instead of wandering to a bound; the data outweighs it wherever it speaks. Factors count as
# their logs, the fixed step cost as the log of the share it adds to the uncalibrated decode step (so a
# decode factor and a fixed cost that lengthen a step alike cost alike: in a memory-bound decode every step
# streams the same weights and no load can tell the two apart), the per-request costs in units of a few ms.
PRIOR_WEIGHT = 0.05
PRIOR_MS = 2.0
PRIOR_FRONTEND_MS = 10.0  # host delays run to tens of milliseconds where a step's overhead runs to a few

Simulate = Callable[[Scenario, CostModel, str, int | None], RoundResult]


class CalibrationError(ValueError):
    """The rounds cannot be calibrated on (none completed, or they hold too few figures)."""


@dataclass(frozen=True)
class Observation:
    """One measured round: the scenario it ran, what it measured, the seed its traffic was drawn with."""

    scenario: Scenario
    result: RoundResult
    seed: int | None = None
    source: str = ""


def figures_of(result: RoundResult) -> dict[str, float]:
    """The figures a fit compares, from a round result (zero where the round has none)."""
    out = {name: float(getattr(result.bench, name)) for name, _ in FIGURES}
    samples = result.samples
    for label, values in (("ttft", samples.ttft_ms), ("tpot", samples.tpot_ms)):
        kept = [v for v in values if v > 0]
        if len(kept) >= MIN_SAMPLES:
            for q in QUANTILES:
                out[f"{label} p{q}"] = float(np.percentile(kept, q))
    return out


def _targets(result: RoundResult) -> list[tuple[str, float, float]]:
    """(figure, measured value, weight) of every positive figure of a measured round."""
    weights = dict(FIGURES)
    return [(name, value, weights.get(name, SAMPLE_WEIGHT)) for name, value in figures_of(result).items()
            if value > 0 and math.isfinite(value)]


def cost_model_for(models: dict[str, CostModel], requested: str | None, scenario: Scenario) -> tuple[str, CostModel]:
    """The cost model a calibration of `scenario` corrects: `requested`, else the one its simulated rounds use.

    Raises:
        ValueError: `requested` is not an available cost model (the message names the available ones).
    """
    available = {name: m for name, m in models.items() if m.available()}
    if requested is not None and requested not in available:
        raise ValueError(f"{requested!r} is not an available cost model; use one of {', '.join(sorted(available))}")
    try:
        return choose_cost_model(RoundContext(cost_models=available, cost_model=requested), scenario,
                                 resolve_model(scenario.model))
    except KeyError as exc:
        raise ValueError(str(exc.args[0])) from exc


def simulate_with(scenario: Scenario, cost_model: CostModel, name: str, seed: int | None) -> RoundResult:
    """One simulated round of `scenario` with the given cost model instance (in this process)."""
    model = resolve_model(scenario.model)
    return simulate_round(scenario, model, lambda server: cost_model.bind(model, scenario.hardware, server),
                          seed=seed, cost_model=name)


def simulate_chosen(scenario: Scenario, seed: int | None, context: RoundContext) -> RoundResult:
    """One simulated round in this process, on the cost model `context` chooses and the stored calibration
    that fits the scenario best, if one does (what the `simulated` runner runs)."""
    try:
        model = resolve_model(scenario.model)
        name, cost_model = choose_cost_model(context, scenario, model)
    except (KeyError, ValueError) as exc:
        return RoundResult(status=RoundStatus.FAILED, error=str(exc), error_phase="setup",
                           provenance=Provenance(source=Source.SIMULATED, runner="simulated",
                                                 cost_model=context.cost_model))
    found = calibration_for(context.calibrations, scenario, name)
    if found is not None:
        calibration, note = found
        cost_model = CalibratedCostModel(cost_model, calibration.factors, calibration.describe() + note)
    result = simulate_round(scenario, model, lambda server: cost_model.bind(model, scenario.hardware, server),
                            seed=seed, cost_model=name)
    if found is not None:
        result.provenance.calibration = found[0].id
    return result


def fit_calibration(observations: Sequence[Observation], base: CostModel, base_name: str, *,
                    simulate: Simulate = simulate_with, max_evaluations: int = 24,
                    start: Factors | None = None) -> Calibration:
    """Fit the corrections of `base` that make the simulator reproduce `observations` best.

    Raises:
        CalibrationError: No observation completed, or they hold fewer than MIN_FIGURES figures.
    """
    usable = [o for o in observations if o.result.status is RoundStatus.OK and o.result.bench.completed > 0]
    if not usable:
        raise CalibrationError("no measured round completed: calibrate on a round whose requests finished")
    targets = [_targets(o.result) for o in usable]
    if sum(len(t) for t in targets) < MIN_FIGURES:
        raise CalibrationError(f"the measured rounds hold fewer than {MIN_FIGURES} figures (output throughput, "
                               "ITL, TPOT, TTFT, end-to-end latency): nothing to fit on")
    cache: dict[tuple[float, ...], tuple[np.ndarray, list[dict[str, float]]]] = {}
    step_ms = [PRIOR_MS]  # the uncalibrated decode step the prior measures a fixed step cost against

    def evaluate(x: np.ndarray) -> tuple[np.ndarray, list[dict[str, float]]]:
        point = tuple(round(float(v), 9) for v in x)
        if point not in cache:
            model = CalibratedCostModel(base, Factors.of(point))
            residuals: list[float] = []
            predicted: list[dict[str, float]] = []
            for obs, wanted in zip(usable, targets, strict=True):
                result = simulate(obs.scenario, model, base_name, obs.seed)
                got = figures_of(result) if result.status is RoundStatus.OK else {}
                predicted.append(got)
                for name, measured, weight in wanted:
                    value = got.get(name, 0.0)
                    error = math.log(value / measured) if value > 0 else FAILED_RESIDUAL
                    residuals.append(math.sqrt(weight) * error)
            residuals += _prior(point, step_ms[0])
            cache[point] = (np.asarray(residuals), predicted)
        return cache[point]

    identity = np.array(Factors().vector())
    uncalibrated = evaluate(identity)[1]  # the figures do not depend on the prior, only the residuals do
    itl = [got.get("median_itl_ms", 0.0) for got in uncalibrated]
    if any(v > 0 for v in itl):
        step_ms[0] = float(np.median([v for v in itl if v > 0]))
        cache.clear()  # its residuals carried the placeholder prior

    lower = np.array([p[1] for p in PARAMETERS])
    upper = np.array([p[2] for p in PARAMETERS])
    x0 = np.clip(np.array((start.vector() if start else START), dtype=float), lower + 1e-6, upper - 1e-6)
    # Two branches: a host delay fitted, and none at all. The second is not the first's bound: any delay,
    # however small, makes a request miss the step that starts as the one before it finishes, so the figures
    # jump between no delay and the smallest one and a gradient cannot cross from one side to the other.
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    for free in (np.ones(len(PARAMETERS), dtype=bool), np.arange(len(PARAMETERS)) != FRONTEND):
        x, jac = _solve(lambda x: evaluate(x)[0], x0, free, lower, upper, max_evaluations)
        cost = float(evaluate(x)[0] @ evaluate(x)[0])
        if best is None or cost < best[0]:
            best = (cost, x, jac)
    assert best is not None
    _, x, jac = best
    residuals, predicted = evaluate(x)
    parameters = _parameters(x, jac, residuals, lower, upper)
    return Calibration(
        key=key_of(usable[0].scenario), parameters=parameters, cost_model=base_name, rounds=len(usable),
        sources=[o.source for o in usable if o.source],
        residuals=_residual_rows(targets, predicted, uncalibrated),
        rms_error=_rms(targets, predicted), rms_error_uncalibrated=_rms(targets, uncalibrated),
        evaluations=len(cache), id=f"cal_{uuid.uuid4().hex[:10]}", created_at=time.time())


def _solve(residuals: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, free: np.ndarray, lower: np.ndarray,
           upper: np.ndarray, max_evaluations: int) -> tuple[np.ndarray, np.ndarray]:
    """Bounded least squares over the `free` parameters (the others held at their value of no correction):
    the solution and its Jacobian over all parameters (zero columns for the held ones)."""
    held = np.array([p[3] for p in PARAMETERS])

    def full(z: np.ndarray) -> np.ndarray:
        x = held.copy()
        x[free] = z
        return x

    solution = least_squares(lambda z: residuals(full(z)), x0[free], bounds=(lower[free], upper[free]),
                             method="trf", diff_step=0.05, x_scale=X_SCALE[free], max_nfev=max_evaluations)
    jac = np.zeros((solution.jac.shape[0], len(PARAMETERS)))
    jac[:, free] = solution.jac
    return full(solution.x), jac


def _prior(point: tuple[float, ...], decode_step_ms: float) -> list[float]:
    weight = math.sqrt(PRIOR_WEIGHT)
    prefill, decode, step_ms, request_ms, frontend_ms = point
    return [weight * math.log(prefill), weight * math.log(decode), weight * math.log1p(step_ms / decode_step_ms),
            weight * request_ms / PRIOR_MS, weight * frontend_ms / PRIOR_FRONTEND_MS]


def _parameters(x: np.ndarray, jac: np.ndarray, residuals: np.ndarray, lower: np.ndarray,
                upper: np.ndarray) -> list[Parameter]:
    m, n = jac.shape
    dof = max(m - n, 1)
    variance = float(residuals @ residuals) / dof
    covariance = np.linalg.pinv(jac.T @ jac) * variance
    errors = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    out = []
    for i, (name, lo, hi, _, unit) in enumerate(PARAMETERS):
        span = hi - lo
        out.append(Parameter(name=name, value=float(x[i]), stderr=float(min(errors[i], span)), lower=lo, upper=hi,
                             unit=unit, at_bound=bool(x[i] - lo < 1e-3 * span or hi - x[i] < 1e-3 * span)))
    return out


def _residual_rows(targets: list[list[tuple[str, float, float]]],
                   predicted: list[dict[str, float]], uncalibrated: list[dict[str, float]]) -> list[Residual]:
    rows = []
    for i, wanted in enumerate(targets):
        for name, measured, _ in wanted:
            if name.startswith(("ttft p", "tpot p")):
                continue  # the distributions are fitted; the report shows the round's own figures
            value = predicted[i].get(name, 0.0)
            rows.append(Residual(round=i, figure=name, measured=measured, predicted=value,
                                 uncalibrated=uncalibrated[i].get(name, 0.0), error=value / measured - 1.0))
    return rows


def _rms(targets: list[list[tuple[str, float, float]]], predicted: list[dict[str, float]]) -> float:
    errors = [predicted[i].get(name, 0.0) / measured - 1.0 for i, wanted in enumerate(targets)
              for name, measured, _ in wanted if not name.startswith(("ttft p", "tpot p"))]
    return float(math.sqrt(sum(e * e for e in errors) / len(errors))) if errors else 0.0


__all__ = ["CalibrationError", "Observation", "figures_of", "fit_calibration", "simulate_with"]
