"""Built-in runners (loaded through the `sglang_tuner` entry-point group): `simulated`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plugins.runners.simulated import SimulatedRunner
from service import hookimpl


@hookimpl
def register_runners(register: Callable[[Any], None]) -> None:
    """Register the embedded simulator runner."""
    register(SimulatedRunner())
