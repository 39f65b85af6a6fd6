"""Starting settings that hold the server back: a disabled radix cache, and a running cap below the load.

The casebook reads the metrics before it tunes ("Server Metrics"): a cache hit rate far below the sharing
rate means the prefix is not being reused, and a long queue while the KV cache has room "is a scheduling
issue", not a capacity one. A deployment handed to the tuner with such settings is fixed at the cause first.

- `radix_cache`: `--disable-radix-cache` on traffic that shares its prefixes (casebook "Prefix Sharing Rate":
  from 0.2 RadixAttention pays; the flag is for cold-start measurements, "launch with --disable-radix-cache").
- `scheduling_limits`: under a latency SLO, a `--max-running-requests` below the requests each instance holds
  while the KV cache is not saturated: the cap, not memory, makes requests wait. The cap is raised to cover
  them. Without a latency SLO, `batch_parameters` maximises the batch instead.
"""

from __future__ import annotations

import math
from typing import ClassVar

from plugins.techniques._rules import (
    graphs_for,
    has_latency_slo,
    main_server,
    measured_concurrency_per_instance,
    reused_prefix_tokens,
    running_cap,
    sharing_rate,
)
from service import Applicability, ConfigDelta, Technique, TuningContext

# Casebook "Prefix Sharing Rate": below 0.2 RadixAttention offers almost no benefit.
CACHE_WORTHWHILE = 0.2
# Casebook "Server Metrics": token_usage normal range 0.5-0.85; approaching 1.0 is KV saturation.
KV_SATURATED = 0.95


class RadixCache(Technique):
    """Turn RadixAttention back on where requests share prefixes."""

    name: ClassVar[str] = "radix_cache"
    rank: ClassVar[int] = 4
    # Every prefill of a shared prefix is recomputed until it is fixed, so it comes before what it distorts.
    diagnoses_before: ClassVar[tuple[str, ...]] = (
        "scale_out", "parallelism", "chunked_prefill", "router_policy", "prompt_structure", "hicache")
    description: ClassVar[str] = ("--disable-radix-cache on traffic that shares prefixes recomputes every shared "
                                  "token; RadixAttention reuses them (casebook 'Prefix Sharing Rate').")

    def applicable(self, ctx: TuningContext) -> Applicability:
        if not main_server(ctx.scenario).disable_radix_cache:
            return Applicability(False, "The radix cache is on.")
        rate = sharing_rate(ctx.scenario)
        if rate < CACHE_WORTHWHILE and reused_prefix_tokens(ctx.scenario) == 0:
            return Applicability(False, f"The radix cache is off, but the sharing rate {rate:.2f} is below 0.2, where "
                                        "RadixAttention offers almost no benefit (casebook).")
        return Applicability(True, f"The radix cache is off while requests share their prefixes (sharing rate "
                                   f"{rate:.2f}, {reused_prefix_tokens(ctx.scenario)} shared prefix tokens): every "
                                   "shared token is prefilled again; --disable-radix-cache is for cold-start "
                                   "measurements (casebook).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="radix cache on (no --disable-radix-cache)",
                            set_server={"disable_radix_cache": False})]


class SchedulingLimits(Technique):
    """Raise a running-request cap that makes requests queue while the KV cache has room."""

    name: ClassVar[str] = "scheduling_limits"
    rank: ClassVar[int] = 6
    # A queue the cap makes is measured by every other round until it is fixed, and more GPUs would only
    # add more capped queues: the diagnosis comes first ("the starting point for diagnosis", casebook).
    diagnoses_before: ClassVar[tuple[str, ...]] = (
        "scale_out", "parallelism", "chunked_prefill", "router_policy", "quantization", "speculative_decoding")
    description: ClassVar[str] = ("A long queue with the KV cache not saturated is a scheduling limit, not a "
                                  "capacity one (casebook 'Server Metrics'): raise --max-running-requests.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        cap, source = running_cap(main_server(ctx.scenario))
        if cap is None:
            return Applicability(False, "No --max-running-requests is set: SGLang sizes the batch from the KV pool.")
        if not has_latency_slo(ctx.scenario.slo):
            return Applicability(False, "No latency SLO: batch_parameters maximises the batch instead.")
        baseline = ctx.baseline
        if baseline is None:
            return Applicability(False, "Nothing is measured yet: the queue and KV usage of the first round decide.")
        held, _ = measured_concurrency_per_instance(ctx)
        usage, queue = baseline.server.token_usage, baseline.server.num_queue_reqs
        figures = (f"{held:.0f} requests per instance against a cap of {cap} ({source}), {queue:.1f} queued, "
                   f"token_usage {usage:.2f}")
        if held <= cap or queue < 1:
            return Applicability(False, f"The running cap is not what holds requests back ({figures}).")
        if usage >= KV_SATURATED:
            return Applicability(False, f"The KV cache is saturated ({figures}): more running requests would only "
                                        "be preempted (casebook: KV cache shortage is the bottleneck).")
        return Applicability(True, f"Requests queue behind the running cap while the KV cache has room ({figures}): "
                                   "a scheduling limit, not a capacity one (casebook 'Server Metrics').")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        held, _ = measured_concurrency_per_instance(ctx)
        cap, source = running_cap(main_server(ctx.scenario))
        cap = cap or 0
        raised = max(int(math.ceil(held / 16) * 16), 2 * cap)
        origin = "" if source.startswith("--") else ", SGLang's speculative reset"
        graphs, note = graphs_for(raised, ctx.scenario, main_server(ctx.scenario))
        return [ConfigDelta(technique=self.name, summary=f"max-running-requests {raised} (from {cap}{origin}){note}",
                            set_server={"max_running_requests": raised, **graphs})]
