"""Server figures of a round: `/metrics` before and after (prometheus-client's parser) and batch log lines.

Counters are differenced over the measured phase and summed over workers: the cache hit rate is
`cached_tokens_total / prompt_tokens_total` of the round, retractions are `num_retracted_requests_total`
(`total_retracted_reqs` before 0.5.9). Token usage, queue and running requests are averaged over the
`Decode batch` lines the workers logged during the round (prefill lines when no decode line was logged),
and the speculative accept length is read from those lines (`scheduler_components/metrics_reporter.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import httpx
from prometheus_client.parser import text_string_to_metric_families

from service import ServerMetrics

COUNTERS = ("prompt_tokens_total", "cached_tokens_total", "generation_tokens_total", "num_requests_total",
            "num_retracted_requests_total", "total_retracted_reqs")
# `Decode batch[.,]` covers 0.5.2's period and the comma of later versions.
_BATCH = re.compile(r"(Decode|Prefill) batch[.,]\s*(?:\[\d+\],\s*)?(.*)")
_FIELD = re.compile(r"(#running-req|#queue-req|token usage|accept len|#retracted-req): ([\d.]+)")


def parse_metrics(text: str) -> dict[str, float]:
    """SGLang samples by name without the `sglang:` prefix, summed over label sets (counters and gauges)."""
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("sglang:") or sample.name.endswith(("_bucket", "_created")):
                continue
            name = sample.name[len("sglang:"):]
            totals[name] = totals.get(name, 0.0) + float(sample.value)
    return totals


async def scrape(client: httpx.AsyncClient, urls: Sequence[str]) -> list[dict[str, float]]:
    """One parsed `/metrics` per worker URL (empty when the worker exports none)."""
    readings = []
    for url in urls:
        try:
            response = await client.get(url + "/metrics")
            readings.append(parse_metrics(response.text) if response.status_code == 200 else {})
        except (httpx.HTTPError, ValueError):
            readings.append({})
    return readings


def counter_deltas(before: Sequence[Mapping[str, float]], after: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per-counter growth over the round, summed over workers."""
    deltas = dict.fromkeys(COUNTERS, 0.0)
    for start, end in zip(before, after, strict=True):
        for name in COUNTERS:
            deltas[name] += max(end.get(name, 0.0) - start.get(name, 0.0), 0.0)
    return deltas


def batch_lines(text: str) -> tuple[list[dict[str, float]], list[dict[str, float]]]:
    """Fields of the (decode, prefill) batch lines in a log excerpt."""
    decode: list[dict[str, float]] = []
    prefill: list[dict[str, float]] = []
    for line in text.splitlines():
        match = _BATCH.search(line)
        if match is None:
            continue
        fields = {name: float(value) for name, value in _FIELD.findall(match.group(2))}
        (decode if match.group(1) == "Decode" else prefill).append(fields)
    return decode, prefill


def _mean(rows: Sequence[Mapping[str, float]], key: str) -> float | None:
    values = [row[key] for row in rows if key in row]
    return sum(values) / len(values) if values else None


def server_metrics(deltas: Mapping[str, float], logs: Sequence[str]) -> ServerMetrics:
    """ServerMetrics of a round from counter growth and the log lines written during it."""
    decode: list[dict[str, float]] = []
    prefill: list[dict[str, float]] = []
    for text in logs:
        d, p = batch_lines(text)
        decode += d
        prefill += p
    rows = decode or prefill
    prompt = deltas.get("prompt_tokens_total", 0.0)
    retracted = deltas.get("num_retracted_requests_total", 0.0) + deltas.get("total_retracted_reqs", 0.0)
    return ServerMetrics(
        token_usage=_mean(rows, "token usage") or 0.0,
        cache_hit_rate=deltas.get("cached_tokens_total", 0.0) / prompt if prompt else 0.0,
        num_queue_reqs=_mean(rows, "#queue-req") or 0.0,
        num_running_reqs=_mean(rows, "#running-req") or 0.0,
        num_retracted_requests_total=int(retracted),
        spec_accept_length=_mean(decode, "accept len"))
