"""The shipped cost-model contract, run against every built-in cost model on a dense and a MoE shape."""

from __future__ import annotations

import pytest

from service import CostModel
from service.testing import CostModelContract, make_host

COST_MODELS = make_host(builtins=True).components("cost_model")


class TestEveryCostModel(CostModelContract):
    @pytest.fixture(params=sorted(COST_MODELS))
    def cost_model(self, request: pytest.FixtureRequest) -> CostModel:
        return COST_MODELS[request.param]


def test_builtins_are_registered_and_roofline_is_always_available() -> None:
    assert {"roofline", "aiconfigurator"} <= set(COST_MODELS)
    assert COST_MODELS["roofline"].available()
