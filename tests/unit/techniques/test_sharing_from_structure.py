"""A workload described by its prompt structure alone is read at the sharing rate that structure has.

A RAG service on four TP1 Qwen3.6-9B replicas behind round_robin, its prompts a system prompt and one of 200
documents (80% of requests on 20 of them), states no `prefix_sharing_rate`: its prompts share about 0.87 of
their tokens, so the casebook's router choice is cache_aware (case 2), as for a stated rate. Whole auto job
on four L40S at 48 clients, simulated: cache_aware +6.1% output throughput and -11.5% median TTFT over
round_robin, kept. A stated rate the structure does not have is a door warning naming both figures.
"""

from __future__ import annotations

import msgspec

from plugins.techniques import RouterPolicy
from service import DocumentSet, LengthDist, PrefixStructure, RouterConfig, Scenario, WorkloadProfile, check_scenario

from .scenarios import context, deployment, scenario

MODEL = "Qwen/Qwen3.6-9B"
RAG = PrefixStructure(system_prompt_tokens=800,
                      documents=DocumentSet(count=200, tokens=5000, popular=20, popular_share=0.8))


def _rag(prefix: PrefixStructure = RAG, stated: float | None = None) -> Scenario:
    dep = deployment(MODEL, replicas=4)
    dep = msgspec.structs.replace(dep, router=RouterConfig(policy="round_robin", port=30000))
    workload = WorkloadProfile(input=LengthDist(median=6000, p95=12000), output=LengthDist(median=250, p95=600),
                               prefix=prefix, prefix_sharing_rate=stated, peak_concurrency=48)
    return scenario(MODEL, "L40S", 4, dep, clients=48, workload=workload)


def _policies(scen: Scenario) -> list[str]:
    return [delta.router.policy for delta in RouterPolicy().propose(context(scen)) if delta.router is not None]


def test_a_document_corpus_with_no_stated_rate_is_routed_cache_aware() -> None:
    scen = _rag()
    assert _policies(scen) == ["cache_aware"]
    applies = RouterPolicy().applicable(context(scen))
    assert applies.applicable and "sharing rate 0.8" in applies.reason and "cache_aware" in applies.reason
    # Prompts that share nothing (a request id in front of everything) keep the load-balancing choice.
    unshared = msgspec.structs.replace(RAG, variable_tokens=30, variable_position="front")
    assert _policies(_rag(unshared)) == ["power_of_two"]


def test_a_stated_rate_the_prompts_do_not_have_warns_with_both_figures() -> None:
    [issue] = [i for i in check_scenario(_rag(PrefixStructure(), stated=0.5))
               if i.field == "workload.prefix_sharing_rate"]
    assert issue.severity == "warning"
    assert "prefix_sharing_rate is 0.5, but the prompts a round builds from workload.prefix share 0.00" in issue.message
    assert "system_prompt_tokens" in (issue.hint or "") and "leave prefix_sharing_rate out" in (issue.hint or "")
    # Close enough to what the structure shares: no warning.
    assert not [i for i in check_scenario(_rag(stated=0.8)) if i.field == "workload.prefix_sharing_rate"]
    # A prompt law out of range is the range check's to name, not a crash here.
    broken = _rag(stated=0.5)
    broken = msgspec.structs.replace(broken, workload=msgspec.structs.replace(broken.workload,
                                                                              input=LengthDist(median=0)))
    assert any(i.field == "workload.input.median" for i in check_scenario(broken))


def test_the_random_dataset_shares_nothing_whatever_the_structure() -> None:
    from service import scenario_sharing

    scen = _rag()
    random = msgspec.structs.replace(scen, bench=msgspec.structs.replace(scen.bench, dataset="random"))
    assert scenario_sharing(scen) > 0.8 and scenario_sharing(random) == 0.0
    assert _policies(random) == ["power_of_two"]


def test_a_replayed_trace_with_no_stated_rate_is_read_at_its_own_sharing() -> None:
    from pathlib import Path

    from service import scenario_sharing
    from service.profile import profile_trace
    from service.scenario import load_scenario

    example = Path(__file__).parents[3] / "examples" / "traces"
    scen = load_scenario(example / "chat-sessions.toml")
    unstated = msgspec.structs.replace(scen, workload=msgspec.structs.replace(scen.workload, prefix_sharing_rate=None))
    measured = scen.bench.trace.parts(scen.bench.warm_prompts, scen.bench.num_prompts)[1]
    assert scenario_sharing(unstated) == profile_trace(measured).prefix_sharing_rate
    assert 0.6 < scenario_sharing(unstated) < 0.8 and scenario_sharing(scen) == 0.71
