"""The `ray` runner on a real four-node Ray cluster: PD over two nodes, one server over two nodes, four
candidates at once, and a deployment the cluster cannot hold. Workers are the emulator, the router is the
real sglang-router binary."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgspec
import pytest

from plugins.runners.ray import RayRunner
from service import RoundContext
from service.domain import RoundResult, Source

from .conftest import live_groups, one_gpu, pd, processes_logging_to, settings, single_instance_two_nodes


def _flag(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_pd_round_puts_prefill_and_decode_on_two_nodes(cluster: Any, tmp_path: Path) -> None:
    runner = RayRunner()
    result = asyncio.run(runner.run_round(pd(), context=RoundContext(settings=settings(tmp_path))))
    assert result.status == "ok", result.error
    assert result.provenance.source == Source.EMULATED and result.provenance.runner == "ray"
    placement = {p.worker: p for p in result.provenance.placement}
    assert set(placement) == {"prefill-0", "decode-0"}
    assert placement["prefill-0"].node_id != placement["decode-0"].node_id
    assert all(len(p.gpus) == 1 for p in placement.values())
    assert len({p.placement_group for p in placement.values()}) == 1
    assert result.bench.completed == 16 and result.bench.output_throughput > 0
    assert result.server.cache_hit_rate_by_tier is not None and result.server.missing == []
    router = next(p for p in result.provenance.processes if p.kind == "router")
    prefill = next(p for p in result.provenance.processes if p.name == "prefill-0")
    # The router pairs the prefill server at the address and bootstrap port it was actually given.
    assert f"http://{prefill.host}:{prefill.port}" in router.argv
    assert _flag(router.argv, "--prefill") == f"http://{prefill.host}:{prefill.port}"
    assert router.argv[router.argv.index("--prefill") + 2] == _flag(prefill.argv, "--disaggregation-bootstrap-port")
    assert processes_logging_to(tmp_path) == [] and live_groups() == []


def test_one_server_over_two_nodes_joins_rank_zero_where_ray_put_it(cluster: Any, tmp_path: Path) -> None:
    result = asyncio.run(RayRunner().run_round(single_instance_two_nodes(),
                                               context=RoundContext(settings=settings(tmp_path))))
    assert result.status == "ok", result.error
    ranks = {p.name: p for p in result.provenance.processes}
    assert set(ranks) == {"wide-0", "wide-0-rank1"}
    head, other = ranks["wide-0"], ranks["wide-0-rank1"]
    assert _flag(head.argv, "--nnodes") == "2" and _flag(other.argv, "--node-rank") == "1"
    assert _flag(other.argv, "--dist-init-addr") == _flag(head.argv, "--dist-init-addr")
    assert _flag(head.argv, "--dist-init-addr").startswith(head.host + ":")
    nodes = {p.worker: p.node_id for p in result.provenance.placement}
    assert nodes["wide-0"] != nodes["wide-0-rank1"]
    rank1_log = next(Path(n.split(": ", 2)[2].split(" ", 2)[-1]) for n in result.notes
                     if n.startswith("logs: wide-0-rank1:"))
    assert "Init torch distributed ends." in rank1_log.read_text()
    assert result.bench.completed == 12
    assert processes_logging_to(tmp_path) == [] and live_groups() == []


def test_use_ray_starts_only_rank_zero_and_leaves_the_bundles_gpus_to_sglang(cluster: Any, tmp_path: Path) -> None:
    scenario = single_instance_two_nodes()
    group = scenario.deployment.groups[0]
    server = msgspec.structs.replace(group.server, extra={"--use-ray": True})
    deployment = msgspec.structs.replace(scenario.deployment, groups=[msgspec.structs.replace(group, server=server)])
    result = asyncio.run(RayRunner().run_round(msgspec.structs.replace(scenario, deployment=deployment),
                                               context=RoundContext(settings=settings(tmp_path))))
    assert result.status == "ok", result.error
    assert [p.name for p in result.provenance.processes] == ["wide-0"]
    assert "--use-ray" in result.provenance.processes[0].argv
    assert [p.gpus for p in result.provenance.placement] == [[]]
    assert "Ray launcher: nnodes=2" in (tmp_path / "wide-0.log").read_text()
    assert processes_logging_to(tmp_path) == [] and live_groups() == []


def test_four_candidates_run_at_once_each_in_its_own_placement_group(cluster: Any, tmp_path: Path) -> None:
    runner = RayRunner()
    context = RoundContext(settings=settings(tmp_path))
    assert asyncio.run(runner.parallel_rounds(one_gpu(1), context)) == 4
    assert asyncio.run(runner.parallel_rounds(pd(), context)) == 2

    async def four() -> list[RoundResult]:
        return list(await asyncio.gather(*(runner.run_round(one_gpu(seed), seed=seed, context=context)
                                           for seed in (1, 2, 3, 4))))

    results = asyncio.run(four())
    assert [r.status for r in results] == ["ok"] * 4, [r.error for r in results]
    groups = {r.provenance.placement[0].placement_group for r in results}
    nodes = {r.provenance.placement[0].node_id for r in results}
    assert len(groups) == 4 and len(nodes) == 4
    ports = [p.port for r in results for p in r.provenance.processes]
    assert len(set(ports)) == len(ports)
    # The rounds overlapped: each one's load started before the last one's placement group was removed.
    assert all(r.bench.completed == 12 for r in results)
    assert processes_logging_to(tmp_path) == [] and live_groups() == []


def test_a_deployment_the_cluster_cannot_hold_is_refused_naming_the_shortfall(cluster: Any, tmp_path: Path) -> None:
    scenario = single_instance_two_nodes()
    hardware = msgspec.structs.replace(scenario.hardware, gpus_per_node=2)
    group = msgspec.structs.replace(scenario.deployment.groups[0], server=msgspec.structs.replace(
        scenario.deployment.groups[0].server, tp_size=4))
    wide = msgspec.structs.replace(scenario, hardware=hardware, deployment=msgspec.structs.replace(
        scenario.deployment, groups=[group]))
    result = asyncio.run(RayRunner().run_round(wide, context=RoundContext(settings=settings(tmp_path))))
    assert result.status == "failed" and result.error_phase == "placement"
    assert result.error is not None and result.error.startswith("insufficient_resources: ")
    assert "2 node(s) with 2 + 2 GPUs" in result.error and "STRICT_SPREAD" in result.error
    assert result.provenance.processes == [] and live_groups() == []


@pytest.mark.parametrize("missing", ["ray"])
def test_without_ray_the_round_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    import sys

    from plugins.runners.local import RoundFailure
    from plugins.runners.ray.cluster import import_ray

    monkeypatch.setitem(sys.modules, missing, None)  # what `import ray` sees where the extra is not installed
    with pytest.raises(RoundFailure) as raised:
        import_ray()
    assert raised.value.cause == "ray_missing"
    assert "pip install 'sglang-tuner[ray]'" in str(raised.value)
