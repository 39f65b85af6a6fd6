"""aiconfigurator-core is found under its successor's import name, `aisimulate_core`, when that is installed."""

from __future__ import annotations

import sys
import types

import pytest

from plugins.cost_models import aic_engines
from plugins.cost_models.aiconfigurator import AiconfiguratorCostModel


def fake_successor() -> dict[str, types.ModuleType]:
    """An `aisimulate_core` package with the `sdk.operations` submodule the cost model imports."""
    root, sdk, ops = (types.ModuleType(n) for n in ("aisimulate_core", "aisimulate_core.sdk",
                                                        "aisimulate_core.sdk.operations"))
    root.__path__ = []  # a package, so its submodules resolve from sys.modules
    sdk.__path__ = []
    root.sdk, sdk.operations = sdk, ops  # type: ignore[attr-defined]
    ops.MoEDispatch = object  # type: ignore[attr-defined]
    return {"aisimulate_core": root, "aisimulate_core.sdk": sdk, "aisimulate_core.sdk.operations": ops}


def test_the_successor_is_picked_when_only_it_is_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, module in fake_successor().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(sys.modules, "aiconfigurator_core", None)  # the 0.12 name is gone
    assert aic_engines.aic_module_name() == "aisimulate_core"
    assert aic_engines.aic_import("sdk.operations").MoEDispatch is object
    assert AiconfiguratorCostModel().available()


def test_the_successor_is_preferred_when_both_are_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, module in fake_successor().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(sys.modules, "aiconfigurator_core", types.ModuleType("aiconfigurator_core"))
    assert aic_engines.aic_module_name() == "aisimulate_core"


def test_neither_name_means_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in aic_engines.AIC_MODULES:
        monkeypatch.setitem(sys.modules, name, None)
    assert aic_engines.aic_module_name() is None
    assert not AiconfiguratorCostModel().available()
    with pytest.raises(ImportError):
        aic_engines.aic_import("sdk")
