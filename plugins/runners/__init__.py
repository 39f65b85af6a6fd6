"""Built-in runners (loaded through the `sglang_tuner` entry-point group): `simulated`, `local`, `attach`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plugins.runners.attach import AttachRunner
from plugins.runners.local import LocalRunner
from plugins.runners.simulated import SimulatedRunner
from service import hookimpl


@hookimpl
def register_runners(register: Callable[[Any], None]) -> None:
    """Register the embedded simulator runner, the local launcher and the attach-to-endpoint runner."""
    register(SimulatedRunner())
    register(LocalRunner())
    register(AttachRunner())
