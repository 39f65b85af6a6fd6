"""Right-sizing: under the cost objective, fewer GPUs one halving at a time, only while the SLO holds."""

from __future__ import annotations

from pathlib import Path

import msgspec

from plugins.techniques.right_sizing import RightSizing, ScaleOut
from service import SLO, Objective, ServerMetrics
from service.engine import TuningEngine
from service.engine.delta import delta_key
from tests.unit.techniques.scenarios import context, deployment, measured, scenario, tune

COST = Objective(kind="cost")


def _l40s(tp: int = 4, replicas: int = 1, objective: Objective = COST, slo: SLO | None = None):
    return scenario("Qwen/Qwen3.6-9B", "L40S", 4, deployment("Qwen/Qwen3.6-9B", tp=tp, replicas=replicas),
                    clients=32, slo=slo, objective=objective)


def test_it_halves_tp_then_stops_where_the_kv_pool_cannot_hold_the_load() -> None:
    technique = RightSizing()
    steps = [technique.propose(context(_l40s(tp)))[0].summary for tp in (4, 2)]
    assert steps == ["TP2 on 2 GPUs (from TP4)", "TP1 on 1 GPU (from TP2)"]
    assert not technique.applicable(context(_l40s(1))).applicable

    def big(gpu: str, clients: int):  # type: ignore[no-untyped-def]
        return scenario("Qwen/Qwen3.6-27B", gpu, 2, deployment("Qwen/Qwen3.6-27B", tp=2), clients=clients,
                        objective=COST)

    # 27B BF16 is 54 GB: one 80 GB H100 leaves a pool of about 90,600 tokens. 16 requests at the p95 context
    # (1,440 + 960 tokens) need 38,400 of them, 64 need 153,600.
    assert technique.propose(context(big("H100-SXM", 16)))[0].summary == "TP1 on 1 GPU (from TP2)"
    short = technique.applicable(context(big("H100-SXM", 64)))
    assert not short.applicable and "short of the 153,600 that 64 requests at the p95 context of 2,400" in short.reason
    # On one 48 GB L40S the weights do not fit at all: SGLang would not start.
    unfit = technique.applicable(context(big("L40S", 16)))
    assert not unfit.applicable and "would not start" in unfit.reason and "50.3 GiB of weights" in unfit.reason


def test_halving_replicas_keeps_each_instance_s_share_of_the_load_in_its_kv_pool() -> None:
    # Two 27B TP1 replicas on H100s at 48 clients hold 24 each (57,600 tokens at the p95 context): one alone
    # would hold all 48, 115,200 tokens, past its pool of about 90,600.
    two = scenario("Qwen/Qwen3.6-27B", "H100-SXM", 2, deployment("Qwen/Qwen3.6-27B", tp=1, replicas=2),
                   clients=48, objective=COST)
    rule = RightSizing().applicable(context(two))
    assert not rule.applicable and "short of the 115,200 that 48 requests" in rule.reason
    assert RightSizing().applicable(context(msgspec.structs.replace(
        two, bench=msgspec.structs.replace(two.bench, max_concurrency=32)))).applicable


def test_replicas_are_halved_before_tp() -> None:
    delta = RightSizing().propose(context(_l40s(tp=1, replicas=4)))[0]
    assert delta.deployment is not None and delta.deployment.groups[0].replicas == 2
    assert delta.deployment.total_gpus() == 2 and delta.summary == "2 of 4 replicas (TP1): 2 GPUs"
    # Down to one worker, the router goes (power_of_two refuses a single worker) and the worker takes its port.
    two = scenario("Qwen/Qwen3.6-9B", "L40S", 4, deployment("Qwen/Qwen3.6-9B", tp=1, replicas=2), clients=32,
                   objective=COST)
    assert two.deployment.router is not None
    alone = RightSizing().propose(context(two))[0]
    assert alone.deployment is not None and alone.deployment.router is None
    assert alone.deployment.groups[0].replicas == 1
    assert alone.deployment.groups[0].base_port == two.deployment.router.port


def test_after_a_halving_missed_a_target_the_walk_goes_halfway_back() -> None:
    # Qwen3-8B as eight TP1 replicas on L40S under the cost objective: 4 of 8 missed the median ITL target and
    # was rolled back, so 6 of 8 is next (kept in the simulated job: cost per 1M tokens -14.7%, ITL 45.5 ms
    # against 50); from 6, with 4 already missed, 5; from 5 nothing lies between.
    model = "Qwen/Qwen3-8B"
    technique = RightSizing()

    def at(replicas: int):  # type: ignore[no-untyped-def]
        return scenario(model, "L40S", 8, deployment(model, tp=1, replicas=replicas), clients=96, objective=COST)

    [half] = technique.propose(context(at(8)))
    assert half.deployment is not None and half.deployment.groups[0].replicas == 4
    missed = [delta_key(half)]
    [between] = technique.propose(context(at(8), tried=missed))
    assert between.summary == "6 of 8 replicas (TP1): 6 GPUs"
    [five] = technique.propose(context(at(6), tried=[*missed, delta_key(between)]))
    assert five.summary == "5 of 6 replicas (TP1): 5 GPUs"
    rule = technique.applicable(context(at(5), tried=[*missed, delta_key(between), delta_key(five)]))
    assert not rule.applicable
    assert rule.reason == "Nothing smaller to try: 4 replicas already missed a target, and no count lies between it and 5."


def test_where_the_measurement_disproves_the_p95_bound_the_kv_it_occupied_decides() -> None:
    # Two 27B TP1 replicas on H100s at 96 clients fail the p95 bound themselves (48 each need 115,200 tokens of
    # a pool of about 90,600) and yet met the SLO: the round's token_usage is the better evidence.
    two = scenario("Qwen/Qwen3.6-27B", "H100-SXM", 2, deployment("Qwen/Qwen3.6-27B", tp=1, replicas=2),
                   clients=96, objective=COST)

    def occupied(usage: float):  # type: ignore[no-untyped-def]
        return msgspec.structs.replace(measured(96, p95_ttft_ms=500), server=ServerMetrics(token_usage=usage))

    # 30% of each pool, doubled onto one instance, is 60% of its pool: within the normal 0.85.
    assert RightSizing().applicable(context(two, baseline=occupied(0.30))).applicable
    # 50%, doubled, would overfill it; and without a measured usage the bound stands.
    full = RightSizing().applicable(context(two, baseline=occupied(0.50)))
    assert not full.applicable and "would fill more than 85% of it" in full.reason
    unmeasured = RightSizing().applicable(context(two, baseline=measured(96, p95_ttft_ms=500)))
    assert not unmeasured.applicable and "short of the 230,400" in unmeasured.reason


def test_only_under_the_cost_objective_and_a_met_slo() -> None:
    technique = RightSizing()
    throughput = technique.applicable(context(_l40s(objective=Objective(kind="throughput"))))
    assert not throughput.applicable and "not cost" in throughput.reason
    slo = SLO(ttft_p95_ms=500)
    missed = technique.applicable(context(_l40s(slo=slo), baseline=measured(32, p95_ttft_ms=800)))
    assert not missed.applicable and "misses ttft_p95_ms" in missed.reason
    met = technique.applicable(context(_l40s(slo=slo), baseline=measured(32, p95_ttft_ms=300)))
    assert met.applicable


SCENARIO = """
name = "l40s-chat-9b"
model = "Qwen/Qwen3.6-9B"
sglang_version = "0.5.23"

[hardware]
gpu = "L40S"
gpus_per_node = 4
price_per_gpu_hour = 1.1

[[deployment.groups]]
name = "worker"

[deployment.groups.server]
tp-size = 4

[workload]
input = {{ median = 1200, p95 = 4000 }}
output = {{ median = 250, p95 = 700 }}

[slo]
ttft_p95_ms = 4000
itl_median_ms = {itl}

[objective]
kind = "cost"

[bench]
dataset = "workload"
num_prompts = 200
max_concurrency = 32
"""


def _tune(tmp_path: Path, itl: float) -> TuningEngine:
    return tune(tmp_path / f"l40s-{itl:.0f}.toml", SCENARIO.format(itl=itl), "right_sizing")


def test_a_simulated_job_ends_on_the_fewest_gpus_that_meet_the_slo(tmp_path: Path) -> None:
    # A 9B model on four L40S under a cost objective: two GPUs and then one still meet a loose SLO, each
    # cheaper per token than the step before, so the job ends on one GPU.
    loose = _tune(tmp_path, 50)
    sized = [r for r in loose.job.rounds if r.technique == "right_sizing"]
    assert [r.decision.verdict.keeps_candidate() for r in sized if r.decision] == [True, True]
    costs = [loose.job.rounds[0].results[0].cost_per_1m_output_tokens,
             *(r.results[0].cost_per_1m_output_tokens for r in sized)]
    assert all(c is not None for c in costs) and costs == sorted(costs, reverse=True)
    assert all("the cost objective comes first" in r.decision.reasons[0] for r in sized if r.decision)
    assert loose.state.accepted.deployment.total_gpus() == 1
    # A median ITL target one GPU cannot meet (about 38 ms on one L40S, 20 ms on two): the step that breaks
    # it is rolled back, and the job ends on the smallest deployment that met it.
    one_gpu, two_gpus = (sized[i].results[0].bench.median_itl_ms for i in (-1, 0))
    assert two_gpus < 30 < one_gpu
    tight = _tune(tmp_path, 30)
    assert tight.state.accepted.deployment.total_gpus() == 2
    last = [r for r in tight.job.rounds if r.technique == "right_sizing"][-1]
    assert last.decision is not None and not last.decision.verdict.keeps_candidate()


def test_scale_out_doubles_replicas_on_idle_gpus_only_while_a_target_is_missed() -> None:
    technique = ScaleOut()
    slo = SLO(ttft_p95_ms=3000)
    a100 = scenario("Qwen/Qwen3.6-27B", "A100-80GB", 8, deployment("Qwen/Qwen3.6-27B", tp=2), clients=64, slo=slo)
    assert not technique.applicable(context(a100)).applicable  # nothing measured yet
    met = technique.applicable(context(a100, baseline=measured(64, p95_ttft_ms=2000)))
    assert not met.applicable and "only cost more" in met.reason
    missed = context(a100, baseline=measured(64, p95_ttft_ms=4800))
    rule = technique.applicable(missed)
    assert rule.applicable and "misses ttft_p95_ms on 2 of 8 GPUs" in rule.reason
    delta = technique.propose(missed)[0]
    assert delta.deployment is not None and delta.deployment.total_gpus() == 4
    assert delta.deployment.router is not None and delta.deployment.router.policy == "power_of_two"
    assert delta.summary == "2 replicas (TP2) behind a power_of_two router: 4 GPUs"
    # Three TP2 replicas on 8 GPUs: the fourth fits, a sixth would not.
    three = scenario("Qwen/Qwen3.6-27B", "A100-80GB", 8, deployment("Qwen/Qwen3.6-27B", tp=2, replicas=3),
                     clients=64, slo=slo)
    assert technique.propose(context(three, baseline=measured(64, p95_ttft_ms=4800)))[0].summary.startswith("4 ")
    full = scenario("Qwen/Qwen3.6-27B", "A100-80GB", 8, deployment("Qwen/Qwen3.6-27B", tp=2, replicas=4),
                    clients=64, slo=slo)
    idle = technique.applicable(context(full, baseline=measured(64, p95_ttft_ms=4800)))
    assert not idle.applicable and "uses 8 of 8" in idle.reason


def test_a_simulated_job_scales_out_until_the_missed_target_is_met(tmp_path: Path) -> None:
    # Qwen3.6-27B for long reasoning outputs on TP2 of an 8-GPU A100 node: 64 clients queue on one instance
    # (p95 TTFT about 4.8 s against 3 s); two replicas share them and meet the target, and the walk stops.
    engine = tune(tmp_path / "a100.toml", A100, "scale_out")
    base = engine.job.rounds[0].results[0].bench.p95_ttft_ms
    scaled = [r for r in engine.job.rounds if r.technique == "scale_out"]
    assert base > 3000 and len(scaled) == 1
    assert scaled[0].decision is not None and scaled[0].decision.verdict.keeps_candidate()
    figures = scaled[0].decision.figures
    assert figures["slo.ttft_p95_ms.baseline_met"] == 0.0 and figures["slo.ttft_p95_ms.candidate_met"] == 1.0
    assert engine.state.accepted.deployment.total_gpus() == 4


A100 = """
name = "a100-27b-reasoning"
model = "Qwen/Qwen3.6-27B"
sglang_version = "0.5.20"

[hardware]
gpu = "A100-80GB"
gpus_per_node = 8

[[deployment.groups]]
name = "worker"

[deployment.groups.server]
tp-size = 2

[workload]
input = { median = 500, p95 = 1500 }
output = { median = 3000, p95 = 8000 }

[slo]
itl_median_ms = 40
ttft_p95_ms = 3000

[objective]
kind = "throughput"

[bench]
dataset = "workload"
num_prompts = 300
max_concurrency = 64
"""
