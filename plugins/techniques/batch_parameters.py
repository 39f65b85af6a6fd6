"""Batch parameters: where on the SLO curve to sit; with no latency SLO, as big a batch as the KV pool holds."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.techniques._rules import graphs_for, has_latency_slo, main_server, server_has, tried_deltas
from service import (
    Applicability,
    ConfigDelta,
    FlagValue,
    ServerConfig,
    Technique,
    TuningContext,
    server_starts,
)

BIG_CHUNK = 32768  # case 3: latency is irrelevant, so prefills are not split
SMALLEST_BUNDLE_CHUNK = 8192  # a smaller chunk is SGLang's own default on most GPUs, not a "maximised" one
BUNDLE_MEM = 0.94  # case 3: "Expand KV pool. Safe to reduce headroom for a dedicated instance."
BUNDLE_CONSERVATIVENESS = 0.3  # case 3: "Make the scheduler more aggressive. Fill batches at the risk of preemption."
MEM_STEP = 0.02  # case 3 probes 0.94 -> 0.96 and rolls back on preemption
MEM_CEILING = 0.96
# Casebook "Server Metrics": token_usage 0.5-0.85 is the normal range. Below half, the KV pool can hold
# twice the running requests, so the running cap, not memory, is what limits the batch.
ROOMY_TOKEN_USAGE = 0.5
# The running cap binds when the server runs at least this share of it on average.
CAP_BINDS = 0.8
# The knobs the casebook's round 3 sets together (case 3: "Maximizing Batch Parameters").
BUNDLE = ("max_running_requests", "chunked_prefill_size", "max_prefill_tokens", "mem_fraction_static",
          "schedule_conservativeness")
# The bundle's knobs no later step changes (the 0.96 probe moves mem-fraction, the running-cap steps move
# max-running-requests): while these hold the bundle's values, the bundle (or each of them alone) was kept.
SETTLED = ("chunked_prefill_size", "max_prefill_tokens", "schedule_conservativeness")


class BatchParameters(Technique):
    """max-running-requests, max-prefill-tokens, mem-fraction-static, schedule-conservativeness, client load."""

    name: ClassVar[str] = "batch_parameters"
    rank: ClassVar[int] = 6
    # Successive steps, each judged against the last accepted one: 0.96 against 0.94, 1024 clients against 512.
    stepwise: ClassVar[bool] = True
    description: ClassVar[str] = ("Without a latency SLO, fill the batch (case 3: +33%), probe the KV limit "
                                  "(0.96 preempts and is rolled back) and match client concurrency to the server.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        if has_latency_slo(ctx.scenario.slo):
            return Applicability(False, "A latency SLO holds the batch where it is; larger batches trade latency "
                                        "for throughput (casebook 'Throughput up, latency up').")
        steps = self.propose(ctx)
        failed = _failed_bundle(ctx, main_server(ctx.scenario))
        if not steps:
            if failed is not None:
                return Applicability(False, "The batch bundle was rolled back and each of its knobs was tried "
                                            "alone; nothing is left to try.")
            return Applicability(False, "The batch is at the KV pool's limit and client load matches the server.")
        if failed is not None and _remaining_singles(ctx, failed):
            return Applicability(True, "The batch bundle was rolled back as a whole, so its knobs are tried one "
                                       "per round: one bad part (a preempting mem-fraction) can hide a good one.")
        return Applicability(True, "There is no latency SLO, so maximise the batch: only total completion time "
                                   "matters (casebook case 3 round 3).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        """The casebook's bundle first; if it was rolled back, its knobs one at a time; then the probes."""
        server = main_server(ctx.scenario)
        failed = _failed_bundle(ctx, server)
        if failed is not None:
            # A bundle that does not pay as a whole may still hold a part that does (a bigger chunk with a
            # preempting mem-fraction, say): each knob is a step judged against the last accepted one.
            singles = _remaining_singles(ctx, failed)
            if singles:
                return singles
        client = ctx.scenario.bench.max_concurrency or ctx.scenario.workload.peak_concurrency or 1
        target = max(512, 2 * client)
        bundled = any(set(BUNDLE) <= set(d.set_server) for d in tried_deltas(ctx, self.name))
        # Once the bundle ran (kept or not), the batch moves by the probes: a kept bundle whose clients were
        # raised past its running cap later is not maximised a second time.
        if not bundled and (server.max_running_requests is None or server.max_running_requests < client):
            graphs, note = graphs_for(target, ctx.scenario, server)
            chunk, why = _bundle_chunk(ctx, msgspec.structs.replace(server, **graphs), target)
            return [ConfigDelta(
                technique=self.name,
                summary=f"batch max: {target} running, chunk {chunk}, prefill {2 * chunk}, mem {BUNDLE_MEM}, "
                        f"conservativeness {BUNDLE_CONSERVATIVENESS}{note}{why}",
                set_server={"chunked_prefill_size": chunk, "max_running_requests": target,
                            "max_prefill_tokens": 2 * chunk, "mem_fraction_static": BUNDLE_MEM,
                            "schedule_conservativeness": BUNDLE_CONSERVATIVENESS, **graphs},
                client_concurrency=target)]
        return self._probes(ctx, server, client)

    def _probes(self, ctx: TuningContext, server: ServerConfig, client: int) -> list[ConfigDelta]:
        """Past the bundle: the 0.96 KV probe, then the running cap and client load (case 3 rounds 3-4)."""
        out: list[ConfigDelta] = []
        mem = server.mem_fraction_static or 0.0
        if BUNDLE_MEM <= mem < MEM_CEILING:
            new = round(min(MEM_CEILING, mem + MEM_STEP), 2)
            out.append(ConfigDelta(technique=self.name, summary=f"mem-fraction-static {new}",
                                   set_server={"mem_fraction_static": new}))
        running = server.max_running_requests
        if running is not None and client <= running:
            doubled = 2 * running
            if _pool_has_room(ctx, running):
                # The KV pool is under half used while the running cap is full: raise the cap and the client
                # together (casebook case 3 round 4: match --max-running-requests and client concurrency).
                graphs, note = graphs_for(doubled, ctx.scenario, server)
                out.append(ConfigDelta(
                    technique=self.name,
                    summary=f"max-running-requests {doubled} with client concurrency {doubled}{note}",
                    set_server={"max_running_requests": doubled, **graphs}, client_concurrency=doubled))
            out.append(ConfigDelta(technique=self.name, summary=f"client concurrency {doubled}",
                                   client_concurrency=doubled))
        tried = {(tuple(sorted(d.set_server.items())), d.client_concurrency) for d in tried_deltas(ctx, self.name)}
        return [d for d in out if (tuple(sorted(d.set_server.items())), d.client_concurrency) not in tried]


def _bundle_chunk(ctx: TuningContext, server: ServerConfig, running: int) -> tuple[int, str]:
    """The bundle's chunk: the casebook's 32768 where the whole bundle starts with it (mem-fraction-static 0.94,
    `running` requests, whose CUDA graphs and sampler share the non-static memory), else the largest halving
    (down to 8192) that does, with a note of why.

    The non-static share (6% of an 80 GB H100, 4.8 GB; 2.9 GB of a 48 GB L40S) must hold a chunk's forward
    pass and the CUDA graphs: a 32768-token pass of a 4B model with its graphs needs 3.5 GiB, so on a 48 GB
    GPU the casebook's bundle fails at start with CUDA out of memory and measures nothing.
    """
    chunk = BIG_CHUNK
    while True:
        trial = msgspec.structs.replace(server, chunked_prefill_size=chunk, max_prefill_tokens=2 * chunk,
                                        mem_fraction_static=BUNDLE_MEM, max_running_requests=running,
                                        schedule_conservativeness=BUNDLE_CONSERVATIVENESS)
        if not server_starts(ctx.model, ctx.scenario.hardware, trial):
            if chunk // 2 >= SMALLEST_BUNDLE_CHUNK:
                chunk //= 2
                continue
            return BIG_CHUNK, ""  # nothing smaller starts either: the runner names why
        if chunk == BIG_CHUNK:
            return chunk, ""
        gpu = ctx.scenario.hardware.spec
        return chunk, (f" ({BIG_CHUNK} would not start: its forward pass, with the CUDA graphs and sampler of {running} "
                       f"running requests, does not fit beside a {BUNDLE_MEM} static pool on a {gpu.hbm_gb:.0f} GB "
                       f"{ctx.scenario.hardware.gpu})")


def _failed_bundle(ctx: TuningContext, server: ServerConfig) -> ConfigDelta | None:
    """The bundle this job ran and rolled back, or None.

    Rolled back: the knobs no later step changes do not all hold the bundle's values. Once kept, the 0.96
    probe and the running-cap steps may move its other knobs without making it a failed bundle.
    """
    for delta in tried_deltas(ctx, BatchParameters.name):
        settled = {knob: delta.set_server.get(knob) for knob in SETTLED}
        if set(BUNDLE) <= set(delta.set_server) and not server_has(server, settled):
            return delta
    return None


def _remaining_singles(ctx: TuningContext, bundle: ConfigDelta) -> list[ConfigDelta]:
    """The failed bundle's single-knob steps not yet run in this job."""
    tried = [d.set_server for d in tried_deltas(ctx, BatchParameters.name)]
    return [d for d in _single_steps(BatchParameters.name, bundle, main_server(ctx.scenario))
            if d.set_server not in tried]


def _single_steps(technique: str, bundle: ConfigDelta, server: ServerConfig) -> list[ConfigDelta]:
    """The bundle's knobs one per step, those not yet in effect, the running cap (with the client load that
    fills it: case 3 round 4) first."""
    steps = []
    for knob in BUNDLE:
        value = bundle.set_server[knob]
        if server_has(server, {knob: value}):
            continue
        changes: dict[str, FlagValue | None] = {knob: value}
        flag = knob.replace("_", "-")
        if knob == "max_running_requests":
            graphs = bundle.set_server.get("cuda_graph_max_bs")  # raised with the running cap (graphs_for)
            if graphs is not None:
                changes["cuda_graph_max_bs"] = graphs
            note = f", cuda-graph-max-bs {graphs}" if graphs is not None else ""
            steps.append(ConfigDelta(technique=technique,
                                     summary=f"{flag} {value} with client concurrency {value}{note}",
                                     set_server=changes, client_concurrency=bundle.client_concurrency))
        else:
            steps.append(ConfigDelta(technique=technique, summary=f"{flag} {value} alone", set_server=changes))
    return steps


def _pool_has_room(ctx: TuningContext, running_cap: int) -> bool:
    """Whether the last accepted round ran near its running cap with the KV pool under half used."""
    measured = ctx.baseline
    if measured is None or running_cap <= 0:
        return False
    server = measured.server
    return 0 < server.token_usage < ROOMY_TOKEN_USAGE and server.num_running_reqs >= CAP_BINDS * running_cap
