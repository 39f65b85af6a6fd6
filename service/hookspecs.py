"""Hook specifications of the `sglang_tuner` pluggy project.

Three kinds of hook (see docs/plugins.md):

- `register_<kind>(register)`: call `register(component)` for each component the plugin provides. The
  host decides what registering means, rejects duplicate names and records which plugin each came from.
  Results are ignored.
- `select_<x>(...)`: first non-None result wins; built-in defaults are low-priority implementations.
- `on_<event>(...)`: notifications; results are ignored. Must be cheap and never raise.

Specs only ever gain arguments; none is renamed or removed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

PROJECT_NAME = "sglang_tuner"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# ---------------------------------------------------------------------------------------------------
# Registration: called once when a plugin host is built. Results are ignored.
# ---------------------------------------------------------------------------------------------------


@hookspec
def register_techniques(register: Callable[[Any], None]) -> None:
    """Register `service.components.Technique` instances by calling `register(technique)`."""


@hookspec
def register_runners(register: Callable[[Any], None]) -> None:
    """Register `service.components.Runner` instances by calling `register(runner)`."""


@hookspec
def register_policies(register: Callable[[Any], None]) -> None:
    """Register `service.components.Policy` instances by calling `register(policy)`."""


@hookspec
def register_cost_models(register: Callable[[Any], None]) -> None:
    """Register `service.components.CostModel` instances by calling `register(cost_model)`."""


@hookspec
def register_playbooks(register: Callable[[Any], None]) -> None:
    """Register `service.components.Playbook` values by calling `register(playbook)`."""


# ---------------------------------------------------------------------------------------------------
# Selection: first non-None result wins.
# ---------------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def select_cost_model(gpu: str, model: str) -> str | None:
    """Name of the cost model to use for `model` on `gpu`, or None to defer. First non-None wins."""


# ---------------------------------------------------------------------------------------------------
# Events: notifications during a tuning job. Results are ignored.
# ---------------------------------------------------------------------------------------------------


@hookspec
def on_round_started(job_id: str, round_index: int, technique: str) -> None:
    """A round of job `job_id` started. Results are ignored."""


@hookspec
def on_round_finished(job_id: str, round_index: int, technique: str, verdict: str) -> None:
    """A round of job `job_id` finished with `verdict`. Results are ignored."""


@hookspec
def on_job_finished(job_id: str, state: str) -> None:
    """Job `job_id` ended as `state` (succeeded, slo_not_met, failed, cancelled, or paused to be resumed).

    Called once per ending, by the engine that decided it. Results are ignored."""
