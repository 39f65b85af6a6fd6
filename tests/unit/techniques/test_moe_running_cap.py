"""Merging replicas into one EP instance keeps their running caps together.

SGLang divides --max-running-requests among an instance's DP-attention ranks (`tp_worker.py`), so the cap is
the whole instance's. A cap sized for each of two TP8 replicas' share of the clients, carried unchanged into
one EP16 instance that serves them all, halves the requests that run and queues the rest.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import MoeParallelism
from service import Hardware

from .scenarios import context, deployment, scenario

MODEL = "zai-org/GLM-5.2"


def _ep_servers(replicas: int, tp: int, **server: object):
    dep = deployment(MODEL, tp=tp, replicas=replicas, quantization="fp8", **server)
    scen = scenario(MODEL, "H200-SXM", 8, dep, clients=128)
    scen = msgspec.structs.replace(scen, hardware=Hardware(gpu="H200-SXM", gpus_per_node=8, nodes=2))
    return MoeParallelism().propose(context(scen))


def test_the_ep_instance_takes_the_running_caps_of_the_replicas_it_replaces() -> None:
    proposals = _ep_servers(2, 8, max_running_requests=64)
    assert proposals, "EP16 is proposed for two TP8 replicas of a 2-node MoE"
    for delta in proposals:
        group = delta.deployment.groups[0]
        assert (group.replicas, group.server.ep_size) == (1, 16)
        assert group.server.max_running_requests == 128
        assert "max-running-requests 128 (the 2 instances' caps together)" in delta.summary


def test_a_cap_on_one_instance_or_no_cap_is_carried_as_it_is() -> None:
    for delta in _ep_servers(1, 16, max_running_requests=64):
        assert delta.deployment.groups[0].server.max_running_requests == 64
        assert "max-running-requests" not in delta.summary
    for delta in _ep_servers(2, 8):
        assert delta.deployment.groups[0].server.max_running_requests is None
