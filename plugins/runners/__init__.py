"""Built-in runners (loaded through the `sglang_tuner` entry-point group): `simulated`, `local`, `attach`, `ray`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plugins.runners.attach import AttachRunner
from plugins.runners.local import LocalRunner
from plugins.runners.ray import RayRunner
from plugins.runners.simulated import SimulatedRunner
from service import hookimpl


@hookimpl
def register_runners(register: Callable[[Any], None]) -> None:
    """Register the embedded simulator runner, the local launcher, the attach-to-endpoint runner and `ray`."""
    register(SimulatedRunner())
    register(LocalRunner())
    register(AttachRunner())
    register(RayRunner())
