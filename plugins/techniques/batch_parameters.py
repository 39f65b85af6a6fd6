"""Batch parameters: where on the SLO curve to sit; with no latency SLO, as big a batch as the KV pool holds."""

from __future__ import annotations

from typing import ClassVar

from plugins.techniques._rules import has_latency_slo, main_server
from service import Applicability, ConfigDelta, Technique, TuningContext

BIG_CHUNK = 32768  # case 3: latency is irrelevant, so prefills are not split
MEM_STEP = 0.02  # case 3 probes 0.94 -> 0.96 and rolls back on preemption
MEM_CEILING = 0.96
# Casebook "Server Metrics": token_usage 0.5-0.85 is the normal range. Below half, the KV pool can hold
# twice the running requests, so the running cap, not memory, is what limits the batch.
ROOMY_TOKEN_USAGE = 0.5
# The running cap binds when the server runs at least this share of it on average.
CAP_BINDS = 0.8


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
        if not self.propose(ctx):
            return Applicability(False, "The batch is at the KV pool's limit and client load matches the server.")
        return Applicability(True, "There is no latency SLO, so maximise the batch: only total completion time "
                                   "matters (casebook case 3 round 3).")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        server = main_server(ctx.scenario)
        client = ctx.scenario.bench.max_concurrency or ctx.scenario.workload.peak_concurrency or 1
        target = max(512, 2 * client)
        out: list[ConfigDelta] = []
        if server.max_running_requests is None or server.max_running_requests < client:
            out.append(ConfigDelta(
                technique=self.name,
                summary=f"batch max: {target} running, chunk {BIG_CHUNK}, prefill {2 * BIG_CHUNK}, mem 0.94, "
                        "conservativeness 0.3",
                set_server={"chunked_prefill_size": BIG_CHUNK, "max_running_requests": target,
                            "max_prefill_tokens": 2 * BIG_CHUNK, "mem_fraction_static": 0.94,
                            "schedule_conservativeness": 0.3},
                client_concurrency=target))
            return out
        mem = server.mem_fraction_static or 0.0
        if 0.94 <= mem < MEM_CEILING:
            new = round(min(MEM_CEILING, mem + MEM_STEP), 2)
            out.append(ConfigDelta(technique=self.name, summary=f"mem-fraction-static {new}",
                                   set_server={"mem_fraction_static": new}))
        running = server.max_running_requests
        if client <= running:
            doubled = 2 * running
            if _pool_has_room(ctx, running):
                # The KV pool is under half used while the running cap is full: raise the cap and the client
                # together (casebook case 3 round 4: match --max-running-requests and client concurrency).
                out.append(ConfigDelta(
                    technique=self.name, summary=f"max-running-requests {doubled} with client concurrency {doubled}",
                    set_server={"max_running_requests": doubled}, client_concurrency=doubled))
            out.append(ConfigDelta(technique=self.name, summary=f"client concurrency {doubled}",
                                   client_concurrency=doubled))
        return out


def _pool_has_room(ctx: TuningContext, running_cap: int) -> bool:
    """Whether the last accepted round ran near its running cap with the KV pool under half used."""
    measured = ctx.baseline
    if measured is None or running_cap <= 0:
        return False
    server = measured.server
    return 0 < server.token_usage < ROOMY_TOKEN_USAGE and server.num_running_reqs >= CAP_BINDS * running_cap
