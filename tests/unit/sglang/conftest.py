"""Shared scenarios for the SGLang flag tests."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from service.domain import Deployment, Hardware, RouterConfig, Scenario, ServerConfig, WorkerGroup
from service.scenario import load_scenario

ROOT = Path(__file__).parents[3]
CODING_FINAL = ROOT / "examples" / "casebook" / "coding-assistant-final.toml"
DUMPS = Path(__file__).parent / "dumps"


@pytest.fixture
def coding_final() -> Scenario:
    """Casebook case 1's final configuration: four TP2 workers behind a cache_aware router on 8xH200."""
    return load_scenario(CODING_FINAL)


def with_server(scenario: Scenario, **changes: object) -> Scenario:
    """The scenario with its first group's server settings changed."""
    group = scenario.deployment.groups[0]
    server = msgspec.structs.replace(group.server, **changes)
    groups = [msgspec.structs.replace(group, server=server), *scenario.deployment.groups[1:]]
    return msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(scenario.deployment, groups=groups))


def with_extra(scenario: Scenario, **flags: object) -> Scenario:
    """The scenario with extra launch flags (keys given without dashes, as Python names)."""
    group = scenario.deployment.groups[0]
    extra = {**group.server.extra, **{f"--{key.replace('_', '-')}": value for key, value in flags.items()}}
    return with_server(scenario, extra=extra)


def single(server: ServerConfig | None = None, *, replicas: int = 1, router: RouterConfig | None = None,
           gpus: int = 8, nodes: int = 1) -> tuple[Deployment, Hardware]:
    """A one-group deployment on `nodes` x `gpus` H200s."""
    group = WorkerGroup(name="worker", replicas=replicas, base_port=30001, server=server or ServerConfig())
    return Deployment(groups=[group], router=router), Hardware(gpu="H200-SXM", gpus_per_node=gpus, nodes=nodes)
