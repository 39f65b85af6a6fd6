"""The `ray` runner when things go wrong on a real cluster: a node lost mid-round, a round cancelled."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from plugins.runners.ray import RayRunner
from service import RoundContext
from service.domain import RoundResult

from .conftest import live_groups, pd, processes_logging_to, ray, settings


async def _loading(folder: Path, timeout: float = 90.0) -> None:
    """Until the round's decode server logs batches of the load (workers and router are up, load running)."""
    end = time.monotonic() + timeout
    log = folder / "decode-0.log"
    while not (log.exists() and log.read_text().count("Decode batch") >= 2):
        assert time.monotonic() < end, "the round's load never started"
        await asyncio.sleep(0.2)


def _node_of_bundle(bundle: int) -> str:
    groups = live_groups()
    assert len(groups) == 1
    return str(groups[0]["bundles_to_node_id"][bundle])


def test_a_node_lost_mid_round_fails_it_and_the_next_round_runs_on_the_rest(cluster: Any, tmp_path: Path) -> None:
    runner = RayRunner()
    lost = tmp_path / "lost"
    context = RoundContext(settings=settings(lost))

    async def kill_decode_node() -> RoundResult:
        task = asyncio.create_task(runner.run_round(pd(num_prompts=400), context=context))
        await _loading(lost)
        decode_node = _node_of_bundle(1)
        victim = next(node for node in cluster.list_all_nodes() if node.node_id == decode_node)
        await asyncio.to_thread(cluster.remove_node, victim)
        return await task

    try:
        failed = asyncio.run(kill_decode_node())
        assert failed.status == "failed" and failed.error_phase == "load", failed.error
        assert failed.error is not None and failed.error.startswith("worker_died: ")
        assert "decode-0" in failed.error or "load task" in failed.error
        assert processes_logging_to(lost) == [] and live_groups() == []
        again = asyncio.run(runner.run_round(pd(), context=RoundContext(settings=settings(tmp_path / "again"))))
        assert again.status == "ok", again.error
        alive = {node["NodeID"] for node in ray.nodes() if node["Alive"]}
        assert {p.node_id for p in again.provenance.placement} <= alive
        assert decode_node_gone(failed, alive)
    finally:
        cluster.add_node(num_cpus=1, num_gpus=1)  # the package's cluster keeps four GPU nodes
        cluster.wait_for_nodes()


def decode_node_gone(failed: RoundResult, alive: set[str]) -> bool:
    """The failed round's decode worker ran on the node that was removed."""
    return next(p.node_id for p in failed.provenance.placement if p.worker == "decode-0") not in alive


def test_a_cancelled_round_leaves_no_process_and_no_placement_group(cluster: Any, tmp_path: Path) -> None:
    runner = RayRunner()

    async def cancel_mid_round() -> bool:
        task = asyncio.create_task(runner.run_round(pd(num_prompts=400), context=RoundContext(
            settings=settings(tmp_path))))
        await _loading(tmp_path)
        assert len(processes_logging_to(tmp_path)) >= 3 and len(live_groups()) == 1
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    assert asyncio.run(cancel_mid_round()) is True
    assert processes_logging_to(tmp_path) == []
    assert live_groups() == []
