"""Where the local runner finds SMG, and what it launches for an SMG router."""

from __future__ import annotations

import sys

import pytest

from plugins.runners.local import launch
from plugins.runners.local.failures import RoundFailure
from service import RunnerSettings
from service.scenario import load_scenario

from .conftest import EXAMPLES


def test_an_smg_router_runs_python_m_smg_launch_router_with_the_configured_interpreter():
    scenario = load_scenario(EXAMPLES / "two-workers-smg-least-load.toml")
    _, specs = launch.plan_launch(scenario, RunnerSettings(engine="emulator", smg_python="/opt/smg/bin/python"))
    router = specs[-1]
    assert router.kind == "router"
    assert router.argv[:3] == ["/opt/smg/bin/python", "-m", "smg.launch_router"]
    assert router.argv[router.argv.index("--policy") + 1] == "least_load"
    assert "--prometheus-host" in router.argv


def test_without_smg_anywhere_the_round_fails_as_router_missing(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None if name == "smg" else object())
    scenario = load_scenario(EXAMPLES / "two-workers-smg-prefix-hash.toml")
    with pytest.raises(RoundFailure) as failure:
        launch.plan_launch(scenario, RunnerSettings(engine="emulator"))
    assert failure.value.cause == "router_missing" and "smg" in failure.value.message


def test_the_nested_smg_virtualenv_is_found(tmp_path, monkeypatch):
    python = tmp_path / "smg" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert launch.smg_python(RunnerSettings()) == str(python)
