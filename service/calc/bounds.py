"""The sizes the calculators accept: positive and finite, within what any deployment could have.

A negative layer count gave a negative KV size, and 1e308 tokens per request overflowed into an error;
every input is now checked against the range below, and a value outside it is refused naming the field.
The upper ends are far beyond any model or deployment (a million layers, a billion tokens per request),
so they only keep the arithmetic finite. The HTTP schema and the CLI read their ranges from here.
"""

from __future__ import annotations

import math

import msgspec


class Bound(msgspec.Struct, frozen=True):
    """An inclusive range; `low_open` makes the low end exclusive (a size above 0)."""

    low: float
    high: float
    low_open: bool = False

    def holds(self, value: float) -> bool:
        """Whether `value` is finite and inside the range."""
        if not math.isfinite(value) or value > self.high:
            return False
        return value > self.low if self.low_open else value >= self.low

    def describe(self) -> str:
        low = f"above {self.low:g}" if self.low_open else f"at least {self.low:g}"
        return f"{low} and at most {self.high:g}"


POSITIVE_COUNT = Bound(1, 1_000_000)  # layers, heads, GPUs: at least one
WIDTH = Bound(1, 1_000_000)  # head dimension, MLA latent width
ROPE_WIDTH = Bound(0, 1_000_000)  # the MLA rope key may be absent
KV_BYTES = Bound(1, 1e12)
TOKENS = Bound(0, 1e9, low_open=True)  # per request or per document
REQUESTS = Bound(1, 1e15)
SECONDS = Bound(0, 1e10, low_open=True)  # 300 years
GIGABYTES = Bound(0, 1e9)  # weights or headroom may be 0
POOL_GIGABYTES = Bound(0, 1e9, low_open=True)
RATIO = Bound(0, 1e6, low_open=True)
PARAMS = Bound(0, 1e15, low_open=True)
TOKEN_MEAN = Bound(0, 1e9)  # mean tokens per request; 0 output tokens is a prefill-only job
RATE = Bound(0, 1e15, low_open=True)  # tokens per second, FLOP/s, bandwidth
PRICE = Bound(0, 1e12)
FRACTION = Bound(0, 1, low_open=True)


class CalcInputError(ValueError):
    """A calculator input outside its range; `field` names it as the caller gave it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def schema(bound: Bound, *, integer: bool = False) -> msgspec.Meta:
    """The range as msgspec constraints, for request schemas (integers get integer ends)."""
    low: float = int(bound.low) if integer else bound.low
    high: float = int(bound.high) if integer else bound.high
    if bound.low_open:
        return msgspec.Meta(gt=low, le=high, description=f"{bound.describe()}")
    return msgspec.Meta(ge=low, le=high, description=f"{bound.describe()}")


def check(field: str, value: float, bound: Bound) -> None:
    """Refuse `value` outside `bound`, naming `field`.

    Raises:
        CalcInputError: the value is not finite or out of range.
    """
    if not bound.holds(value):
        raise CalcInputError(field, f"{field} must be {bound.describe()}, not {value!r}")
