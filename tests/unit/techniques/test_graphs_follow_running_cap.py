"""A running cap the tuner raises takes a CUDA-graph cap the user set below it along.

SGLang captures decode CUDA graphs for batches up to --cuda-graph-max-bs and decodes larger batches eagerly,
every kernel launched from the host. A deployment started with `--max-running-requests 4
--cuda-graph-max-bs 4` whose queue the tuner relieves with 64 running requests would otherwise run every
decode batch above 4 without graphs; the graph cap rises with the running cap, to SGLang's own default for
the GPU (256 on an 80 GB H100) at most. A cap the user did not set is SGLang's choice and is left alone.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import BatchParameters, SchedulingLimits
from plugins.techniques._rules import graphs_for
from service import SLO, ServerMetrics

from .scenarios import context, deployment, measured, scenario

MODEL = "Qwen/Qwen3.6-9B"


def _capped(clients: int = 64, slo: SLO | None = None, **server: object):
    return scenario(MODEL, "H100-SXM", 1, deployment(MODEL, tp=1, **server), clients=clients, slo=slo)


def test_graphs_for_raises_a_user_cap_below_the_running_cap() -> None:
    capped = _capped(max_running_requests=4, cuda_graph_max_bs=4)
    server = capped.deployment.groups[0].server
    assert graphs_for(64, capped, server) == ({"cuda_graph_max_bs": 64}, ", cuda-graph-max-bs 64 (from 4)")
    assert graphs_for(512, capped, server) == ({"cuda_graph_max_bs": 256}, ", cuda-graph-max-bs 256 (from 4)")
    assert graphs_for(4, capped, server) == ({}, "")
    unset = _capped(max_running_requests=4)
    assert graphs_for(64, unset, unset.deployment.groups[0].server) == ({}, "")


def test_scheduling_limits_raises_the_graph_cap_with_the_running_cap() -> None:
    capped = _capped(slo=SLO(ttft_p95_ms=2000), max_running_requests=4, cuda_graph_max_bs=4)
    baseline = msgspec.structs.replace(measured(64.0, output_throughput=564.0),
                                       server=ServerMetrics(num_queue_reqs=60, token_usage=0.05))
    [delta] = SchedulingLimits().propose(context(capped, baseline=baseline))
    assert delta.set_server == {"max_running_requests": 64, "cuda_graph_max_bs": 64}
    assert delta.summary == "max-running-requests 64 (from 4), cuda-graph-max-bs 64 (from 4)"


def test_the_batch_bundle_raises_the_graph_cap_and_keeps_it_when_tried_alone() -> None:
    capped = _capped(clients=128, slo=SLO(), max_running_requests=4, cuda_graph_max_bs=4)
    [bundle] = BatchParameters().propose(context(capped))
    assert bundle.set_server["max_running_requests"] == 512 and bundle.set_server["cuda_graph_max_bs"] == 256
    assert ", cuda-graph-max-bs 256 (from 4)" in bundle.summary


def test_a_rolled_back_bundle_s_running_cap_step_carries_its_graph_cap() -> None:
    capped = _capped(clients=128, slo=SLO(), max_running_requests=4, cuda_graph_max_bs=4)
    [bundle] = BatchParameters().propose(context(capped))
    tried = [f"batch_parameters:{msgspec.json.encode(bundle).decode()}"]
    steps = BatchParameters().propose(context(capped, tried=tried))
    running = next(d for d in steps if "max_running_requests" in d.set_server)
    assert running.set_server == {"max_running_requests": 512, "cuda_graph_max_bs": 256}
    assert running.summary == "max-running-requests 512 with client concurrency 512, cuda-graph-max-bs 256"
