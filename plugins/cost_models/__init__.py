"""Built-in cost models (loaded through the `sglang_tuner` entry-point group): `roofline`, `aiconfigurator`, `roofline-casebook-clock`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plugins.cost_models.aiconfigurator import AiconfiguratorCostModel
from plugins.cost_models.roofline import CasebookClockCostModel, RooflineCostModel
from service import hookimpl


@hookimpl
def register_cost_models(register: Callable[[Any], None]) -> None:
    """Register the analytical roofline (always available) and the measured aiconfigurator model."""
    register(RooflineCostModel())
    register(AiconfiguratorCostModel())
    register(CasebookClockCostModel())
