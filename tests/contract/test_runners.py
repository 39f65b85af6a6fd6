"""The shipped runner contract, run against every built-in runner: `simulated`, `local` (launching the
SGLang-API emulator behind real processes), `attach` (measuring an emulator already serving) and `ray`
(the emulator placed on a real Ray cluster of this host)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plugins.runners.local import SubprocessLauncher
from plugins.runners.local.ports import free_block
from plugins.runners.local.processes import stop
from service import RoundContext, Runner
from service.testing import RunnerContract, make_host
from tests.api.service_process import wait_ready

HOST = make_host(builtins=True)
COST_MODELS = HOST.components("cost_model")
# Emulated time at twice the GPU's speed, ports remapped to free ones, deadlines sized for a 2-core machine.
FAST: dict[str, Any] = {"engine": "emulator", "time_scale": 0.5, "remap_ports": True,
                        "deadlines": {"start": 30.0, "health": 30.0, "warmup": 30.0, "load": 60.0, "stall": 2.0,
                                      "teardown": 3.0}}
SUITES = {"simulated", "local", "attach", "ray", "hybrid"}


def test_every_built_in_runner_runs_the_contract() -> None:
    assert set(HOST.components("runner")) == SUITES


class TestSimulatedRunner(RunnerContract):
    deterministic = True

    @pytest.fixture
    def runner(self) -> Runner:
        return HOST.get("runner", "simulated")


class TestHybridRunner(RunnerContract):
    """`hybrid` measuring with `local` on the emulator (and calibrating on each round it measured)."""

    @pytest.fixture
    def runner(self) -> Runner:
        return HOST.get("runner", "hybrid")

    @pytest.fixture
    def round_context(self) -> RoundContext:
        return RoundContext(cost_models=COST_MODELS, settings={**FAST, "hybrid_measure": "local"})


class TestLocalRunner(RunnerContract):
    @pytest.fixture
    def runner(self) -> Runner:
        return HOST.get("runner", "local")

    @pytest.fixture
    def round_context(self) -> RoundContext:
        return RoundContext(cost_models=COST_MODELS, settings=FAST)


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An emulated worker already serving on a free loopback port: what `attach` is pointed at."""
    port = free_block(1)
    argv = [sys.executable, "-m", "service.emulator", "--model-path", "Qwen/Qwen3.6-27B", "--host", "127.0.0.1",
            "--port", str(port), "--enable-metrics", "--enable-cache-report"]
    env = {**os.environ, "SGLANG_TUNER_EMULATOR_TIME_SCALE": "0.5"}
    log = Path(tmp_path_factory.mktemp("attach")) / "serving.log"
    process = SubprocessLauncher().spawn("serving", argv, env, log)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_ready(url, 60, poll=0.1, path="/health"):
            pytest.fail("the emulator never became healthy: " + process.log_text()[-2000:])
        yield url
    finally:
        stop(process, grace=3.0)


class TestAttachRunner(RunnerContract):
    @pytest.fixture
    def runner(self) -> Runner:
        return HOST.get("runner", "attach")

    @pytest.fixture
    def round_context(self, serving: str) -> RoundContext:
        return RoundContext(settings={**FAST, "attach_url": serving, "attach_allowlist": [re.escape(serving)]})

    @pytest.fixture
    def unrunnable_context(self, serving: str) -> RoundContext:
        # An endpoint the operator has not allowed is refused before a single request is sent.
        return RoundContext(settings={**FAST, "attach_url": serving})


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A real Ray cluster on this host: a head without GPUs and one node with two fake GPUs."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "include_dashboard": False})
    cluster.add_node(num_cpus=1, num_gpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, logging_level="ERROR")
    try:
        yield str(cluster.address)
    finally:
        ray.shutdown()
        cluster.shutdown()


class TestRayRunner(RunnerContract):
    @pytest.fixture
    def runner(self, ray_cluster: str) -> Runner:
        return HOST.get("runner", "ray")

    @pytest.fixture
    def round_context(self) -> RoundContext:
        return RoundContext(cost_models=COST_MODELS, settings={**FAST, "remap_ports": False})
