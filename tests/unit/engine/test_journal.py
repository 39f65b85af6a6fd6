"""The round journal: every alternative stored as soon as it is measured, resume from it, refused candidates,
and a deployment measured once per job."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import msgspec

from service import SLO, Applicability, ConfigDelta, Playbook, Technique, TuningContext
from service.domain import JobState, RoundState, Verdict
from service.engine import EngineParts, MemoryJournal, TuningEngine
from service.engine.setup import candidate_refusal
from service.playbooks import playbook_scenario
from service.plugin_host import PluginHost
from tests.unit.engine.fakes import FakeRunner, SweepTechnique, ThroughputPolicy, chunk_figures, model_spec, scenario

GROUP = Playbook(name="p", techniques=["sweep"])


def _parts(runner: FakeRunner, *techniques: Technique, refuse=None) -> EngineParts:  # type: ignore[no-untyped-def]
    return EngineParts(techniques={t.name: t for t in techniques}, runner=runner, policy=ThroughputPolicy(),
                       resolve=model_spec, refuse=refuse)


def test_each_alternative_is_journaled_as_measured_before_its_group_is_decided() -> None:
    journal = MemoryJournal()
    engine = TuningEngine(_parts(FakeRunner(chunk_figures), SweepTechnique([4096, 2048], one_at_a_time=False)),
                          GROUP, scenario(), journal=journal)
    outcome = asyncio.run(engine.run())
    steps = [(r.index, r.state.value) for r in journal.entries]
    assert steps == [(0, "running"), (0, "finished"), (1, "running"), (1, "measured"), (2, "running"),
                     (2, "measured"), (1, "finished"), (2, "finished")]
    assert [e.kind for e in journal.events] == ["job_started", "job_finished"]
    assert journal.events[-1].state == "succeeded" and outcome.job.state is JobState.SUCCEEDED


def test_resume_mid_group_keeps_the_measured_alternative_and_decides_as_an_uninterrupted_job() -> None:
    technique = SweepTechnique([4096, 2048], one_at_a_time=False)
    whole = MemoryJournal()
    uninterrupted = asyncio.run(TuningEngine(_parts(FakeRunner(chunk_figures), technique), GROUP, scenario(),
                                             journal=whole).run())
    # A crash right after round 1 was stored as measured, while round 2 was running.
    kept = {}
    for entry in whole.entries[:whole.entries.index(next(e for e in whole.entries
                                                         if e.index == 2 and e.state is RoundState.RUNNING)) + 1]:
        kept[entry.index] = entry
    history = [kept[i] for i in sorted(kept)]
    history[2].state = RoundState.INTERRUPTED
    runner = FakeRunner(chunk_figures)
    resumed = asyncio.run(TuningEngine(_parts(runner, technique), GROUP, scenario()).resume(history))
    measured = [s.deployment.groups[0].server.chunked_prefill_size for s, _ in runner.calls]
    assert measured == [2048]  # only the interrupted alternative runs again; baseline and round 1 are kept
    rounds = resumed.job.rounds
    assert rounds[1].results == history[1].results and rounds[1].state is RoundState.FINISHED
    assert rounds[2].state is RoundState.INTERRUPTED and rounds[3].retry_of == 2
    assert [r.decision.verdict for r in rounds if r.state is RoundState.FINISHED] == [
        r.decision.verdict for r in uninterrupted.job.rounds]
    assert resumed.final == uninterrupted.final and resumed.job.state is JobState.SUCCEEDED


class TooWide(Technique):
    """Proposes a server wider than the node (TP 16 on 8 GPUs): it could never launch."""

    name: ClassVar[str] = "too_wide"
    rank: ClassVar[int] = 4

    def applicable(self, ctx: TuningContext) -> Applicability:
        return Applicability(True, "asked to in this test")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        return [ConfigDelta(technique=self.name, summary="TP 16", set_server={"tp_size": 16})]


def test_a_candidate_that_could_never_launch_is_refused_unmeasured_and_never_accepted() -> None:
    start = playbook_scenario(PluginHost().get("playbook", "coding-assistant"))
    runner = FakeRunner(lambda s: {"output_throughput": 1000.0 * s.deployment.groups[0].server.world_size,
                                   "p99_ttft_ms": 500.0})
    engine = TuningEngine(_parts(runner, TooWide(), refuse=candidate_refusal), Playbook(name="p",
                          techniques=["too_wide"]), start)
    outcome = asyncio.run(engine.run())
    refused = outcome.job.rounds[1]
    assert refused.decision.verdict is Verdict.ROLLBACK and not refused.results
    assert refused.decision.reasons[0].startswith("refused before launch, never run: ")
    assert "tp" in refused.decision.reasons[0]
    assert len(runner.calls) == 1  # the baseline only
    assert outcome.final == outcome.initial and outcome.report.final.deployment == start.deployment


def test_a_starting_deployment_that_could_never_launch_fails_the_job_unmeasured() -> None:
    # A scenario handed to the engine directly skips the doors: TP3 for a model whose 64 heads do not split over
    # three ranks used to be simulated as if it ran, and the job ended succeeded on a deployment SGLang cannot load.
    start = playbook_scenario(PluginHost().get("playbook", "coding-assistant"))
    group = start.deployment.groups[0]
    start = msgspec.structs.replace(start, deployment=msgspec.structs.replace(start.deployment, groups=[
        msgspec.structs.replace(group, server=msgspec.structs.replace(group.server, tp_size=3))]))
    runner = FakeRunner(lambda s: {"output_throughput": 1000.0, "p99_ttft_ms": 500.0})
    journal = MemoryJournal()
    outcome = asyncio.run(TuningEngine(_parts(runner, SweepTechnique([4096]), refuse=candidate_refusal),
                                       GROUP, start, journal=journal).run())
    assert runner.calls == []  # nothing launched
    [baseline] = outcome.job.rounds
    assert baseline.technique == "baseline" and baseline.state is RoundState.FAILED and not baseline.results
    assert baseline.decision.verdict is Verdict.ERROR
    assert outcome.job.state is JobState.FAILED and not outcome.slo_met
    assert outcome.job.stop_reason.startswith("the starting deployment cannot launch: deployment.groups[0].server"
                                              ".tp-size: the server cannot load")
    assert "fix: use tp-size" in outcome.job.stop_reason
    assert journal.events[-1].state == "failed"
    # Resumed from its journal, the job is refused again, the same way, and the refusal counts as no failed
    # measurement (nothing was measured).
    resumer = TuningEngine(_parts(runner, SweepTechnique([4096]), refuse=candidate_refusal), GROUP, start)
    again = asyncio.run(resumer.resume(journal.history(before_round=1)))
    assert runner.calls == [] and again.job.state is JobState.FAILED and resumer.state.errors_in_a_row == 0
    assert again.job.stop_reason == outcome.job.stop_reason
    assert [r.retry_of for r in again.job.rounds] == [None, 0]


class SameChunk(SweepTechnique):
    """Another technique that happens to propose the very deployment `sweep` already measured."""

    name: ClassVar[str] = "same_chunk"


def test_a_deployment_measured_once_in_a_job_is_never_measured_again() -> None:
    runner = FakeRunner(chunk_figures)
    engine = TuningEngine(_parts(runner, SweepTechnique([2048]), SameChunk([2048])),
                          Playbook(name="p", techniques=["sweep", "same_chunk"]), scenario())
    outcome = asyncio.run(engine.run())
    assert len(runner.calls) == 2  # the baseline and chunk 2048, once
    second = outcome.job.rounds[2]
    assert second.technique == "same_chunk" and second.results == outcome.job.rounds[1].results
    assert any("its measurement is reused, no new run" in reason for reason in second.decision.reasons)


def _drifting(scenario):  # type: ignore[no-untyped-def]
    """Each smaller chunk gains throughput; the last one gives back the p99 TTFT the first one won."""
    chunk = scenario.deployment.groups[0].server.chunked_prefill_size
    throughput, p99 = {None: (1000.0, 3000.0), 4096: (1100.0, 1500.0), 2048: (1200.0, 2500.0)}[chunk]
    return {"output_throughput": throughput, "p99_ttft_ms": p99}


def test_a_path_ending_on_an_slo_miss_ends_on_the_best_slo_passing_deployment_measured() -> None:
    start = msgspec.structs.replace(scenario(), slo=SLO(ttft_p99_ms=2000.0))
    outcome = asyncio.run(TuningEngine(_parts(FakeRunner(_drifting), SweepTechnique([4096, 2048])),
                                       GROUP, start).run())
    assert [r.decision.verdict for r in outcome.job.rounds[1:]] == [Verdict.ACCEPT, Verdict.ACCEPT]
    assert outcome.final.deployment.groups[0].server.chunked_prefill_size == 4096  # round 2 missed p99 TTFT
    assert outcome.job.state is JobState.SUCCEEDED and outcome.slo_met
    assert "the final configuration is round 1's (chunk 4096)" in outcome.report.headline[1]
