"""The `local` runner: launches the deployment's workers and router on this host and benchmarks them."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.runners.local.failures import RoundFailure
from plugins.runners.local.launch import engine_of
from plugins.runners.local.ports import PortMap
from plugins.runners.local.processes import Launcher, SubprocessLauncher
from plugins.runners.local.registry import end_orphans, state_dir
from plugins.runners.local.results import failed, provenance
from plugins.runners.local.round import LocalRound
from service import (
    RoundContext,
    RoundResult,
    Runner,
    RunnerCapabilities,
    RunnerSettings,
    Scenario,
    load_runner_settings,
)


class LocalRunner(Runner):
    """Starts SGLang (or the emulator) from the rendered argv, measures like bench_serving, stops everything.

    `launches` records, per round, the exact argv of every process started, in launch order.
    """

    name: ClassVar[str] = "local"
    capabilities: ClassVar[RunnerCapabilities] = RunnerCapabilities(
        restarts_servers=True, measures_real_gpus=True, needs_gpu=True)

    def __init__(self, launcher: Launcher | None = None) -> None:
        self.launcher: Launcher = launcher or SubprocessLauncher()
        self.ports = PortMap()
        self.launches: list[list[list[str]]] = []

    async def run_round(self, scenario: Scenario, *, seed: int | None = None,
                        context: RoundContext | None = None) -> RoundResult:
        """One round: validate, start, health, warm-up, load, teardown; failures name their cause and phase."""
        context = context or RoundContext()
        try:
            settings = load_runner_settings(context.settings)
        except (msgspec.ValidationError, OSError, ValueError) as exc:
            origin = provenance(scenario, emulated=False, cost_model=None, time_scale=1.0)
            return failed(RoundFailure("validation", "validate", f"runner settings: {exc}"), origin, [])
        if settings.remap_ports:
            scenario = self.ports.remap(scenario)
        round_ = LocalRound(scenario, settings, self.launcher, seed=seed, cost_model=context.cost_model)
        try:
            return await round_.run()
        finally:
            self.launches.append(round_.launched)

    @staticmethod
    def end_orphans(settings: dict[str, object] | None = None) -> list[str]:
        """End what rounds of dead owners left running (every round also does this before it launches).

        `settings` is a round context's settings mapping; returns one note per round whose leftovers were
        ended, for whoever resumes the job to show.
        """
        return end_orphans(state_dir(load_runner_settings(settings)))

    @staticmethod
    def engine(settings: RunnerSettings) -> str:
        """Which server the settings launch: `sglang` or `emulator`."""
        return engine_of(settings)
