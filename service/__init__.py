"""sglang-tuner's public facade: what plugins and policies may import.

Plugins import from `service` only (never `service.<private module>`), so the internals can move freely.
"""

from service.components import (
    Applicability,
    CostModel,
    Playbook,
    Policy,
    RoundContext,
    Runner,
    RunnerCapabilities,
    StepCostModel,
    Technique,
    TuningContext,
)
from service.domain import *  # noqa: F403
from service.domain import __all__ as _domain_all
from service.hookspecs import hookimpl

__all__ = [
    "Applicability",
    "CostModel",
    "Playbook",
    "Policy",
    "RoundContext",
    "Runner",
    "RunnerCapabilities",
    "StepCostModel",
    "Technique",
    "TuningContext",
    "hookimpl",
    *_domain_all,
]
