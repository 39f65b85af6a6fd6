"""A memo in front of a bound cost model, so a round asks it once per distinct step shape.

Token counts above a few hundred are snapped to a geometric grid 1/64 apart (under 1% relative), which
turns the many near-identical steps of a steady state into cache hits. Whether an answer fell back to the
analytical model is remembered with it, so fallback counts stay per step.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from service.components import StepCostModel

EXACT_BELOW = 256
_STEP = math.log1p(1 / 64)


def snap(value: int) -> int:
    """`value` unchanged when small, else the nearest point of the geometric grid."""
    if value <= EXACT_BELOW:
        return value
    return int(round(math.exp(round(math.log(value) / _STEP) * _STEP)))


# Bindings whose answers are kept for the life of the process, least recently used first.
SHARED_BINDINGS = 256


@dataclass
class Memo:
    """One binding's answers: the step model that computed them and (seconds, fell back) per snapped shape."""

    inner: StepCostModel
    decode: dict[tuple[int, int], tuple[float, bool]] = field(default_factory=dict)
    prefill: dict[tuple[int, int, int], tuple[float, bool]] = field(default_factory=dict)
    speculative: dict[tuple[int, ...], tuple[float, bool]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_SHARED: OrderedDict[object, Memo] = OrderedDict()
_SHARED_LOCK = threading.Lock()


def shared_memo(inner: StepCostModel) -> Memo:
    """The process's memo for `inner`'s binding (its `memo_key`), or a memo of its own when it has no key."""
    key = inner.memo_key()
    if key is None:
        return Memo(inner)
    with _SHARED_LOCK:
        memo = _SHARED.get(key)
        if memo is None:
            memo = _SHARED[key] = Memo(inner)
            if len(_SHARED) > SHARED_BINDINGS:
                _SHARED.popitem(last=False)
        _SHARED.move_to_end(key)
        return memo


class CachedStepCost(StepCostModel):
    """Wraps a StepCostModel; answers are identical for equal snapped shapes.

    Step models with equal `memo_key`s share one memo (and the step model that fills it) for the life of the
    process, so the workers of a round and every later round ask the cost model once per shape.
    """

    name: ClassVar[str] = "cached"

    def __init__(self, inner: StepCostModel) -> None:
        memo = self._memo = shared_memo(inner)
        self.inner = memo.inner
        self._decode = memo.decode
        self._prefill = memo.prefill
        self._speculative = memo.speculative
        self.calls = 0
        self.fallbacks = 0

    def _ask(self, fn: Callable[..., float], *args: int) -> tuple[float, bool]:
        with self._memo.lock:
            before = self.inner.fallback_steps()
            seconds = fn(*args)
            return float(seconds), self.inner.fallback_steps() > before

    def decode_seconds(self, batch: int, context_tokens: int) -> float:
        key = (snap(batch), snap(context_tokens))
        hit = self._decode.get(key)
        if hit is None:
            hit = self._decode[key] = self._ask(self.inner.decode_seconds, *key)
        self.calls += 1
        self.fallbacks += hit[1]
        return hit[0]

    def prefill_seconds(self, new_tokens: int, cached_tokens: int, requests: int) -> float:
        key = (snap(new_tokens), snap(cached_tokens), snap(requests))
        hit = self._prefill.get(key)
        if hit is None:
            hit = self._prefill[key] = self._ask(self.inner.prefill_seconds, *key)
        self.calls += 1
        self.fallbacks += hit[1]
        return hit[0]

    def speculative_step_seconds(self, batch: int, context_tokens: int, draft_tokens: int, draft_steps: int,
                                 topk: int = 1) -> float:
        key = (snap(batch), snap(context_tokens), draft_tokens, draft_steps, topk)
        hit = self._speculative.get(key)
        if hit is None:
            hit = self._speculative[key] = self._ask(self.inner.speculative_step_seconds, *key)
        self.calls += 1
        self.fallbacks += hit[1]
        return hit[0]

    def transfer_seconds(self, nbytes: float, gbps: float) -> float:
        return self.inner.transfer_seconds(nbytes, gbps)

    def frontend_seconds(self, input_tokens: int) -> float:
        return self.inner.frontend_seconds(input_tokens)

    def bound_tokens_per_second(self) -> float:
        return self.inner.bound_tokens_per_second()

    def fallback_steps(self) -> int:
        return self.fallbacks

    def includes_expert_skew(self) -> bool:
        return self.inner.includes_expert_skew()

    def describe(self) -> str:
        return self.inner.describe()
