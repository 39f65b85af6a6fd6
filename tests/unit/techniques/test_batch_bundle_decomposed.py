"""A batch bundle that does not pay is tried knob by knob (casebook case 3 round 3 sets five knobs at once).

Case 3 shows why one bad part can sink the whole: mem-fraction 0.96 preempts and costs 7.7% on its own.
The technique tells a rolled-back bundle from its context: the bundle's key is in `tried` (the engine's
`delta_key`) and its settings are not in effect on the accepted deployment.
"""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from plugins.techniques.batch_parameters import BUNDLE, BatchParameters
from service import SLO, ConfigDelta, Objective, Playbook, Scenario, ServerStartError, resolve_server
from service.engine import EngineParts, TuningEngine, apply_delta, delta_key
from tests.unit.engine.fakes import FakeRunner, ThroughputPolicy, model_spec
from tests.unit.techniques.scenarios import context, deployment, scenario

BATCH = BatchParameters()
MODEL = "Qwen/Qwen3.6-4B"


def offline_job(**server: object) -> Scenario:
    """Qwen3.6-4B as two TP2 replicas on four L40S, 300 clients, no latency SLO: an offline scoring job."""
    scen = scenario(MODEL, "L40S", 4, deployment(MODEL, tp=2, replicas=2, **server), clients=300, slo=SLO())
    return msgspec.structs.replace(scen, objective=Objective(kind="throughput"))


def test_a_rolled_back_bundle_becomes_one_step_per_knob_running_cap_first() -> None:
    scen = offline_job()
    [bundle] = BATCH.propose(context(scen))
    assert set(BUNDLE) <= set(bundle.set_server) and bundle.client_concurrency == 600
    # The bundle ran and was rolled back: the accepted deployment is unchanged, the bundle's key is tried.
    ctx = context(scen, tried=[delta_key(bundle)])
    verdict = BATCH.applicable(ctx)
    assert verdict.applicable and "one per round" in verdict.reason
    steps = BATCH.propose(ctx)
    assert [list(d.set_server) for d in steps] == [[knob] for knob in BUNDLE]
    assert steps[0].client_concurrency == 600 and all(d.client_concurrency is None for d in steps[1:])
    assert all(d.set_server[k] == bundle.set_server[k] for d in steps for k in d.set_server)


def test_each_knob_is_tried_once_and_a_kept_one_is_not_offered_again() -> None:
    scen = offline_job()
    [bundle] = BATCH.propose(context(scen))
    steps = BATCH.propose(context(scen, tried=[delta_key(bundle)]))
    chunk = next(d for d in steps if "chunked_prefill_size" in d.set_server)
    kept = apply_delta(scen, chunk)  # the bigger chunk alone paid and was kept
    tried = [delta_key(bundle), delta_key(steps[0]), delta_key(chunk)]
    left = BATCH.propose(context(kept, tried=tried))
    assert [list(d.set_server) for d in left] == [["max_prefill_tokens"], ["mem_fraction_static"],
                                                  ["schedule_conservativeness"]]
    # Everything tried and nothing else kept: the technique is done, and says why.
    everything = tried + [delta_key(d) for d in left]
    verdict = BATCH.applicable(context(kept, tried=everything))
    assert not verdict.applicable and "each of its knobs was tried alone" in verdict.reason


def test_a_kept_bundle_is_not_decomposed_even_after_later_steps_move_its_knobs() -> None:
    scen = offline_job()
    [bundle] = BATCH.propose(context(scen))
    kept = apply_delta(scen, bundle)
    after = BATCH.propose(context(kept, tried=[delta_key(bundle)]))
    assert [d.summary for d in after] == ["mem-fraction-static 0.96", "client concurrency 1200"]
    # The running cap and the clients doubled later (case 3 round 4): the bundle is still the kept one.
    cap = ConfigDelta(technique=BATCH.name, summary="", set_server={"max_running_requests": 1200},
                      client_concurrency=1200)
    later = BATCH.propose(context(apply_delta(kept, cap), tried=[delta_key(bundle), delta_key(cap), delta_key(after[0])]))
    assert [d.summary for d in later] == ["client concurrency 2400"]


def _figures(scen: Scenario) -> dict[str, float]:
    # The bigger chunk pays 10%; mem-fraction 0.94 preempts on this pool and costs 12%; the rest are neutral.
    server = scen.deployment.groups[0].server
    tput = 4000.0 * (1.10 if server.chunked_prefill_size == 32768 else 1.0)
    tput *= 0.88 if server.mem_fraction_static == 0.94 else 1.0
    return {"output_throughput": tput, "p99_ttft_ms": 3000.0, "median_ttft_ms": 900.0, "p95_ttft_ms": 2500.0,
            "median_itl_ms": 40.0}


def test_through_the_engine_the_paying_part_of_a_losing_bundle_is_kept() -> None:
    parts = EngineParts(techniques={"batch_parameters": BatchParameters()}, runner=FakeRunner(_figures),
                        policy=ThroughputPolicy(), resolve=lambda name: model_spec(name))
    engine = TuningEngine(parts, Playbook(name="p", techniques=["batch_parameters"], max_rounds=10), offline_job())
    outcome = asyncio.run(engine.run())
    decided = [(r.delta.summary, r.decision.verdict.value) for r in outcome.job.rounds if r.delta and r.decision]
    assert decided[0][1] == "rollback" and decided[0][0].startswith("batch max")  # 1.10 x 0.88 < 1.03
    kept = [summary for summary, verdict in decided if verdict == "accept"]
    assert kept == ["chunked-prefill-size 32768 alone"]
    final = outcome.final.deployment.groups[0].server
    assert final.chunked_prefill_size == 32768 and final.mem_fraction_static != 0.94


def test_the_bundle_chunk_is_the_largest_that_starts_beside_a_094_pool_on_this_gpu() -> None:
    one_l40s = msgspec.structs.replace(
        scenario(MODEL, "L40S", 1, deployment(MODEL, tp=1), clients=128, slo=SLO()),
        objective=Objective(kind="throughput"))
    ctx = context(one_l40s)
    [bundle] = BATCH.propose(ctx)
    chunk = bundle.set_server["chunked_prefill_size"]
    assert chunk == 16384 and bundle.set_server["max_prefill_tokens"] == 2 * chunk
    assert "32768 would not start" in bundle.summary and "48 GB L40S" in bundle.summary
    server = one_l40s.deployment.groups[0].server
    as_set = msgspec.structs.replace(server, **bundle.set_server)  # type: ignore[arg-type]
    assert resolve_server(ctx.model, one_l40s.hardware, as_set).pool_tokens > 0
    with pytest.raises(ServerStartError, match="CUDA out of memory at start"):
        resolve_server(ctx.model, one_l40s.hardware, msgspec.structs.replace(
            as_set, chunked_prefill_size=32768, max_prefill_tokens=65536))
    # On an 80 GB GPU the casebook's own bundle starts, and is proposed as the casebook wrote it.
    h100 = msgspec.structs.replace(one_l40s, hardware=msgspec.structs.replace(one_l40s.hardware, gpu="H100-SXM"))
    [casebook] = BATCH.propose(context(h100))
    assert casebook.set_server["chunked_prefill_size"] == 32768 and "would not start" not in casebook.summary


def test_a_kept_bundle_is_not_maximised_again_once_the_clients_pass_its_cap() -> None:
    scen = offline_job()
    [bundle] = BATCH.propose(context(scen))
    clients = ConfigDelta(technique=BATCH.name, summary="", client_concurrency=1200)
    later = apply_delta(apply_delta(scen, bundle), clients)
    assert later.bench.max_concurrency == 1200 > later.deployment.groups[0].server.max_running_requests
    after = BATCH.propose(context(later, tried=[delta_key(bundle), delta_key(clients)]))
    assert not [d for d in after if set(BUNDLE) <= set(d.set_server)]


def test_the_bundle_chunk_is_checked_with_the_bundles_own_running_cap() -> None:
    # Qwen3.6-9B in BF16 with EAGLE3 on one H100 at 256 clients: the bundle's 512 running requests bring
    # CUDA graphs for batch 256 and a 512-request sampler into the 6% left outside the 0.94 pool. Checked
    # with the server's own (unset) cap, chunk 32768 looked as if it started, and failed at start.
    nine = "Qwen/Qwen3.6-9B"
    dep = deployment(nine, speculative_algorithm="EAGLE3", speculative_draft_model_path=f"{nine}-eagle3",
                     speculative_num_steps=5, speculative_eagle_topk=8, speculative_num_draft_tokens=6)
    scen = msgspec.structs.replace(scenario(nine, "H100-SXM", 1, dep, clients=256, slo=SLO()),
                                   objective=Objective(kind="throughput"))
    ctx = context(scen)
    [bundle] = BATCH.propose(ctx)
    assert bundle.set_server["max_running_requests"] == 512
    chunk = bundle.set_server["chunked_prefill_size"]
    assert chunk == 16384 and "CUDA graphs and sampler of 512 running requests" in bundle.summary
    server = scen.deployment.groups[0].server
    as_set = msgspec.structs.replace(server, **bundle.set_server)  # type: ignore[arg-type]
    assert resolve_server(ctx.model, scen.hardware, as_set).pool_tokens > 0
    with pytest.raises(ServerStartError, match="CUDA out of memory at start"):
        resolve_server(ctx.model, scen.hardware, msgspec.structs.replace(
            as_set, chunked_prefill_size=32768, max_prefill_tokens=65536))
