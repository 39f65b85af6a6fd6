"""Capture CUDA graphs for every decode batch size the traffic reaches.

SGLang replays captured CUDA graphs only for decode batches up to the captured maximum; larger batches
run eagerly and each step pays kernel-launch overhead. SGLang 0.5.23 picks the maximum from GPU memory
and TP size (`srt/server_args.py`, memory hook: 256 below TP4 on 80-160 GB GPUs, else 512), capped by
`--max-running-requests`. When a worker's share of the peak concurrency exceeds that, raise it.
"""

from __future__ import annotations

import msgspec
from service import Applicability, ConfigDelta, Technique, TuningContext


class CudaGraphOptions(msgspec.Struct, frozen=True):
    """Options: how much headroom above the per-worker peak to capture."""

    headroom: float = 1.25


def default_decode_graph_max_bs(hbm_gb: float, tp_size: int) -> int:
    """SGLang 0.5.23's default decode CUDA-graph max batch size for a GPU memory and TP size."""
    if hbm_gb < 20:
        return 8
    if hbm_gb < 35:
        return 48 if tp_size < 4 else 160
    if hbm_gb < 60:
        return 32 if tp_size < 4 else 160
    if hbm_gb < 160:
        return 256 if tp_size < 4 else 512
    return 512


class CudaGraphBatchTechnique(Technique):
    """Raise `cuda_graph_max_bs` to cover each worker's peak decode batch."""

    name = "cuda_graph_batch"
    rank = 6  # a batch parameter in the casebook's tuning order
    description = "Capture CUDA graphs up to the per-worker peak decode batch."
    options = CudaGraphOptions()

    def _peak_per_worker(self, ctx: TuningContext) -> int | None:
        peak = ctx.scenario.workload.peak_concurrency or ctx.scenario.bench.max_concurrency
        if not peak:
            return None
        replicas = sum(group.replicas for group in ctx.scenario.deployment.groups)
        return -(-peak // max(replicas, 1))

    def _captured(self, ctx: TuningContext) -> int:
        server = ctx.scenario.deployment.groups[0].server
        if server.cuda_graph_max_bs is not None:
            return server.cuda_graph_max_bs
        default = default_decode_graph_max_bs(ctx.scenario.hardware.spec.hbm_gb, server.tp_size)
        if server.max_running_requests is not None:
            return min(default, server.max_running_requests)
        return default

    def applicable(self, ctx: TuningContext) -> Applicability:
        peak = self._peak_per_worker(ctx)
        if peak is None:
            return Applicability(False, "The workload states no peak concurrency, so the decode batch is unknown.")
        captured = self._captured(ctx)
        if peak <= captured:
            return Applicability(False, f"Each worker peaks at {peak} requests, within the {captured} captured.")
        return Applicability(True, f"Each worker peaks at {peak} requests, above the {captured} captured.")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        peak = self._peak_per_worker(ctx) or 0
        target = int(peak * self.options.headroom + 7) // 8 * 8
        return [ConfigDelta(
            technique=self.name,
            summary=f"capture decode CUDA graphs up to batch {target}",
            set_server={"cuda-graph-max-bs": target},
        )]
