"""The door check of the CLI: a scenario with any error is refused before a round, on one line, with exit status 2."""

from __future__ import annotations

import os
from pathlib import Path

import click

from service.domain import Scenario
from service.scenario_check import ScenarioRefused, require_valid_scenario

REFUSED_EXIT_CODE = 2  # as argparse and SGLang exit on a bad argument


class ScenarioRefusedError(click.ClickException):
    """`Error: FILE: FIELD: what is wrong; fix: ...` on stderr, exit status 2, no traceback."""

    exit_code = REFUSED_EXIT_CODE


def refuse_invalid(scenario: Scenario, source: str | Path | None = None) -> None:
    """Return when `scenario` may run; otherwise raise `ScenarioRefusedError` naming the first error's field.

    Dangerous flags count as allowed only when the operator's runner settings allow them, as at launch.
    """
    try:
        require_valid_scenario(scenario)
    except ScenarioRefused as exc:
        where = f"{source}: " if source else ""
        raise ScenarioRefusedError(f"{where}{exc}") from None


RAY_ADDRESS_ENV = "SGLANG_TUNER_RUNNER_RAY_ADDRESS"


def use_ray_address(address: str | None) -> None:
    """`--ray-address`: the runner setting `ray_address` for every round of this command (its environment
    form, which the runner settings read as any other layer)."""
    if address:
        os.environ[RAY_ADDRESS_ENV] = address
