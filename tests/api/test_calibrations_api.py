"""Calibrations over HTTP: fitted from posted rounds, stored, applied by a later job's simulated rounds (its
provenance names the calibration), listed, deleted; bad bodies get a 422 naming the field."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from service.api.app import create_app
from service.api.runtime import ServiceSettings
from service.calibration import CalibratedCostModel, cost_model_for, simulate_with
from service.domain import Factors, Scenario
from service.plugin_host import PluginHost
from service.scenario import load_scenario
from service.workers.engine_executor import EngineExecutor

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "calibration"
HIDDEN = Factors(prefill=1.8, decode=1.4, step_ms=2.0)


@pytest.fixture
def real_client(settings: ServiceSettings, tokens: dict[str, str]) -> Iterator[TestClient[Any]]:
    plugins = PluginHost()
    app = create_app(settings, plugins=plugins, executor=EngineExecutor(plugins))
    with TestClient(app, timeout=60) as client:
        client.headers["Authorization"] = f"Bearer {tokens['write']}"
        yield client


def _scenario(name: str) -> Scenario:
    return load_scenario(EXAMPLES / f"{name}.toml")


def _measured(scenario: Scenario) -> dict[str, Any]:
    """A round of `scenario` on a deployment whose steps run slower than the cost model its simulated rounds use
    (aiconfigurator, which has data for this model and GPU) prices them."""
    name, base = cost_model_for(PluginHost().components("cost_model"), None, scenario)
    assert name == "aiconfigurator"
    return msgspec.to_builtins(simulate_with(scenario, CalibratedCostModel(base, HIDDEN), "hidden", None))


def test_a_posted_calibration_is_applied_by_a_later_jobs_simulated_round(real_client: TestClient[Any]) -> None:
    baseline, candidate = _scenario("chat-9b"), _scenario("chat-9b-fp8")
    made = real_client.post("/v1/calibrations", json={"scenario": msgspec.to_builtins(baseline),
                                                       "rounds": [_measured(baseline)]})
    assert made.status_code == 201, made.text
    calibration = made.json()
    assert made.headers["location"] == f"/v1/calibrations/{calibration['id']}"
    values = {p["name"]: p["value"] for p in calibration["parameters"]}
    assert values["prefill"] == pytest.approx(1.8, rel=0.15) and values["decode"] == pytest.approx(1.4, rel=0.15)
    assert calibration["cost_model"] == "aiconfigurator" and calibration["key"]["layout"] == "1x tp1"
    assert [c["id"] for c in real_client.get("/v1/calibrations", params={"model": "Qwen/Qwen3.6-9B"}).json()] == [
        calibration["id"]]
    assert real_client.get("/v1/calibrations", params={"gpu": "H200"}).json() == []

    job = real_client.post("/v1/jobs", json={"playbook": "coding-assistant", "kind": "round", "runner": "simulated",
                                             "scenario": msgspec.to_builtins(candidate)}).json()
    deadline = time.monotonic() + 60
    while real_client.get(f"/v1/jobs/{job['id']}").json()["state"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, "the round job did not finish"
        time.sleep(0.1)
    rounds = real_client.get(f"/v1/jobs/{job['id']}/rounds").json()
    provenance = rounds[0]["results"][0]["provenance"]
    assert provenance["calibration"] == calibration["id"]
    assert f"calibrated [{calibration['id']}] on 1 round of Qwen/Qwen3.6-9B" in provenance["cost_model_detail"]

    assert real_client.delete(f"/v1/calibrations/{calibration['id']}").status_code == 204
    gone = real_client.get(f"/v1/calibrations/{calibration['id']}")
    assert gone.status_code == 404 and gone.json()["field"] == "id"


def test_bad_calibration_bodies_name_the_field(real_client: TestClient[Any]) -> None:
    scenario = msgspec.to_builtins(_scenario("chat-9b"))
    measured = _measured(_scenario("chat-9b"))
    cases = [  # the body's shape is a 400, what it says a 422
        ({"scenario": scenario, "rounds": []}, "rounds", 400),
        ({"scenario": scenario, "rounds": [{"status": "maybe"}]}, "rounds[0].status", 422),
        ({"scenario": {**scenario, "model": 7}, "rounds": [measured]}, "scenario.model", 422),
        ({"scenario": scenario, "rounds": [measured], "cost_model": "abacus"}, "cost_model", 422),
        ({"scenario": scenario, "rounds": [{**measured, "status": "failed"}]}, "rounds", 422),
    ]
    for body, field, status in cases:
        answer = real_client.post("/v1/calibrations", json=body)
        assert answer.status_code == status, (field, answer.text)
        assert answer.json()["field"] == field, (field, answer.json())
        assert answer.json().get("hint"), answer.json()
    assert real_client.get("/v1/calibrations").json() == []  # nothing stored by a refused body
