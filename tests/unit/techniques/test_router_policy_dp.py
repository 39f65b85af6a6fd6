"""A plain `--dp-size` server hands requests to its ranks round-robin, each rank with its own radix cache: with
shared prefixes that is casebook case 2's round-robin, so its ranks are offered as replicas behind the router.

SGLang's DataParallelController resolves `--load-balance-method auto` to round_robin outside PD
(`arg_groups/serving_hook.py`). The simulator runs each rank as a scheduler of its own, so a dp-size 2 server
measures as two TP replicas behind a round-robin router.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import TECHNIQUES
from service import SLO, LengthDist, PrefixStructure, WorkloadProfile
from service.domain import RouterConfig, resolve_model
from service.simulator import simulate_round
from service.simulator.analytic import analytic_binder
from tests.unit.techniques.scenarios import context, deployment, scenario

ROUTER_POLICY = next(t for t in TECHNIQUES if t.name == "router_policy")()
DENSE = "Qwen/Qwen3.6-27B"
# A support assistant: a 2,000-token system prompt every request shares, then the user's question.
SHARED = WorkloadProfile(input=LengthDist(median=2600, p95=4000), output=LengthDist(median=300, p95=800),
                         prefix_sharing_rate=0.6, prefix=PrefixStructure(system_prompt_tokens=2000),
                         peak_concurrency=32)


def _dp2():  # noqa: ANN202
    return scenario(DENSE, "H100-SXM", 4, deployment(DENSE, tp=2, dp_size=2), clients=32, workload=SHARED,
                    slo=SLO(ttft_p95_ms=1500, itl_median_ms=40))


def test_the_ranks_of_a_dp_server_are_offered_as_replicas_behind_cache_aware() -> None:
    ctx = context(_dp2())
    verdict = ROUTER_POLICY.applicable(ctx)
    assert verdict.applicable, verdict.reason
    assert verdict.reason.startswith("dp-size 2 hands requests to its 2 ranks in turn (SGLang's DP controller: "
                                     "round_robin)")
    first = ROUTER_POLICY.propose(ctx)[0]
    assert first.summary.startswith("TP2 x 2 + cache_aware router (from dp-size 2)")
    assert first.deployment is not None and first.deployment.router is not None
    [group] = first.deployment.groups
    assert (group.replicas, group.server.tp_size, group.server.dp_size) == (2, 2, 1)
    assert first.deployment.total_gpus() == 4  # the same GPUs


def test_a_dp_server_simulates_as_its_ranks_behind_round_robin() -> None:
    dp = msgspec.structs.replace(_dp2(), bench=msgspec.structs.replace(_dp2().bench, num_prompts=120))
    replicas = msgspec.structs.replace(dp, deployment=msgspec.structs.replace(
        deployment(DENSE, tp=2, replicas=2), router=RouterConfig(policy="round_robin")))
    model = resolve_model(DENSE)
    first, second = (simulate_round(s, model, analytic_binder(model, s.hardware), seed=3, cost_model="analytic")
                     for s in (dp, replicas))
    assert first.bench.output_throughput == second.bench.output_throughput > 0
    assert first.bench.p95_ttft_ms == second.bench.p95_ttft_ms
    assert any("one scheduler per DP rank" in note for note in first.notes)
