"""Which cost model a simulated round of a scenario uses: the one the round context names, else the first
available of `aiconfigurator` (measured kernels, when it answers for this GPU and model) and `roofline`.

The `simulated` runner, `sglang-tuner calibrate` and `POST /v1/calibrations` make this one choice, so a
calibration is fitted on the cost model the service's rounds go on to use.
"""

from __future__ import annotations

from service.components import CostModel, RoundContext
from service.domain import ModelSpec, Scenario

PREFERENCE = ("aiconfigurator", "roofline")


def choose_cost_model(context: RoundContext, scenario: Scenario, model: ModelSpec) -> tuple[str, CostModel]:
    """The requested cost model, else the first available of PREFERENCE that can bind.

    Raises:
        KeyError: The requested one is not registered, or none is available.
    """
    models = context.cost_models
    if context.cost_model:
        if context.cost_model not in models:
            known = ", ".join(sorted(models)) or "none"
            raise KeyError(f"unknown cost model {context.cost_model!r} (known: {known})")
        return context.cost_model, models[context.cost_model]
    for name in PREFERENCE:
        candidate = models.get(name)
        if candidate is None or not candidate.available():
            continue
        if name != "roofline" and not binds(candidate, scenario, model):
            continue
        return name, candidate
    raise KeyError("no cost model is available (register `roofline` or pass one in the round context)")


def binds(cost_model: CostModel, scenario: Scenario, model: ModelSpec) -> bool:
    """Whether a measured cost model has data for every server of the scenario."""
    try:
        for group in scenario.deployment.groups:
            cost_model.bind(model, scenario.hardware, group.server)
    except Exception:  # noqa: BLE001 - any refusal means "not for this GPU and model"
        return False
    return True
