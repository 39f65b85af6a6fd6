"""Built-in runners (loaded through the `sglang_tuner` entry-point group): `simulated`, `local`, `attach`, `ray`,
and `hybrid` (measures with one of the real three, predicts the rest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plugins.runners.attach import AttachRunner
from plugins.runners.hybrid import HybridRunner
from plugins.runners.local import LocalRunner
from plugins.runners.ray import RayRunner
from plugins.runners.simulated import SimulatedRunner
from service import hookimpl


@hookimpl
def register_runners(register: Callable[[Any], None]) -> None:
    """Register the embedded simulator runner, the local launcher, the attach-to-endpoint runner, `ray`, and
    `hybrid` over those three."""
    measurers = {"local": LocalRunner(), "attach": AttachRunner(), "ray": RayRunner()}
    register(SimulatedRunner())
    for runner in measurers.values():
        register(runner)
    register(HybridRunner(measurers))
