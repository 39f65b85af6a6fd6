"""Threshold batch size, deadline throughput and cost (casebook cases 1, 3 and 5)."""

from __future__ import annotations

import math

import msgspec

from service.calc.bounds import PRICE, RATE, REQUESTS, SECONDS, TOKEN_MEAN, Bound, check
from service.calc.units import SECONDS_PER_HOUR
from service.domain.hardware import GpuSpec, gpu_spec


def threshold_batch_size(gpu: GpuSpec | str, dtype: str = "bf16") -> int:
    """Batch size where decode turns from memory-bound to compute-bound: peak dense FLOP/s over HBM bandwidth.

    Casebook: "H200 threshold batch size (206)" = 989 TFLOP/s ÷ 4.8 TB/s and "H100 threshold batch size of
    295" = 989 ÷ 3.35. Below it, decode time follows weight bytes read (speculative decoding pays off);
    near it, the GPU has no compute to spare.

    Args:
        gpu: A catalogue entry or its name/alias (`H100`, `H200-SXM`...).
        dtype: `bf16` (the casebook's figure) or `fp8` for the FP8 tensor-core peak.

    Returns:
        The threshold, rounded down to a whole batch.
    """
    spec = gpu_spec(gpu) if isinstance(gpu, str) else gpu
    tflops = spec.fp8_tflops if dtype.lower().startswith("fp8") else spec.bf16_tflops
    return math.floor(tflops / spec.hbm_bandwidth_tbps)


class RequiredThroughput(msgspec.Struct, frozen=True, kw_only=True):
    """Throughput a batch job needs to finish by its deadline."""

    requests: int
    deadline_s: float
    total_input_tokens: int
    total_output_tokens: int
    input_tokens_per_s: float
    output_tokens_per_s: float


def required_throughput(requests: int, input_tokens: float, output_tokens: float,
                        deadline_s: float) -> RequiredThroughput:
    """Input and output tok/s needed to process `requests` within `deadline_s`.

    Casebook case 3: "2,400,000 × 150 = 3.60e8 tokens; 3.60e8 / 43,200 ≈ 8,333 tok/s" output and
    "2.88e9 / 43,200 ≈ 66,667 tok/s" input.

    Args:
        requests: Number of requests in the job.
        input_tokens: Mean input tokens per request.
        output_tokens: Mean output tokens per request.
        deadline_s: Time allowed, in seconds.

    Returns:
        Totals and the required rates.

    Raises:
        CalcInputError: A count, length or deadline out of its range (`service.calc.bounds`).
    """
    check("requests", requests, REQUESTS)
    check("input_tokens", input_tokens, TOKEN_MEAN)
    check("output_tokens", output_tokens, TOKEN_MEAN)
    check("deadline_s", deadline_s, SECONDS)
    total_in = round(requests * input_tokens)
    total_out = round(requests * output_tokens)
    return RequiredThroughput(
        requests=requests, deadline_s=deadline_s, total_input_tokens=total_in, total_output_tokens=total_out,
        input_tokens_per_s=total_in / deadline_s, output_tokens_per_s=total_out / deadline_s,
    )


def completion_hours(total_output_tokens: float, output_tokens_per_s: float) -> float:
    """Hours a job takes at a measured output rate (casebook case 3: "3.60e8 / 2148 / 3600 ≈ 46.5 hours").

    Raises:
        CalcInputError: a negative total or a rate that is not positive.
    """
    check("total_output_tokens", total_output_tokens, Bound(0, REQUESTS.high * TOKEN_MEAN.high))
    check("output_tokens_per_s", output_tokens_per_s, RATE)
    return total_output_tokens / output_tokens_per_s / SECONDS_PER_HOUR


def cost_per_million_output_tokens(price_per_hour: float, output_tokens_per_s: float) -> float:
    """Dollars per 1M output tokens at a sustained output rate.

    Casebook case 5: "16 nodes = $512/hour; 112,000 tok/s × 3,600 = 4.03e8 tok/hour;
    $512 / 403 (million tokens) ≈ $1.27 / 1M output tokens".

    Args:
        price_per_hour: Price of the whole deployment per hour (e.g. $32/node-hour × 16 nodes).
        output_tokens_per_s: Sustained output token throughput of that deployment.

    Returns:
        Cost in the price's currency per million output tokens.

    Raises:
        CalcInputError: When the price is negative or the throughput not positive.
    """
    check("price_per_hour", price_per_hour, PRICE)
    check("output_tokens_per_s", output_tokens_per_s, RATE)
    millions_per_hour = output_tokens_per_s * SECONDS_PER_HOUR / 1e6
    return price_per_hour / millions_per_hour
