"""Server figures of a round: `/metrics` before and after (prometheus-client's parser) and batch log lines.

Counters are differenced over the measured phase and summed over workers: the cache hit rate is
`cached_tokens_total / prompt_tokens_total` of the round, by tier from the counter's `cache_source` label
(device, host, storage); retractions are `num_retracted_requests_total` (`total_retracted_reqs` before
0.5.9). Summaries and histograms give the round's mean as the growth of `_sum` over that of `_count`:
`eplb_balancedness` (with its report on), `dp_attention_token_imbalance_ratio` (0.5.23) and the PD
`kv_transfer_latency_ms` / `kv_transfer_speed_gb_s`. The speculative accept length is the
`spec_accept_length` gauge after the round, averaged over workers.

A worker whose scrape fails is asked again once; if the scrape before the round still fails, its counters
are left out (never its lifetime totals) and the figures it would have given are named in
`ServerMetrics.missing`. Token usage, queue and running requests have no round-long metric (the gauges are
snapshots), so they are averaged over the `Decode batch` lines the workers logged during the round
(prefill lines when no decode line was logged), as is the accept length of a server without the gauge
(`scheduler_components/metrics_reporter.py`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence

import httpx
from prometheus_client.parser import text_string_to_metric_families

from service import ServerMetrics

TIERS = ("device", "host", "storage", "total")
MEANS = ("eplb_balancedness", "dp_attention_token_imbalance_ratio", "kv_transfer_latency_ms", "kv_transfer_speed_gb_s")
COUNTERS = ("prompt_tokens_total", "cached_tokens_total", "generation_tokens_total", "num_requests_total",
            "num_retracted_requests_total", "total_retracted_reqs",
            *(f"cached_tokens_total:{tier}" for tier in TIERS),
            *(f"{name}_{part}" for name in MEANS for part in ("sum", "count")))
GAUGES = ("spec_accept_length",)
# Figures that come from counter growth, lost with a worker's scrape before the round.
COUNTER_FIGURES = ("cache_hit_rate", "cache_hit_rate_by_tier", "num_retracted_requests_total",
                   "eplb_balancedness", "dp_attention_imbalance", "kv_transfer_latency_ms", "kv_transfer_speed_gb_s")
# `Decode batch[.,]` covers 0.5.2's period and the comma of later versions.
_BATCH = re.compile(r"(Decode|Prefill) batch[.,]\s*(?:\[\d+\],\s*)?(.*)")
_FIELD = re.compile(r"(#running-req|#queue-req|token usage|accept len|#retracted-req): ([\d.]+)")


def parse_metrics(text: str) -> dict[str, float]:
    """SGLang samples by name without the `sglang:` prefix, summed over label sets (counters and gauges).

    `cached_tokens_total` is also kept per `cache_source`, as `cached_tokens_total:<source>`.
    """
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if not sample.name.startswith("sglang:") or sample.name.endswith(("_bucket", "_created")):
                continue
            name = sample.name[len("sglang:"):]
            totals[name] = totals.get(name, 0.0) + float(sample.value)
            source = sample.labels.get("cache_source") if name == "cached_tokens_total" else None
            if source:
                key = f"{name}:{source}"
                totals[key] = totals.get(key, 0.0) + float(sample.value)
    return totals


async def _scrape_one(client: httpx.AsyncClient, url: str, attempts: int) -> dict[str, float] | None:
    for attempt in range(attempts):
        try:
            response = await client.get(url + "/metrics")
            if response.status_code == 200:
                return parse_metrics(response.text)
            if response.status_code == 404:
                return {}  # the server exports no metrics (launched without --enable-metrics)
        except (httpx.HTTPError, ValueError):
            pass
        if attempt + 1 < attempts:
            await asyncio.sleep(0.5)
    return None


async def scrape(client: httpx.AsyncClient, urls: Sequence[str], *, attempts: int = 2) -> list[dict[str, float] | None]:
    """One parsed `/metrics` per worker URL: empty when the worker exports none, None when every attempt failed."""
    return [await _scrape_one(client, url, attempts) for url in urls]


def counter_deltas(before: Sequence[Mapping[str, float] | None],
                   after: Sequence[Mapping[str, float] | None]) -> dict[str, float]:
    """Per-counter growth over the round, summed over the workers scraped both times; `workers_missing`
    counts the others, and `spec_accept_length` is the gauge's mean after the round over workers that have it."""
    deltas = dict.fromkeys(COUNTERS, 0.0)
    deltas["workers_missing"] = 0.0
    accept: list[float] = []
    for start, end in zip(before, after, strict=True):
        if end is not None and "spec_accept_length" in end and end["spec_accept_length"] > 0:
            accept.append(end["spec_accept_length"])
        if start is None or end is None:
            deltas["workers_missing"] += 1
            continue
        for name in COUNTERS:
            deltas[name] += max(end.get(name, 0.0) - start.get(name, 0.0), 0.0)
    if accept:
        deltas["spec_accept_length"] = sum(accept) / len(accept)
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


def _ratio(deltas: Mapping[str, float], name: str) -> float | None:
    count = deltas.get(f"{name}_count", 0.0)
    return deltas.get(f"{name}_sum", 0.0) / count if count > 0 else None


def _tiers(deltas: Mapping[str, float], prompt: float) -> dict[str, float] | None:
    if not prompt:
        return None
    tiers = {tier: deltas[f"cached_tokens_total:{tier}"] / prompt for tier in TIERS
             if deltas.get(f"cached_tokens_total:{tier}", 0.0) > 0}
    return tiers or None


def server_metrics(deltas: Mapping[str, float], logs: Sequence[str], *, workers: int = 0) -> ServerMetrics:
    """ServerMetrics of a round from counter growth and the log lines written during it.

    With every worker's counters lost (`deltas["workers_missing"] == workers`), the counter figures are
    named in `missing` and left at their empty values.
    """
    decode: list[dict[str, float]] = []
    prefill: list[dict[str, float]] = []
    for text in logs:
        d, p = batch_lines(text)
        decode += d
        prefill += p
    rows = decode or prefill
    prompt = deltas.get("prompt_tokens_total", 0.0)
    retracted = deltas.get("num_retracted_requests_total", 0.0) + deltas.get("total_retracted_reqs", 0.0)
    lost = int(deltas.get("workers_missing", 0.0))
    missing = list(COUNTER_FIGURES) if lost and lost >= workers else []
    return ServerMetrics(
        token_usage=_mean(rows, "token usage") or 0.0,
        cache_hit_rate=deltas.get("cached_tokens_total", 0.0) / prompt if prompt else 0.0,
        cache_hit_rate_by_tier=_tiers(deltas, prompt),
        num_queue_reqs=_mean(rows, "#queue-req") or 0.0,
        num_running_reqs=_mean(rows, "#running-req") or 0.0,
        num_retracted_requests_total=int(retracted),
        spec_accept_length=deltas.get("spec_accept_length") or _mean(decode, "accept len"),
        eplb_balancedness=_ratio(deltas, "eplb_balancedness"),
        dp_attention_imbalance=_ratio(deltas, "dp_attention_token_imbalance_ratio"),
        kv_transfer_latency_ms=_ratio(deltas, "kv_transfer_latency_ms"),
        kv_transfer_speed_gb_s=_ratio(deltas, "kv_transfer_speed_gb_s"),
        missing=missing)


def missing_note(deltas: Mapping[str, float], workers: int) -> str | None:
    """The round's note when some worker's `/metrics` before or after the round failed twice."""
    lost = int(deltas.get("workers_missing", 0.0))
    if not lost:
        return None
    if lost >= workers:
        return (f"the /metrics scrape failed twice on every worker ({lost}); the round's counter figures "
                f"({', '.join(COUNTER_FIGURES)}) are missing, not lifetime totals")
    return (f"the /metrics scrape failed twice on {lost} of {workers} workers; their counters are left out of "
            "the round's cache hit rate and retractions")
