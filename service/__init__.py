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
from service.domain.model import shipped_models
from service.hookspecs import hookimpl
from service.playbooks import load_playbook, load_playbook_dir
from service.simulator import simulate_round

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
    "simulate_round",
    "shipped_models",
    "load_playbook",
    "load_playbook_dir",
    *_domain_all,
]
