"""The `ray` runner: each round's deployment in a placement group of its own on a Ray cluster.

See docs/runners.md ("The `ray` runner") for how a round is placed, what it records and how to start it
against an existing cluster, on KubeRay, or on a throwaway local cluster for the emulator.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.runners.local.failures import RoundFailure
from plugins.runners.local.results import failed, provenance
from plugins.runners.ray.cluster import bundles, connect, copies, gpu_nodes
from plugins.runners.ray.ports import PortBook
from service import (
    RoundContext,
    RoundResult,
    Runner,
    RunnerCapabilities,
    Scenario,
    load_runner_settings,
)


class RayRunner(Runner):
    """Places every worker and the router as Ray actors, measures from beside the router, removes it all.

    `launches` records, per round, the exact argv of every process started, in launch order.
    """

    name: ClassVar[str] = "ray"
    capabilities: ClassVar[RunnerCapabilities] = RunnerCapabilities(
        restarts_servers=True, measures_real_gpus=True, needs_gpu=True)

    def __init__(self) -> None:
        self.ports = PortBook()
        self.launches: list[list[list[str]]] = []

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        """One round on the cluster; safe to call concurrently from one event loop (ports are held per round)."""
        from plugins.runners.ray.round import RayRound

        context = context or RoundContext()
        origin = provenance(scenario, emulated=False, cost_model=None, time_scale=1.0, runner=self.name)
        try:
            settings = load_runner_settings(context.settings)
        except (msgspec.ValidationError, OSError, ValueError) as exc:
            return failed(RoundFailure("validation", "validate", f"runner settings: {exc}"), origin, [])
        try:
            connect(settings, scenario)
            round_ = RayRound(scenario, settings, self.ports, seed=seed, cost_model=context.cost_model)
        except RoundFailure as failure:
            return failed(failure, origin, [])
        try:
            return await round_.run()
        finally:
            self.launches.append(round_.launched)

    async def parallel_rounds(self, scenario: Scenario, context: RoundContext | None = None) -> int:
        """How many copies of this scenario's placement group the cluster's total GPUs hold at once (>= 1)."""
        context = context or RoundContext()
        try:
            connect(load_runner_settings(context.settings), scenario)
            sizes, _ = bundles(scenario)
            return max(1, copies(sizes, gpu_nodes()))
        except (RoundFailure, msgspec.ValidationError, OSError, ValueError):
            return 1
