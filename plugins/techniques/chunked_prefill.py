"""Chunked prefill: split long prefills so short requests and running decodes are not stuck behind them."""

from __future__ import annotations

from typing import ClassVar

from plugins.techniques._rules import has_latency_slo, main_server
from service import (
    Applicability,
    ConfigDelta,
    FlagValue,
    Scenario,
    ServerConfig,
    Technique,
    TuningContext,
    default_chunked_prefill,
    keeps_mixed_chunk,
)

# Casebook case 1 tries 4096, then 2048, and stops: nothing smaller is proposed unless a playbook lists it.
SMALLEST_CHUNK = 2048
# Speculative algorithms under which SGLang from 0.5.19 keeps --enable-mixed-chunk on (NEXTN aliases EAGLE).
MIXING_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN")


def start_size(ctx: TuningContext) -> int:
    """4096 when long prompts dominate the tail (input p95 >= 3x the median), else 8192.

    Casebook case 1 (p95 28,000 vs median 2,100) settles at 4096; cases 2 and 4 keep 8192.
    """
    dist = ctx.scenario.workload.input
    if dist.p95 is not None and dist.p95 >= 3 * dist.median:
        return 4096
    return 8192


def prefilling(scenario: Scenario) -> ServerConfig:
    """The server whose prefills the chunk splits: a unified one, else a PD deployment's prefill server."""
    groups = scenario.deployment.groups
    return next((g.server for role in ("unified", "prefill") for g in groups if g.role == role),
                main_server(scenario))


class ChunkedPrefill(Technique):
    """Sweep `--chunked-prefill-size` down from the start size while each halving is kept."""

    name: ClassVar[str] = "chunked_prefill"
    rank: ClassVar[int] = 3
    description: ClassVar[str] = ("Stabilises p99 TTFT and max ITL by splitting long prefills; the sweep halves "
                                  "the chunk until a smaller one is rolled back (casebook case 1: 4096, not 2048).")

    def applicable(self, ctx: TuningContext) -> Applicability:
        current = prefilling(ctx.scenario).chunked_prefill_size
        if current is not None and 0 < current < SMALLEST_CHUNK:
            return Applicability(True, f"A {current}-token chunk cuts every prefill into many small forward passes, "
                                       "each paying a step's fixed cost; the sweep's sizes are measured instead.")
        if not has_latency_slo(ctx.scenario.slo):
            return Applicability(False, "Without a latency SLO there is no reason to split prefills; larger chunks "
                                        "use the GPU better (casebook case 3).")
        if current is not None and 0 < current <= SMALLEST_CHUNK:
            return Applicability(False, f"The chunk is already {current} tokens, the smallest the sweep tries.")
        return Applicability(True, "Chunked prefill should always be enabled with a latency SLO: it trades a few % "
                                   "of throughput for a large cut in tail latency (casebook case 1).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        """The first size, alone and with mixed chunk as alternatives (with a unified server to mix decodes
        into); then the next smaller size, alone.

        Where the flag is unset and SGLang's default for the GPU's memory (`memory_hook.py`: 8192 on an 80-141
        GB GPU, 4096 on a 48 GB one) is already the first size or smaller, setting the first size would change
        nothing or lengthen the chunk: mixed chunk at the default and the next smaller size are the
        alternatives instead.
        """
        sizes = [int(s) for s in ctx.options.get("sizes", [])] or _halvings(start_size(ctx))
        server = prefilling(ctx.scenario)
        current = server.chunked_prefill_size
        if current is not None and 0 < current < SMALLEST_CHUNK:
            return _raised(self.name, ctx)
        # Mixed chunk puts running decodes in a chunk's forward pass: a PD prefill server runs none.
        unified = any(g.role == "unified" for g in ctx.scenario.deployment.groups)
        mixable = unified and not server.enable_mixed_chunk and (
            server.speculative_algorithm is None or (server.speculative_algorithm.upper() in MIXING_ALGORITHMS
                                                     and keeps_mixed_chunk(ctx.scenario.sglang_version)))
        default = default_chunked_prefill(ctx.scenario.hardware.spec.hbm_gb)[0]
        if current is None and default <= sizes[0]:
            smaller = [s for s in sizes if s < default]
            at_default = [_chunk(self.name, default, mixed=True)] if mixable else []
            return at_default + [_chunk(self.name, s, mixed=False) for s in smaller[:1]]
        smaller = [s for s in sizes if s < (current or sizes[0])]
        if current is None or current <= 0 or current > sizes[0]:
            first = _chunk(self.name, sizes[0], mixed=False)
            return [first, _chunk(self.name, sizes[0], mixed=True)] if mixable else [first]
        # A later, smaller step is judged against the accepted previous one: diminishing returns roll it back.
        return [_chunk(self.name, smaller[0], mixed=False)] if smaller else []


def _raised(technique: str, ctx: TuningContext) -> list[ConfigDelta]:
    """A chunk below the sweep's smallest, raised: with a latency SLO to the sweep's first and smallest sizes
    (measured as alternatives), without one to SGLang's own default (casebook case 3: larger chunks use the
    GPU better). A 9B on an H100 started at 256 serves 3,269 tok/s at p95 TTFT 1,252 ms; at 8192, 3,868 and
    756 ms (simulated)."""
    if not has_latency_slo(ctx.scenario.slo):
        default = default_chunked_prefill(ctx.scenario.hardware.spec.hbm_gb)[0]
        return [ConfigDelta(technique=technique, summary=f"chunked prefill back to SGLang's default ({default})",
                            set_server={"chunked_prefill_size": None}, roles=["unified", "prefill"])]
    sizes = sorted({start_size(ctx), SMALLEST_CHUNK}, reverse=True)
    return [_chunk(technique, size, mixed=False) for size in sizes]


def _chunk(technique: str, size: int, *, mixed: bool) -> ConfigDelta:
    """`--chunked-prefill-size`, with `--enable-mixed-chunk` when `mixed`.

    SGLang 0.5.23 (`srt/managers/scheduler.py` get_next_batch_to_run) runs a step as a prefill or a decode:
    without mixed chunk, running decodes wait through every chunk of a long prompt, so chunking alone does
    not remove max-ITL stalls. Mixed chunk carries the decode batch in the same forward pass as the chunk.
    SGLang up to 0.5.18 turns mixed chunk off under speculative decoding, so it is not proposed then; from
    0.5.19 it stays on under EAGLE, EAGLE3 and NEXTN, a mixed step decoding the running requests one token
    each (`service/simulator/speculative.py`).
    """
    changes: dict[str, FlagValue | None] = {"chunked_prefill_size": size}
    summary = f"chunked prefill {size}"
    if mixed:
        changes["enable_mixed_chunk"] = True
        summary += " + mixed chunk"
    return ConfigDelta(technique=technique, summary=summary, set_server=changes, roles=["unified", "prefill"])


def _halvings(start: int) -> list[int]:
    sizes = []
    while start >= SMALLEST_CHUNK:
        sizes.append(start)
        start //= 2
    return sizes
