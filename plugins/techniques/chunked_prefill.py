"""Chunked prefill: split long prefills so short requests and running decodes are not stuck behind them."""

from __future__ import annotations

from typing import ClassVar

from plugins.techniques._rules import has_latency_slo, main_server
from service import Applicability, ConfigDelta, Technique, TuningContext

SMALLEST_CHUNK = 1024


def start_size(ctx: TuningContext) -> int:
    """4096 when long prompts dominate the tail (input p95 >= 3x the median), else 8192.

    Casebook case 1 (p95 28,000 vs median 2,100) settles at 4096; cases 2 and 4 keep 8192.
    """
    dist = ctx.scenario.workload.input
    if dist.p95 is not None and dist.p95 >= 3 * dist.median:
        return 4096
    return 8192


class ChunkedPrefill(Technique):
    """Sweep `--chunked-prefill-size` down from the start size while each halving is kept."""

    name: ClassVar[str] = "chunked_prefill"
    rank: ClassVar[int] = 3
    description: ClassVar[str] = ("Stabilises p99 TTFT and max ITL by splitting long prefills; the sweep halves "
                                  "the chunk until a smaller one is rolled back (casebook case 1: 4096, not 2048).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        if not has_latency_slo(ctx.scenario.slo):
            return Applicability(False, "Without a latency SLO there is no reason to split prefills; larger chunks "
                                        "use the GPU better (casebook case 3).")
        current = main_server(ctx.scenario).chunked_prefill_size
        if current is not None and 0 < current <= SMALLEST_CHUNK:
            return Applicability(False, f"The chunk is already {current} tokens, the smallest the sweep tries.")
        return Applicability(True, "Chunked prefill should always be enabled with a latency SLO: it trades a few % "
                                   "of throughput for a large cut in tail latency (casebook case 1).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        sizes = [int(s) for s in ctx.options.get("sizes", [])] or _halvings(start_size(ctx))
        current = main_server(ctx.scenario).chunked_prefill_size
        if current is None or current <= 0 or current > sizes[0]:
            nxt = sizes[0]
        else:
            smaller = [s for s in sizes if s < current]
            if not smaller:
                return []
            nxt = smaller[0]
        return [ConfigDelta(technique=self.name, summary=f"chunked prefill {nxt}",
                            set_server={"chunked_prefill_size": nxt}, roles=["unified", "prefill"])]


def _halvings(start: int) -> list[int]:
    sizes = []
    while start >= SMALLEST_CHUNK:
        sizes.append(start)
        start //= 2
    return sizes
