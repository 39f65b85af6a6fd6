"""Read `sglang.bench_serving` output: the printed result block or a line of its `--output-file` JSONL.

The printed block is `"{:<40} {:<10}"` label/value lines (sglang/benchmark/serving.py); versions 0.5.2,
0.5.9 and 0.5.20+ print different subsets, and the casebook's abridged blocks drop lines and sometimes
the colon (`req/s 34.41`). Any subset is accepted; what was present is reported.
"""

from __future__ import annotations

import json
import math
from typing import Literal

import msgspec

from service.diagnosis.findings import DiagnosisInputError
from service.domain import BenchFigures

_FIELDS = set(BenchFigures.__struct_fields__)

# Printed labels (lower-cased, without the trailing colon) -> output-file keys.
_LABELS = {
    "successful requests": "completed",
    "benchmark duration (s)": "duration",
    "total input tokens": "total_input_tokens",
    "total generated tokens": "total_output_tokens",
    "request throughput (req/s)": "request_throughput",
    "req/s": "request_throughput",
    "input token throughput (tok/s)": "input_throughput",
    "output token throughput (tok/s)": "output_throughput",
    "total token throughput (tok/s)": "total_throughput",
    "concurrency": "concurrency",
    "accept length": "accept_length",
    "peak concurrent requests": "max_concurrent_requests",
    "max request concurrency": "max_concurrency",
    "traffic request rate": "request_rate",
}
_STATS = ("mean", "median", "std", "p90", "p95", "p99", "max")
_SERIES = {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e latency": "e2e_latency"}


class BenchReading(msgspec.Struct, kw_only=True):
    """The figures one bench_serving run reported.

    Attributes:
        figures: Output-file keys; fields the input did not carry stay at 0.
        fields: The output-file keys the input carried.
        max_concurrency: `--max-concurrency` (None when "not set" or absent).
        request_rate: `--request-rate` (inf for a closed loop), when printed.
        format: `printed` for the result block, `json` for an output-file line.
    """

    figures: BenchFigures
    fields: list[str]
    max_concurrency: int | None = None
    request_rate: float | None = None
    format: Literal["printed", "json"] = "printed"


def parse_bench_output(text: str) -> BenchReading:
    """Read bench_serving's printed block or JSON line (the last JSON line wins, as the file appends).

    Raises:
        DiagnosisInputError: when the text carries no bench_serving figure.
    """
    json_lines = [line.strip() for line in text.splitlines() if line.strip().startswith("{")]
    if json_lines:
        return _from_json(json_lines[-1])
    values = _printed_values(text)
    if not values.keys() & _FIELDS:
        raise DiagnosisInputError(
            "bench_output: no sglang.bench_serving figures found. Pass the block printed by "
            "`python -m sglang.bench_serving` (it starts with '=== Serving Benchmark Result ===') "
            "or one line of its --output-file JSONL."
        )
    return _reading(values, "printed")


def _from_json(line: str) -> BenchReading:
    try:
        raw = json.loads(line)  # the stdlib parser, since bench_serving writes `Infinity` for an unset rate
    except json.JSONDecodeError as exc:
        raise DiagnosisInputError(
            f"bench_output: the JSON line does not parse ({exc.msg} at column {exc.colno}); "
            "pass one whole line of bench_serving's --output-file."
        ) from exc
    if not isinstance(raw, dict) or not raw.keys() & _FIELDS:
        raise DiagnosisInputError(
            "bench_output: the JSON object has no bench_serving keys (completed, output_throughput, "
            "median_ttft_ms...); pass a line of bench_serving's --output-file."
        )
    values: dict[str, float | None] = {}
    for key, value in raw.items():
        if key in _FIELDS or key in ("max_concurrency", "request_rate"):
            values[key] = _number(value)
    return _reading(values, "json")


def _reading(values: dict[str, float | None], fmt: Literal["printed", "json"]) -> BenchReading:
    max_concurrency = values.pop("max_concurrency", None)
    request_rate = values.pop("request_rate", None)
    present = {k: v for k, v in values.items() if k in _FIELDS and v is not None}
    # Lax conversion turns the block's `500` (read as 500.0) back into the int field it is.
    figures = msgspec.convert(present, BenchFigures, strict=False)
    return BenchReading(
        figures=figures,
        fields=sorted(present),
        max_concurrency=int(max_concurrency) if max_concurrency is not None and math.isfinite(max_concurrency) else None,
        request_rate=request_rate,
        format=fmt,
    )


def _printed_values(text: str) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    for raw_line in text.splitlines():
        parsed = _printed_line(raw_line.strip())
        if parsed is not None and parsed[0] not in values:
            values[parsed[0]] = parsed[1]
    return values


def _printed_line(line: str) -> tuple[str, float | None] | None:
    if not line or line.startswith(("=", "-", "#")):
        return None
    label, colon, value = line.partition(":")
    if not colon:
        # The casebook's abridged tables: `req/s 34.41`.
        label, _, value = line.rpartition(" ")
    key = _key_for(label.strip().lower())
    if key is None:
        return None
    words = value.split()
    if not words:
        return None
    if " ".join(words[:2]).lower() == "not set":
        return key, None
    number = _number(words[0])
    return (key, number) if number is not None else None


def _key_for(label: str) -> str | None:
    if label in _LABELS:
        return _LABELS[label]
    if not label.endswith("(ms)"):
        return None
    stat, _, series = label.removesuffix("(ms)").strip().partition(" ")
    if stat in _STATS and series in _SERIES:
        return f"{stat}_{_SERIES[series]}_ms"
    return None


def _number(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    try:
        return float(value.replace(",", ""))
    except ValueError:
        return None
