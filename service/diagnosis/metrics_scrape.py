"""Read a `/metrics` scrape of an SGLang server with prometheus-client's text parser.

SGLang names its metrics `sglang:<name>` (srt/observability/metrics_collector.py); the casebook and the
`/v1/loads?format=prometheus` endpoint spell them `sglang_<name>`. Both are accepted. Lines pasted from a
`curl ... | grep` session (the command itself, `# ` before a sample, `← note` after it) are cleaned first.
"""

from __future__ import annotations

import msgspec
from prometheus_client.parser import text_string_to_metric_families

from service.diagnosis.findings import DiagnosisInputError
from service.domain import ServerMetrics

_PREFIXES = ("sglang:", "sglang_")
# Request counts add up across data-parallel ranks and workers; ratios average.
_SUMMED_SUFFIXES = ("_reqs", "_total")


class MetricsReading(msgspec.Struct, kw_only=True):
    """Server figures read from one scrape.

    Attributes:
        values: Every SGLang sample, by name without the `sglang:` prefix, aggregated over labels.
        server: The figures the tuner keeps, as `ServerMetrics`.
        utilization: `sglang:utilization`, when the server exports it.
    """

    values: dict[str, float]
    server: ServerMetrics
    utilization: float | None = None

    def has(self, name: str) -> bool:
        """Whether the scrape carried this metric (name without prefix)."""
        return name in self.values


def parse_metrics_scrape(text: str) -> MetricsReading:
    """Aggregate the SGLang samples of a Prometheus text scrape.

    Raises:
        DiagnosisInputError: when the scrape does not parse or carries no SGLang metric.
    """
    cleaned = _clean(text)
    samples: dict[str, list[float]] = {}
    try:
        for family in text_string_to_metric_families(cleaned):
            for sample in family.samples:
                name = _unprefixed(sample.name)
                if name is not None:
                    samples.setdefault(name, []).append(float(sample.value))
                    if name == "cached_tokens_total" and sample.labels.get("cache_source"):
                        samples.setdefault(f"{name}:{sample.labels['cache_source']}", []).append(float(sample.value))
    except ValueError as exc:
        raise DiagnosisInputError(
            f"metrics: the scrape is not Prometheus text format ({exc}); pass the body of "
            "`curl http://HOST:PORT/metrics` from a server launched with --enable-metrics."
        ) from exc
    if not samples:
        raise DiagnosisInputError(
            "metrics: no sglang: or sglang_ metric in the scrape; launch the server with --enable-metrics "
            "and pass the body of `curl http://HOST:PORT/metrics`."
        )
    values = {name: _aggregate(name.partition(":")[0], series) for name, series in samples.items()}
    return MetricsReading(values=values, server=_server_metrics(values), utilization=values.get("utilization"))


def _clean(text: str) -> str:
    lines = []
    for raw in text.splitlines():
        line = raw.split("←", 1)[0].strip()
        if line.startswith("# ") and line[2:].startswith(_PREFIXES):
            line = line[2:]
        if line.startswith(_PREFIXES) or line.startswith(("# HELP", "# TYPE")):
            lines.append(line)
    return "\n".join(lines) + "\n"


def _unprefixed(name: str) -> str | None:
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


def _aggregate(name: str, series: list[float]) -> float:
    if name.endswith(_SUMMED_SUFFIXES) or name.endswith(("_count", "_sum")):
        return sum(series)
    return sum(series) / len(series)


def _mean_of(values: dict[str, float], name: str) -> float | None:
    """A Summary's or Histogram's mean over the server's lifetime: `_sum / _count`."""
    count = values.get(f"{name}_count")
    return values.get(f"{name}_sum", 0.0) / count if count else None


def _tiers(values: dict[str, float]) -> dict[str, float] | None:
    prompt = values.get("prompt_tokens_total")
    if not prompt:
        return None
    tiers = {tier: values[f"cached_tokens_total:{tier}"] / prompt for tier in ("device", "host", "storage", "total")
             if values.get(f"cached_tokens_total:{tier}", 0.0) > 0}
    return tiers or None


def _server_metrics(values: dict[str, float]) -> ServerMetrics:
    retracted = values.get("num_retracted_requests_total", values.get("num_retracted_reqs", 0.0))
    grammar_mean = None
    count = values.get("grammar_compilation_time_seconds_count")
    if count:
        grammar_mean = values.get("grammar_compilation_time_seconds_sum", 0.0) / count * 1000.0
    return ServerMetrics(
        token_usage=values.get("token_usage", 0.0),
        cache_hit_rate=values.get("cache_hit_rate", 0.0),
        num_queue_reqs=values.get("num_queue_reqs", 0.0),
        num_running_reqs=values.get("num_running_reqs", 0.0),
        num_retracted_requests_total=int(retracted),
        spec_accept_length=values.get("spec_accept_length"),
        spec_accept_rate=values.get("spec_accept_rate"),
        grammar_compile_time_mean_ms=grammar_mean,
        cache_hit_rate_by_tier=_tiers(values),
        eplb_balancedness=_mean_of(values, "eplb_balancedness"),
        dp_attention_imbalance=_mean_of(values, "dp_attention_token_imbalance_ratio"),
        kv_transfer_latency_ms=_mean_of(values, "kv_transfer_latency_ms"),
        kv_transfer_speed_gb_s=_mean_of(values, "kv_transfer_speed_gb_s"),
    )
