"""Built-in decision policies (loaded through the `sglang_tuner` entry-point group).

`casebook` (the default) judges a round by the casebook's metric-change pattern table behind an SLO gate,
with noise measured from the rounds themselves; `slo_only` keeps the gate and looks only at the objective.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policies.casebook import CasebookPolicy, SLOOnlyPolicy
from policies.settings import PolicySettings
from policies.slo_gate import averaged, completion_hours, slo_checks
from service import hookimpl

DEFAULT_POLICY = CasebookPolicy.name


@hookimpl
def register_policies(register: Callable[[Any], None]) -> None:
    """Register the built-in policies with their default settings."""
    register(CasebookPolicy())
    register(SLOOnlyPolicy())


__all__ = [
    "DEFAULT_POLICY", "CasebookPolicy", "PolicySettings", "SLOOnlyPolicy", "averaged", "completion_hours",
    "register_policies", "slo_checks",
]
