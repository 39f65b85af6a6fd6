"""Objectives: what each policy optimises once the SLO holds."""

import msgspec

from policies import CasebookPolicy, SLOOnlyPolicy
from service import SLO, Objective, Pattern, Verdict
from tests.unit.policies.policy_rounds import make_round

COST = Objective(kind="cost")


def test_the_cost_objective_accepts_a_cheaper_deployment_at_unchanged_serving_figures():
    # Same serving figures on fewer GPUs: the casebook's MoE case optimises cost per 1M output tokens.
    baseline, candidate = make_round(1, gpu_hour_price=32.0), make_round(2, gpu_hour_price=24.0)
    decision = CasebookPolicy().decide([baseline], [candidate], SLO(ttft_p95_ms=5000), COST)
    assert decision.pattern is Pattern.NOTHING_CHANGED
    assert decision.verdict is Verdict.ACCEPT
    assert decision.reasons[0].startswith("cost per 1M output tokens -25.")
    assert "cost objective comes first" in decision.reasons[0]


def test_the_cost_objective_rolls_back_a_faster_but_dearer_deployment():
    baseline, candidate = make_round(1, gpu_hour_price=16.0), make_round(2, gpu_hour_price=32.0, decode_speed=1.3)
    decision = CasebookPolicy().decide([baseline], [candidate], SLO(), COST)
    assert decision.verdict is Verdict.ROLLBACK
    assert decision.reasons[0].startswith("cost per 1M output tokens +")
    assert "cost objective comes first" in decision.reasons[0]


def test_the_throughput_objective_keeps_a_batch_effect_without_latency_slo():
    # Nightly batch, batch parameters raised: ITL +90% does not matter without a latency SLO.
    baseline, candidate = make_round(1), make_round(2, decode_speed=1.3, ttft_scale=1.6)
    decision = CasebookPolicy().decide([baseline], [candidate], SLO(), Objective(kind="throughput"))
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_UP, Verdict.KEEP_TRADEOFF)


def test_the_throughput_objective_pays_for_a_latency_trade_only_when_the_slo_needs_it():
    # TP4 -> TP2 x 2 on PCIe GPUs: the TTFT tail falls a lot for a proven throughput loss. With the baseline
    # already inside its TTFT target by 40%, the throughput objective has nothing to buy with that loss.
    baseline = [make_round(seed) for seed in (7, 17, 27)]
    candidate = [make_round(seed + 1, decode_speed=0.9, tail_scale=0.1) for seed in (7, 17, 27)]
    roomy = SLO(ttft_p95_ms=4000, itl_median_ms=50)
    decision = CasebookPolicy().decide(baseline, candidate, roomy, Objective(kind="throughput"))
    assert decision.pattern is Pattern.THROUGHPUT_DOWN_TAIL_DOWN
    assert decision.figures["output_throughput.change"] < -0.05
    assert decision.figures["slo.ttft_p95_ms.baseline_met"] == 1.0
    assert decision.verdict is Verdict.ROLLBACK
    assert "the throughput objective comes first" in decision.reasons[0]
    assert "ttft_p95_ms 2417 (target 4000), 40% to spare" in decision.reasons[0]
    # The latency objective wants that tail whatever the headroom (casebook case 1's chunk 4096).
    latency = CasebookPolicy().decide(baseline, candidate, roomy, Objective(kind="latency"))
    assert latency.verdict is Verdict.KEEP_TRADEOFF
    # A baseline with under 5% to spare needs the trade: kept under the throughput objective too.
    tight = SLO(ttft_p95_ms=decision.figures["slo.ttft_p95_ms.baseline"] / 0.97, itl_median_ms=50)
    needed = CasebookPolicy().decide(baseline, candidate, tight, Objective(kind="throughput"))
    assert needed.figures["slo.ttft_p95_ms.baseline_met"] == 1.0
    assert (needed.pattern, needed.verdict) == (Pattern.THROUGHPUT_DOWN_TAIL_DOWN, Verdict.KEEP_TRADEOFF)
    assert "kept for the latency SLO" in needed.reasons[0]


def test_slo_only_follows_the_objective_figure_alone():
    policy = SLOOnlyPolicy()
    faster = policy.decide([make_round(1)], [make_round(2, decode_speed=1.3, ttft_scale=1.6)], SLO(),
                           Objective(kind="throughput"))
    assert faster.verdict is Verdict.ACCEPT and faster.policy == "slo_only"
    assert faster.reasons[0].startswith("output throughput +")
    worse_tail = policy.decide([make_round(1)], [make_round(2, decode_speed=1.3, ttft_scale=1.6)], SLO(),
                               Objective(kind="latency"))
    assert worse_tail.verdict is Verdict.ROLLBACK
    assert worse_tail.reasons[0].startswith("p99 TTFT +")


def test_the_deadline_objective_reports_completion_hours():
    slo = SLO(deadline_hours=200, deadline_output_tokens=3.6e8)
    baseline, candidate = make_round(1), make_round(2, decode_speed=1.3)
    decision = SLOOnlyPolicy().decide([baseline], [candidate], slo, Objective(kind="deadline"))
    assert decision.verdict is Verdict.ACCEPT
    assert decision.reasons[0].startswith("completion time -")
    assert decision.figures["slo.deadline_hours.candidate"] < decision.figures["slo.deadline_hours.baseline"]


def test_decisions_round_trip_as_json():
    decision = CasebookPolicy().decide([make_round(1)], [make_round(2, decode_speed=1.3)], SLO(ttft_p95_ms=5000),
                                       Objective())
    again = msgspec.json.decode(msgspec.json.encode(decision), type=type(decision))
    assert again == decision


def test_a_batch_effect_that_brings_a_missed_ttft_target_closer_beyond_noise_is_accepted():
    # The running cap raised under EAGLE3 at 512 streams: more throughput, median ITL up but far inside its
    # target, the missed TTFT p95 halved. The latency that rose has headroom; the missed one is served.
    baseline = [make_round(seed) for seed in (7, 17, 27)]
    candidate = [make_round(seed + 1, concurrency=40, tpot_ms=36.0, ttft_scale=0.5) for seed in (7, 17, 27)]
    slo = SLO(ttft_p95_ms=300, itl_median_ms=60)
    decision = CasebookPolicy().decide(baseline, candidate, slo, Objective(kind="latency"))
    assert (decision.pattern, decision.verdict) == (Pattern.THROUGHPUT_UP_LATENCY_UP, Verdict.ACCEPT)
    assert decision.figures["median_itl_ms.change"] > 0.2 and decision.figures["slo.ttft_p95_ms.candidate_met"] == 0
    assert "brings the missed target closer, still missed (ttft_p95_ms 2417 -> 1231 (target 300))" in (
        decision.reasons[0])
    # The same trade where the latency that rose is the one missed: no headroom, rolled back.
    tight_itl = CasebookPolicy().decide(baseline, candidate, SLO(ttft_p95_ms=300, itl_median_ms=30),
                                        Objective(kind="latency"))
    assert tight_itl.verdict is Verdict.ROLLBACK and "breaks an SLO the baseline met (itl_median_ms" in (
        tight_itl.reasons[0])
    # A TTFT that moves closer by less than the two sides' intervals allow is no reason to buy the ITL.
    slight = [make_round(seed + 1, concurrency=40, tpot_ms=36.0, ttft_scale=0.97) for seed in (7, 17, 27)]
    within = CasebookPolicy().decide(baseline, slight, slo, Objective(kind="latency"))
    assert within.verdict is Verdict.ROLLBACK and "no SLO headroom (ttft_p95_ms missed)" in within.reasons[0]


def _with_goodput(result, ttft_ms: float, tpot_ms: float):
    """`result` with bench_serving's request goodput: the requests within both bounds, per second."""
    within = sum(1 for t, p in zip(result.samples.ttft_ms, result.samples.tpot_ms, strict=True)
                 if t <= ttft_ms and p <= tpot_ms)
    bench = msgspec.structs.replace(result.bench, request_goodput=within / result.bench.duration,
                                    goodput_slos_ms={"ttft": ttft_ms, "tpot": tpot_ms})
    return msgspec.structs.replace(result, bench=bench)


def test_a_batch_effect_that_leaves_a_missed_target_where_it_was_and_raises_goodput_is_kept():
    # Speculative decoding on an agentic load whose TTFT tail misses its target either way: decode twice as
    # fast (throughput and median ITL), a longer ITL tail with no target on it, TTFT as it was.
    slo = SLO(ttft_p95_ms=1500, itl_median_ms=60)
    baseline = [_with_goodput(make_round(seed), 1500, 60) for seed in (7, 17, 27)]
    candidate = [_with_goodput(make_round(seed + 1, decode_speed=2.0, itl_tail_scale=10.0), 1500, 60)
                 for seed in (7, 17, 27)]
    decision = CasebookPolicy().decide(baseline, candidate, slo, Objective(kind="throughput"))
    assert decision.figures["slo.ttft_p95_ms.candidate_met"] == 0 and decision.figures["slo.ttft_p95_ms.baseline_met"] == 0
    assert decision.figures["p99_itl_ms.change"] > 0.3 and decision.figures["output_throughput.change"] > 0.5
    assert decision.verdict is Verdict.KEEP_TRADEOFF, decision.reasons[0]
    assert "the missed target holds within noise (ttft_p95_ms" in decision.reasons[0]
    assert "more requests meet every bound (goodput +" in decision.reasons[0]
    # Without a goodput figure nothing says more requests are served within the SLO: no headroom, rolled back.
    bare = [make_round(seed + 1, decode_speed=2.0, itl_tail_scale=10.0) for seed in (7, 17, 27)]
    plain = CasebookPolicy().decide([make_round(seed) for seed in (7, 17, 27)], bare, slo,
                                    Objective(kind="throughput"))
    assert plain.verdict is Verdict.ROLLBACK and "no SLO headroom (ttft_p95_ms missed)" in plain.reasons[0]
    # The same change with every TTFT 30% longer moves the missed target away: rolled back.
    slower = [_with_goodput(make_round(seed + 1, decode_speed=2.0, itl_tail_scale=10.0, ttft_scale=1.3), 1500, 60)
              for seed in (7, 17, 27)]
    worse = CasebookPolicy().decide(baseline, slower, slo, Objective(kind="throughput"))
    assert worse.verdict is Verdict.ROLLBACK, worse.reasons[0]
