"""Pipeline stages inside one node are measured against TP on the same GPUs.

Qwen3.6-27B in BF16 started as TP1 x PP2 on two H100s: each GPU holds half the layers, and a token passes the
two stages in turn. TP2 on the same two GPUs holds the same weights per GPU and reads them at once. The weight
rule (TP2 at 25% of an H100 is still past it) used to report "TP1 is already the smallest TP" and never
compared the two; the starting layout was kept whatever it cost.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import TECHNIQUES
from service import SLO
from tests.unit.techniques.scenarios import context, deployment, measured, scenario

DENSE = "Qwen/Qwen3.6-27B"
PARALLELISM = next(t for t in TECHNIQUES if t.name == "parallelism")()


def test_tp1_x_pp2_on_two_gpus_is_measured_as_tp2_on_the_same_gpus() -> None:
    scen = scenario(DENSE, "H100-SXM", 2, deployment(DENSE, tp=1, pp_size=2), clients=64,
                    slo=SLO(ttft_p95_ms=2000, itl_median_ms=40))
    ctx = context(scen, baseline=measured(60, median_itl_ms=24.7))
    assert PARALLELISM.applicable(ctx).applicable
    (delta,) = PARALLELISM.propose(ctx)
    assert delta.summary == "TP2 without pipeline stages"
    assert delta.deployment is not None and delta.deployment.router is None
    (group,) = delta.deployment.groups
    assert (group.replicas, group.server.tp_size, group.server.pp_size) == (1, 2, 1)


def test_stages_on_four_gpus_are_measured_as_one_tp_instance_and_as_tp_replicas_when_itl_has_room() -> None:
    scen = scenario(DENSE, "H100-SXM", 4, deployment(DENSE, tp=2, pp_size=2), clients=64,
                    slo=SLO(ttft_p95_ms=2000, itl_median_ms=40))
    roomy = [d.summary for d in PARALLELISM.propose(context(scen, baseline=measured(60, median_itl_ms=12.0)))]
    assert roomy == ["TP4 without pipeline stages"]  # TP2 x 2 is past the weight rule: 27 GB of an 80 GB GPU
    tight = [d.summary for d in PARALLELISM.propose(context(scen, baseline=measured(60, median_itl_ms=30.0)))]
    assert tight == ["TP4 without pipeline stages"]
    small = "Qwen/Qwen3.6-9B"  # 18 GB in BF16: TP1 replicas pass the rule
    scen = scenario(small, "H100-SXM", 4, deployment(small, tp=2, pp_size=2), clients=64,
                    slo=SLO(ttft_p95_ms=2000, itl_median_ms=40))
    roomy = [d.summary for d in PARALLELISM.propose(context(scen, baseline=measured(60, median_itl_ms=12.0)))]
    assert roomy[-1] == "TP4 without pipeline stages" and roomy[0].startswith("TP1 x 4 + ")
    # With no ITL headroom only the same GPUs as one instance: fewer GPUs per request make a slower token.
    tight = [d.summary for d in PARALLELISM.propose(context(scen, baseline=measured(60, median_itl_ms=30.0)))]
    assert tight == ["TP4 without pipeline stages"]


def test_stages_across_nodes_are_left_to_the_replica_split() -> None:
    # TP8 x PP2 over two nodes: one TP16 instance would cross the nodes; the replica splits stay as they were.
    scen = msgspec.structs.replace(
        scenario(DENSE, "H100-SXM", 8, deployment(DENSE, tp=8, pp_size=2), clients=64,
                 slo=SLO(ttft_p95_ms=2000, itl_median_ms=40)),
        hardware=msgspec.structs.replace(scenario(DENSE, "H100-SXM", 8, deployment(DENSE), clients=1).hardware,
                                         nodes=2))
    summaries = [d.summary for d in PARALLELISM.propose(context(scen, baseline=measured(60, median_itl_ms=12.0)))]
    assert summaries and not any("without pipeline stages" in s for s in summaries)
    assert summaries[0].startswith("TP4 x 4 + ")


def test_replicas_whose_median_itl_misses_its_slo_are_measured_as_wider_tp() -> None:
    # Casebook case 1: TP2 x 4 was adopted because 17.9 ms was "well within the SLO of 50ms"; "if the ITL SLO
    # were tighter, like 15ms, the opposite conclusion would have been necessary".
    scen = scenario(DENSE, "H100-SXM", 8, deployment(DENSE, tp=2, replicas=4), clients=32,
                    slo=SLO(ttft_p95_ms=2000, itl_median_ms=15))
    missed = context(scen, baseline=measured(30, median_itl_ms=17.9))
    assert PARALLELISM.applicable(missed).applicable
    deltas = PARALLELISM.propose(missed)
    assert [d.summary for d in deltas] == ["TP4 x 2 + power_of_two router", "TP8 x 1 (from TP2 x 4)"]
    single = deltas[-1].deployment
    assert single is not None and single.router is None
    assert [(g.replicas, g.server.tp_size) for g in single.groups] == [(1, 8)]
    # Within the target the wider TP is not offered (and TP2 is already the smallest the weight rule allows).
    met = context(scen, baseline=measured(30, median_itl_ms=12.0))
    assert not PARALLELISM.applicable(met).applicable and PARALLELISM.propose(met) == []


def test_one_client_stream_missing_its_itl_is_measured_as_one_instance_only() -> None:
    # TP1 x 4 with one request in flight: TP2 x 2 would leave a replica idle; TP4 x 1 speeds the one request.
    scen = scenario(DENSE, "H100-SXM", 4, deployment(DENSE, tp=1, replicas=4), clients=1,
                    slo=SLO(ttft_p95_ms=500, itl_median_ms=10))
    deltas = PARALLELISM.propose(context(scen, baseline=measured(1, median_itl_ms=18.9)))
    assert [d.summary for d in deltas] == ["TP4 x 1 (from TP1 x 4)"]
