"""Which stored calibration a simulated round applies: its own model and layout first, then its model on another
layout, then another model on the same GPU and SGLang version; never another GPU, version or cost model."""

from __future__ import annotations

import msgspec

from service.domain import Calibration, CalibrationKey, Parameter, Scenario, calibration_for

SCENARIO = """
name = "s"
model = "Qwen/Qwen3.6-9B"
[hardware]
gpu = "H100-SXM"
[[deployment.groups]]
replicas = 2
[deployment.groups.server]
tp-size = 1
[workload]
input = { median = 512 }
output = { median = 64 }
"""


def _made(model: str, layout: str, *, gpu: str = "H100-SXM", version: str = "0.5.23", cost_model: str = "roofline",
          at: float = 0.0, name: str = "") -> Calibration:
    key = CalibrationKey(model=model, gpu=gpu, sglang_version=version, layout=layout)
    return Calibration(key=key, cost_model=cost_model, rounds=1, created_at=at, id=name,
                       parameters=[Parameter(name="decode", value=1.3, stderr=0.1, lower=0.2, upper=10, unit="x")])


def test_the_closest_calibration_is_applied_and_a_borrowed_one_says_so() -> None:
    scenario = msgspec.toml.decode(SCENARIO.encode(), type=Scenario)
    own = _made("Qwen/Qwen3.6-9B", "2x tp1", name="own")
    other_layout = _made("Qwen/Qwen3.6-9B", "1x tp2", at=5.0, name="layout")
    other_model = _made("Qwen/Qwen3.6-27B", "2x tp1", at=9.0, name="model")
    never = [_made("Qwen/Qwen3.6-9B", "2x tp1", gpu="H200", at=99, name="gpu"),
             _made("Qwen/Qwen3.6-9B", "2x tp1", version="0.5.2", at=99, name="version"),
             _made("Qwen/Qwen3.6-9B", "2x tp1", cost_model="aiconfigurator", at=99, name="cost")]
    assert calibration_for([*never, other_model, other_layout, own], scenario, "roofline") == (own, "")
    found, note = calibration_for([*never, other_model, other_layout], scenario, "roofline") or (None, "")
    assert found is other_layout and note == " (fitted on 1x tp2, applied to 2x tp1)"
    found, note = calibration_for([*never, other_model], scenario, "roofline") or (None, "")
    assert found is other_model and "fitted on Qwen/Qwen3.6-27B 2x tp1" in note
    assert calibration_for(never, scenario, "roofline") is None
    newer = _made("Qwen/Qwen3.6-9B", "2x tp1", at=3.0, name="newer")
    assert calibration_for([own, newer], scenario, "roofline") == (newer, "")
