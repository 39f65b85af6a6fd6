"""Replicas pay off by filling their own batches; with no more requests in flight than replicas they idle.

A user tuning one interactive stream (an assistant for one person, a latency probe) on a wide TP instance:
the casebook's TP-against-replicas step splits the instance so each replica fills a batch (case 1, 25
streams on TP8 -> TP2 x 4). With one client stream a split leaves every replica but one idle and runs the
one request on a smaller TP, so it is slower; a scale-out for a missed latency target adds a replica that
never receives a request. Splits into more replicas than the requests in flight are left out likewise.
"""

from __future__ import annotations

from plugins.techniques import Parallelism, RouterPolicy, ScaleOut
from service import SLO

from .scenarios import context, deployment, measured, scenario

MODEL = "Qwen/Qwen3.6-27B"


def _tp8(clients: int):
    return scenario(MODEL, "H200-SXM", 8, deployment(MODEL, tp=8), clients=clients)


def test_one_client_stream_is_not_split_into_replicas() -> None:
    ctx = context(_tp8(1))
    for technique in (Parallelism(), RouterPolicy()):
        verdict = technique.applicable(ctx)
        assert not verdict.applicable
        assert verdict.reason.startswith("One client stream keeps one request in flight: a second replica would "
                                         "sit idle")


def test_splits_into_more_replicas_than_requests_in_flight_are_left_out() -> None:
    # Three streams on TP8 (H200, where TP2 is the smallest TP with room for KV): TP4 x 2 gives each replica
    # a batch; TP2 x 4 would leave a replica idle.
    assert [d.summary.split(" + ")[0] for d in Parallelism().propose(context(_tp8(3)))] == ["TP4 x 2"]
    # Sixteen streams: every split has clients for each replica, as before.
    assert [d.summary.split(" + ")[0] for d in Parallelism().propose(context(_tp8(16)))] == ["TP2 x 4", "TP4 x 2"]


def test_scale_out_adds_no_replica_that_would_never_receive_a_request() -> None:
    # One stream on one TP2 instance misses a 10 ms median ITL with 6 GPUs idle: another replica cannot
    # shorten the one request, so scale_out does not apply (a faster step does: EAGLE3, FP8, a wider TP).
    one = scenario(MODEL, "H100-SXM", 8, deployment(MODEL, tp=2), clients=1, slo=SLO(itl_median_ms=10))
    verdict = ScaleOut().applicable(context(one, baseline=measured(1.0, median_itl_ms=10.5)))
    assert not verdict.applicable
    assert verdict.reason == ("1 client stream on 1 replica: no replica runs more than one request at a time, so "
                              "another would sit idle and cannot shorten a request that runs alone "
                              "(itl_median_ms missed).")
    # Eight streams on the same instance: the miss may be queueing, and a second replica shares the load.
    eight = scenario(MODEL, "H100-SXM", 8, deployment(MODEL, tp=2), clients=8, slo=SLO(itl_median_ms=10))
    assert ScaleOut().applicable(context(eight, baseline=measured(8.0, median_itl_ms=10.5))).applicable


def test_router_policy_splits_no_further_than_the_requests_in_flight() -> None:
    # Three streams on TP8: router_policy's split is the smallest whose replicas each get a request (TP4 x 2),
    # as parallelism's; TP2 x 4 would leave a replica idle.
    assert [d.summary.split(" + ")[0] for d in RouterPolicy().propose(context(_tp8(3)))] == ["TP4 x 2"]
