"""Wiring a job from a plugin host: which techniques, runner, policy and cost models it runs with.

The cost model is chosen here and only here, for `round`, `tune` and the service alike: the one asked
for by name, else the first plugin's `select_cost_model` answer, else the runner's own preference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from service.components import Playbook, RoundContext
from service.domain import Calibration, Scenario
from service.engine.events import EventCallback
from service.engine.journal import RoundJournal
from service.engine.loop import EngineParts, TuningEngine
from service.engine.outcome import TuningOutcome
from service.scenario_check import check_candidate, refusal_line

DEFAULT_RUNNER = "simulated"
DEFAULT_POLICY = "casebook"


def round_context(host: Any, scenario: Scenario, cost_model: str | None = None,
                  calibrations: Sequence[Calibration] = ()) -> RoundContext:
    """The registered cost models, the one this scenario's rounds use, and the stored calibrations fitted on
    its GPU and SGLang version (a simulation picks the one that fits it best, `calibration_for`)."""
    selected = cost_model or host.hook.select_cost_model(gpu=scenario.hardware.gpu, model=scenario.model)
    kept = [c for c in calibrations if (c.key.gpu, c.key.sglang_version)
            == (scenario.hardware.gpu, scenario.sglang_version)]
    return RoundContext(cost_models=host.components("cost_model"), cost_model=selected, calibrations=kept)


def parts_from_host(host: Any, playbook: Playbook, scenario: Scenario, *, runner: str | None = None,
                    policy: str | None = None, cost_model: str | None = None,
                    calibrations: Sequence[Calibration] = ()) -> EngineParts:
    """Look the components up by name; an unknown name raises a KeyError naming the nearest known one."""
    chosen_runner = host.get("runner", runner or playbook.runner or DEFAULT_RUNNER)
    chosen_policy = host.get("policy", policy or playbook.policy or DEFAULT_POLICY)
    techniques = host.components("technique")
    for name in playbook.techniques:
        host.get("technique", name)  # raises with the nearest valid name
    return EngineParts(techniques=techniques, runner=chosen_runner, policy=chosen_policy,
                       round_context=round_context(host, scenario, cost_model, calibrations), hook=host.hook,
                       refuse=candidate_refusal)


def candidate_refusal(candidate: Scenario) -> list[str]:
    """Why a proposed candidate could never launch (the doors' check: flags, topology, values); [] if it can."""
    issues = check_candidate(candidate)
    return [refusal_line(issues)] if issues else []


async def run_playbook(host: Any, playbook: Playbook, scenario: Scenario, *, runner: str | None = None,
                       policy: str | None = None, seed: int = 0, repeats: int | None = None,
                       callback: EventCallback | None = None, journal: RoundJournal | None = None,
                       job_id: str | None = None, parallel: int | None = None,
                       calibrations: Sequence[Calibration] = ()) -> TuningOutcome:
    """Run `playbook` on `scenario` with the host's components and return the outcome.

    `parallel` caps how many rounds run at once (default: as many as the runner holds; 1: one by one).
    """
    parts = parts_from_host(host, playbook, scenario, runner=runner, policy=policy, calibrations=calibrations)
    engine = TuningEngine(parts, playbook, scenario, seed=seed, repeats=repeats, callback=callback,
                          journal=journal, job_id=job_id, parallel=parallel)
    return await engine.run()
