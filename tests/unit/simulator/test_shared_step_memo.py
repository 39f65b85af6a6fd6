"""Step models with equal memo keys share one memo per process; others keep their own."""

from __future__ import annotations

from typing import ClassVar

from plugins.cost_models.roofline import RooflineCostModel
from service import Hardware, ServerConfig, StepCostModel, resolve_model
from service.simulator.step_cache import CachedStepCost


class Counting(StepCostModel):
    name: ClassVar[str] = "counting"

    def __init__(self, key: object | None) -> None:
        self.key, self.asked = key, 0

    def prefill_seconds(self, new_tokens: int, cached_tokens: int, requests: int) -> float:
        self.asked += 1
        return 1e-3 * new_tokens

    def decode_seconds(self, batch: int, context_tokens: int) -> float:
        self.asked += 1
        return 1e-3 * batch

    def memo_key(self) -> object | None:
        return self.key


def test_equal_keys_share_answers_across_bindings() -> None:
    first, second = Counting(("shared", 1)), Counting(("shared", 1))
    a, b = CachedStepCost(first), CachedStepCost(second)
    assert a.decode_seconds(8, 800) == b.decode_seconds(8, 800) == 8e-3
    assert b.prefill_seconds(100, 0, 1) == a.prefill_seconds(100, 0, 1)
    assert (first.asked, second.asked) == (2, 0)
    assert b.calls == a.calls == 2


def test_no_key_keeps_a_memo_of_its_own() -> None:
    first, second = Counting(None), Counting(None)
    CachedStepCost(first).decode_seconds(8, 800)
    CachedStepCost(second).decode_seconds(8, 800)
    assert (first.asked, second.asked) == (1, 1)


def test_roofline_keys_follow_the_binding() -> None:
    model, hardware = resolve_model("Qwen/Qwen3.6-27B"), Hardware(gpu="H200-SXM")
    tp8 = RooflineCostModel().bind(model, hardware, ServerConfig(tp_size=8))
    assert tp8.memo_key() == RooflineCostModel().bind(model, hardware, ServerConfig(tp_size=8)).memo_key()
    assert tp8.memo_key() != RooflineCostModel().bind(model, hardware, ServerConfig(tp_size=4)).memo_key()
    assert tp8.memo_key() != RooflineCostModel(clock=8.0).bind(model, hardware, ServerConfig(tp_size=8)).memo_key()
