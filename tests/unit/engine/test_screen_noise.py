"""Screening never closes on a prediction what a measured round would give more seeds: on 120 prompts of the
structured-output playbook, xgrammar's predicted failure-rate drop (the baseline misses the 0% JSON-failure
SLO; constrained decoding cannot emit invalid JSON) is not yet beyond noise, so the policy's predicted
verdict is a rollback that more seeds could turn into the accept the casebook makes. It is measured, its
round extended to more seeds, and accepted, as the simulated runner decides it. The same holds when the
prediction also breaks a latency target the baseline met: the failure-rate SLO outranks it, once proven."""

from __future__ import annotations

import asyncio
import dataclasses

import msgspec

from plugins.runners.hybrid import HybridRunner
from service.domain import Verdict
from service.engine import TuningEngine, parts_from_host
from service.playbooks import playbook_scenario
from service.plugin_host import PluginHost

PROMPTS = 120


def _tune(hybrid: bool, ttft_p95_ms: float | None = None) -> TuningEngine:
    host = PluginHost()
    playbook = host.get("playbook", "structured-output")
    playbook = msgspec.structs.replace(playbook, bench={**playbook.bench, "num_prompts": PROMPTS, "warm_prompts": 0})
    scenario = playbook_scenario(playbook)
    if ttft_p95_ms is not None:
        scenario = msgspec.structs.replace(scenario, slo=msgspec.structs.replace(scenario.slo, ttft_p95_ms=ttft_p95_ms))
    parts = parts_from_host(host, playbook, scenario, runner="simulated", cost_model="roofline")
    if hybrid:
        parts = dataclasses.replace(parts, runner=HybridRunner({"local": parts.runner}))
    engine = TuningEngine(parts, playbook, scenario, seed=0, repeats=1, parallel=1)
    asyncio.run(engine.run())
    return engine


def test_a_rollback_noise_could_turn_into_an_accept_is_measured() -> None:
    engine = _tune(hybrid=True)
    grammar = next(r for r in engine.job.rounds if r.technique == "grammar")
    assert grammar.decision is not None and not grammar.decision.figures.get("predicted")
    assert len(grammar.results) > 1  # measured, and extended past its first seed
    assert grammar.decision.verdict.keeps_candidate()
    assert grammar.decision.figures["slo.failure_rate_max.baseline_met"] == 0.0
    assert grammar.decision.figures["slo.failure_rate_max.candidate_met"] == 1.0
    plain = _tune(hybrid=False)
    assert engine.state.accepted.deployment == plain.state.accepted.deployment


def test_a_failure_rate_fix_that_breaks_a_latency_target_is_measured_and_kept() -> None:
    # At 400 ms the baseline's p95 TTFT (about 260 ms) meets the target and xgrammar's cold compiles
    # (about 600 ms) break it: predicted, a rollback, until more seeds prove the failure rate fell.
    engine = _tune(hybrid=True, ttft_p95_ms=400.0)
    grammar = next(r for r in engine.job.rounds if r.technique == "grammar")
    assert grammar.decision is not None and not grammar.decision.figures.get("predicted")
    assert len(grammar.results) > 1
    assert grammar.decision.verdict is Verdict.KEEP_TRADEOFF
    assert grammar.decision.figures["slo.ttft_p95_ms.candidate_met"] == 0.0
    assert "failure-rate SLO takes precedence over latency" in grammar.decision.reasons[0]
    plain = _tune(hybrid=False, ttft_p95_ms=400.0)
    assert engine.state.accepted.deployment == plain.state.accepted.deployment
    assert engine.state.accepted.deployment.groups[0].server.grammar_backend == "xgrammar"
