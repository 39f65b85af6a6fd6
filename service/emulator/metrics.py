"""The emulated server's `/metrics`: SGLang's `sglang:` names, labels and multiprocess exposition.

Names, types, labels and default buckets follow `srt/observability/metrics_collector.py` (0.5.23): scheduler
gauges carry `model_name, engine_type, tp_rank, pp_rank, moe_ep_rank` (no `moe_ep_rank` before 0.5.9),
tokenizer metrics `model_name, engine_type` (only `model_name` in 0.5.2) plus `is_streaming` from 0.5.20.
Multiprocess mode means no `_created` samples and a `pid` label on `num_retracted_reqs`.
"""

from __future__ import annotations

import bisect
import os
from typing import TYPE_CHECKING, Any

from service.sglang import version_key

if TYPE_CHECKING:
    from service.emulator.args import ServerArgs
    from service.emulator.engine import LiveRequest
    from service.simulator.experts import ExpertBalance
    from service.simulator.requests import SimRequest

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080, 0.100,
               0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)


class Histogram:
    """Cumulative buckets, sum and count of one label set."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, value: float, weight: int = 1) -> None:
        """Count `weight` observations of `value`."""
        self.counts[bisect.bisect_left(self.buckets, value)] += weight
        self.sum += value * weight

    def lines(self, name: str, labels: str) -> list[str]:
        """Exposition lines: cumulative buckets, count and sum."""
        out, running = [], 0
        for bound, count in zip([*self.buckets, float("inf")], self.counts, strict=True):
            running += count
            le = "+Inf" if bound == float("inf") else repr(float(bound))
            out.append(f'{name}_bucket{{{labels},le="{le}"}} {running}')
        out += [f"{name}_count{{{labels}}} {running}", f"{name}_sum{{{labels}}} {self.sum}"]
        return out


def _label_text(labels: dict[str, str]) -> str:
    return ",".join(f'{key}="{value}"' for key, value in labels.items())


class EngineMetrics:
    """Counters, gauges and histograms of one emulated server, rendered as Prometheus text."""

    def __init__(self, args: ServerArgs, pool_tokens: int) -> None:
        version = version_key(args.version)
        engine_type = {"prefill": "prefill", "decode": "decode"}.get(args.disaggregation_mode, "unified")
        name = args.served_model_name
        self.scheduler = {"model_name": name, "engine_type": engine_type, "tp_rank": "0", "pp_rank": "0"}
        if version >= (0, 5, 9):
            self.scheduler["moe_ep_rank"] = "0"
        self.tokenizer = {"model_name": name} if version < (0, 5, 9) else {"model_name": name,
                                                                           "engine_type": engine_type}
        self.streaming_label = version >= (0, 5, 20)
        self.retracted_counter = version >= (0, 5, 9)
        self.pool_tokens = pool_tokens
        self.gauges: dict[str, float] = {"num_running_reqs": 0, "num_queue_reqs": 0, "token_usage": 0.0,
                                         "cache_hit_rate": 0.0, "gen_throughput": 0.0, "num_used_tokens": 0}
        self.prompt_tokens = self.generation_tokens = self.cached_tokens = self.host_cached_tokens = 0
        # `sglang:eplb_balancedness` is a Summary by forward mode, exported with its report on
        # (`--expert-balancedness-report-mode prometheus|both` from 0.5.20, before that
        # `--enable-expert-distribution-metrics`).
        self.balancedness_on = (args.get("expert_balancedness_report_mode") in ("prometheus", "both")
                                or bool(args.get("enable_expert_distribution_metrics")))
        self.balancedness: dict[str, list[float]] = {}
        self.requests = self.retracted = self.last_retracted = 0
        self.gen_throughput = 0.0
        self.spec_accept_length: float | None = None
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    # -- events from the engine -----------------------------------------------------------------------

    def on_arrival(self, prompt_tokens: int) -> None:
        """A request arrived with `prompt_tokens` tokens."""
        self.prompt_tokens += prompt_tokens
        self.requests += 1

    def on_prefill(self, new: int, cached: int, usage: float, running: int, waiting: int) -> None:
        """A prefill batch ran: `new` tokens computed, `cached` read from the radix cache."""
        # Prefill-owned gauge: hit / (input + hit) of this batch (scheduler_components/metrics_reporter.py).
        self.gauges["cache_hit_rate"] = round(cached / max(new + cached, 1), 4)
        self._load(usage, running, waiting)

    def on_decode(self, usage: float, running: int, waiting: int) -> None:
        """A decode step ran."""
        self._load(usage, running, waiting)

    def _load(self, usage: float, running: int, waiting: int) -> None:
        self.gauges.update(token_usage=round(usage, 2), num_running_reqs=running, num_queue_reqs=waiting,
                           num_used_tokens=round(usage * self.pool_tokens))

    def on_retraction(self, count: int) -> None:
        """`count` requests were retracted in the last step."""
        self.retracted += count
        self.last_retracted = count

    def on_first_token(self, sim: SimRequest, ttft: float) -> None:
        """A request got its first token after `ttft` emulated seconds."""
        self.cached_tokens += sim.cached_tokens - sim.host_hit_tokens
        self.host_cached_tokens += sim.host_hit_tokens
        self.ttft.observe(ttft)

    def on_forward_pass(self, mode: str, balance: ExpertBalance | None) -> None:
        """A forward pass ran; under EP with the report on, its balancedness (mean/max load per GPU rank)."""
        if balance is not None and self.balancedness_on:
            totals = self.balancedness.setdefault(mode, [0.0, 0.0])
            totals[0] += 1
            totals[1] += 1.0 / balance.rank_imbalance

    def on_tokens(self, count: int) -> None:
        """`count` tokens were generated."""
        self.generation_tokens += count

    def on_finished(self, live: LiveRequest, now: float) -> None:
        """A request finished: end-to-end latency and its inter-token latency."""
        self.e2e.observe(now - live.arrived)
        tokens = live.published
        if tokens > 1 and live.first_token_at >= 0:
            self.itl.observe((now - live.first_token_at) / (tokens - 1), tokens - 1)

    # -- exposition -----------------------------------------------------------------------------------

    def render(self) -> str:
        """Prometheus text 0.0.4, as `prometheus_client`'s multiprocess collector writes it."""
        scheduler = _label_text(self.scheduler)
        tokenizer = self.tokenizer | ({"is_streaming": "true"} if self.streaming_label else {})
        token_labels = _label_text(tokenizer)
        self.gauges["gen_throughput"] = round(self.gen_throughput, 2)
        lines: list[str] = []
        for gauge, value in self.gauges.items():
            lines += [f"# HELP sglang:{gauge} {gauge}.", f"# TYPE sglang:{gauge} gauge",
                      f"sglang:{gauge}{{{scheduler}}} {float(value)}"]
        lines += self._spec_and_retraction(scheduler)
        for counter, value in (("prompt_tokens_total", self.prompt_tokens),
                               ("generation_tokens_total", self.generation_tokens),
                               ("num_requests_total", self.requests)):
            lines += [f"# HELP sglang:{counter} {counter}.", f"# TYPE sglang:{counter} counter",
                      f"sglang:{counter}{{{token_labels}}} {float(value)}"]
        lines += ["# HELP sglang:cached_tokens_total cached tokens.", "# TYPE sglang:cached_tokens_total counter"]
        for source, count in (("device", self.cached_tokens), ("host", self.host_cached_tokens)):
            if source == "device" or count:  # a source's sample appears with its first cached token
                cached = _label_text(self.tokenizer | {"cache_source": source})
                lines.append(f"sglang:cached_tokens_total{{{cached}}} {float(count)}")
        if self.balancedness:
            lines += ["# HELP sglang:eplb_balancedness Balancedness of MoE in expert parallelism.",
                      "# TYPE sglang:eplb_balancedness summary"]
            for mode, (passes, total) in self.balancedness.items():
                labels = f'{scheduler},forward_mode="{mode}"'
                lines += [f"sglang:eplb_balancedness_count{{{labels}}} {passes}",
                          f"sglang:eplb_balancedness_sum{{{labels}}} {total}"]
        for metric, histogram, labels in (("time_to_first_token_seconds", self.ttft, token_labels),
                                          ("inter_token_latency_seconds", self.itl, _label_text(self.tokenizer)),
                                          ("e2e_request_latency_seconds", self.e2e, token_labels)):
            lines += [f"# HELP sglang:{metric} {metric}.", f"# TYPE sglang:{metric} histogram",
                      *histogram.lines(f"sglang:{metric}", labels)]
        return "\n".join(lines) + "\n"

    def _spec_and_retraction(self, scheduler: str) -> list[str]:
        lines: list[str] = []
        if self.spec_accept_length is not None:
            lines += ["# TYPE sglang:spec_accept_length gauge",
                      f"sglang:spec_accept_length{{{scheduler}}} {self.spec_accept_length}"]
        pid = f'{scheduler},pid="{os.getpid()}"'
        lines += ["# TYPE sglang:num_retracted_reqs gauge", f"sglang:num_retracted_reqs{{{pid}}} "
                  f"{float(self.last_retracted)}"]
        if self.retracted_counter:
            lines += ["# TYPE sglang:num_retracted_requests_total counter",
                      f"sglang:num_retracted_requests_total{{{scheduler}}} {float(self.retracted)}"]
        else:
            lines += ["# TYPE sglang:total_retracted_reqs gauge",
                      f"sglang:total_retracted_reqs{{{scheduler}}} {float(self.retracted)}"]
        return lines

    def snapshot(self) -> dict[str, Any]:
        """Figures for `/server_info` internal state and `/get_load`."""
        return {"last_gen_throughput": self.gen_throughput, "spec_accept_length": self.spec_accept_length,
                **self.gauges}
