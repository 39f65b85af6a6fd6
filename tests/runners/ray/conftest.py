"""A real four-node Ray cluster on this host (fake GPUs, `num_gpus=`), shared by the module's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from service.domain import BenchSpec, Scenario, WorkerGroup
from service.scenario import load_scenario

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
PD = ROOT / "examples" / "ray" / "two-nodes-pd.toml"
FAST = {"engine": "emulator", "time_scale": 0.25,
        "deadlines": {"start": 60.0, "health": 60.0, "warmup": 60.0, "load": 120.0, "stall": 10.0, "teardown": 3.0,
                      "placement": 60.0}}


@pytest.fixture(scope="package")
def cluster() -> Iterator[Cluster]:
    """A head without GPUs and four nodes of one fake GPU each; the driver joins it."""
    if ray.is_initialized():
        ray.shutdown()
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False})
    for _ in range(4):
        made.add_node(num_cpus=1, num_gpus=1)
    made.wait_for_nodes()
    ray.init(address=made.address, log_to_driver=False, logging_level="ERROR")
    try:
        yield made
    finally:
        ray.shutdown()
        made.shutdown()


def settings(log_dir: Path, **overrides: Any) -> dict[str, Any]:
    """Runner settings for a test round: the emulator, a fast clock, logs under `log_dir`."""
    return {**FAST, "log_dir": str(log_dir), **overrides}


def pd(num_prompts: int = 16) -> Scenario:
    """The two-node PD example with a small bench."""
    scenario = load_scenario(PD)
    return msgspec.structs.replace(scenario, bench=msgspec.structs.replace(scenario.bench, num_prompts=num_prompts))


def single_instance_two_nodes() -> Scenario:
    """One TP2 server over two one-GPU nodes (`--nnodes 2`), no router."""
    scenario = load_scenario(PD)
    group = WorkerGroup(name="wide", replicas=1, base_port=33000,
                        server=msgspec.structs.replace(scenario.deployment.groups[1].server, tp_size=2))
    deployment = msgspec.structs.replace(scenario.deployment, groups=[group], router=None)
    return msgspec.structs.replace(scenario, deployment=deployment, bench=BenchSpec(
        dataset="workload", num_prompts=12, max_concurrency=4, warmup_requests=1))


def one_gpu(seed: int) -> Scenario:
    """One TP1 server on one node, no router: a candidate small enough for four at once."""
    scenario = load_scenario(PD)
    group = WorkerGroup(name="solo", replicas=1, base_port=34000, server=scenario.deployment.groups[1].server)
    hardware = msgspec.structs.replace(scenario.hardware, nodes=1)
    deployment = msgspec.structs.replace(scenario.deployment, groups=[group], router=None)
    return msgspec.structs.replace(scenario, hardware=hardware, deployment=deployment, bench=BenchSpec(
        dataset="workload", num_prompts=12, max_concurrency=4, warmup_requests=1, seed=seed))


def processes_logging_to(folder: Path) -> list[int]:
    """Live processes whose stdout is a log file under `folder` (every process a round under it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            target = os.readlink(entry / "fd" / "1")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if target.startswith(str(folder)) and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def live_groups() -> list[dict[str, Any]]:
    """Placement groups of the runner that are not removed."""
    from ray.util.placement_group import placement_group_table

    return [pg for pg in placement_group_table().values()
            if str(pg.get("name", "")).startswith("sglang-tuner-") and pg.get("state") != "REMOVED"]
