"""Calibrating the simulator on measured rounds: the corrections, fitting them, and simulating with them."""

from service.calibration.cost import CalibratedCostModel, CorrectedStepCost
from service.calibration.fit import (
    CalibrationError,
    Observation,
    cost_model_for,
    figures_of,
    fit_calibration,
    simulate_chosen,
    simulate_with,
)
from service.domain.calibration import (
    PARAMETERS,
    Calibration,
    CalibrationKey,
    Factors,
    Parameter,
    Residual,
    key_of,
    layout_of,
)

__all__ = [
    "PARAMETERS", "CalibratedCostModel", "Calibration", "CalibrationError", "CalibrationKey", "CorrectedStepCost",
    "Factors", "Observation", "cost_model_for", "Parameter", "Residual", "figures_of", "fit_calibration", "key_of",
    "layout_of", "simulate_chosen", "simulate_with",
]
