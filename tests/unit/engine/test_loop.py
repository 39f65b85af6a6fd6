"""The tuning loop: sweeps stop at the first rollback, errors never win, budgets and gates hold."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from service import SLO, JobState, Objective, Playbook, QualityResult, RoundState, Verdict
from service.engine import MAX_CONSECUTIVE_ERRORS, EngineParts, JobEvent, TuningEngine, TuningOutcome
from tests.unit.engine.fakes import (
    FakeRunner,
    ModelTechnique,
    SweepTechnique,
    ThroughputPolicy,
    chunk_figures,
    model_spec,
    scenario,
)


def run(parts: EngineParts, playbook: Playbook, scen=None, **kwargs) -> TuningOutcome:
    engine = TuningEngine(parts, playbook, scen or scenario(), **kwargs)
    return asyncio.run(engine.run())


def parts(runner: FakeRunner, *techniques, hook=None) -> EngineParts:
    return EngineParts(techniques={t.name: t for t in techniques}, runner=runner, policy=ThroughputPolicy(),
                       hook=hook, resolve=model_spec)


def verdicts(outcome: TuningOutcome) -> list[tuple[str, str]]:
    return [(r.delta.summary if r.delta else "baseline", r.decision.verdict.value) for r in outcome.job.rounds]


def test_chunk_sweep_keeps_4096_and_rolls_back_2048() -> None:
    outcome = run(parts(FakeRunner(chunk_figures), SweepTechnique([4096, 2048, 1024])),
                  Playbook(name="p", techniques=["sweep"]))
    assert verdicts(outcome) == [("baseline", "accept"), ("chunk 4096", "keep_tradeoff"), ("chunk 2048", "rollback")]
    assert outcome.final.deployment.groups[0].server.chunked_prefill_size == 4096
    assert outcome.job.state is JobState.SUCCEEDED
    # the final figures are the kept round's, not the rolled-back one's
    assert outcome.final_results[0].bench.p99_ttft_ms == 1621.0


def test_every_round_uses_the_same_seeds_for_a_paired_comparison() -> None:
    runner = FakeRunner(chunk_figures)
    run(parts(runner, SweepTechnique([4096, 2048])), Playbook(name="p", techniques=["sweep"], repeats=2), seed=7)
    assert [seed for _, seed in runner.calls] == [7, 8, 7, 8, 7, 8]


def test_a_failed_measurement_is_never_accepted_and_four_in_a_row_fail_the_job() -> None:
    # The job needs a person once measurement keeps failing: it ends failed, the errors in its reason.
    runner = FakeRunner(chunk_figures, fail_after=1)
    outcome = run(parts(runner, SweepTechnique([8192, 4096, 2048, 1024, 512], one_at_a_time=False)),
                  Playbook(name="p", techniques=["sweep"]))
    candidates = outcome.job.rounds[1:]
    assert len(candidates) == MAX_CONSECUTIVE_ERRORS
    assert all(r.decision.verdict is Verdict.ERROR and r.state is RoundState.FAILED for r in candidates)
    assert outcome.job.state is JobState.FAILED
    assert outcome.job.stop_reason.startswith(f"measurement failed {MAX_CONSECUTIVE_ERRORS} times in a row: ")
    assert outcome.report.job.state == "failed" and outcome.report.final is not None
    assert outcome.final.deployment.groups[0].server.chunked_prefill_size is None


def test_a_runner_that_raises_fails_closed() -> None:
    runner = FakeRunner(chunk_figures, fail_after=1, raise_error=True)
    outcome = run(parts(runner, SweepTechnique([4096])), Playbook(name="p", techniques=["sweep"]))
    failed = outcome.job.rounds[1]
    assert failed.decision.verdict is Verdict.ERROR
    assert "worker died" in failed.results[0].error
    assert outcome.final.deployment.groups[0].server.chunked_prefill_size is None


def test_round_budget_stops_the_job() -> None:
    outcome = run(parts(FakeRunner(chunk_figures), SweepTechnique([4096, 2048, 1024])),
                  Playbook(name="p", techniques=["sweep"], max_rounds=1))
    assert len(outcome.job.rounds) == 2
    assert "round budget spent" in outcome.job.stop_reason


def test_gpu_minute_budget_counts_gpus_times_duration() -> None:
    # the baseline alone is 8 GPUs x 60 s = 8 GPU-minutes
    outcome = run(parts(FakeRunner(chunk_figures), SweepTechnique([4096, 2048])),
                  Playbook(name="p", techniques=["sweep"], max_gpu_minutes=8.0))
    assert len(outcome.job.rounds) == 1
    assert "GPU-minute budget spent" in outcome.job.stop_reason


def test_stops_when_slo_and_objective_are_met() -> None:
    scen = scenario(slo=SLO(ttft_p95_ms=5000.0), objective=Objective(kind="throughput", target=1000.0))
    outcome = run(parts(FakeRunner(chunk_figures), SweepTechnique([4096])), Playbook(name="p", techniques=["sweep"]),
                  scen)
    assert len(outcome.job.rounds) == 1
    assert outcome.job.stop_reason == "SLO and objective met"
    assert outcome.slo_met


def test_inapplicable_step_is_skipped_with_its_reason() -> None:
    outcome = run(parts(FakeRunner(chunk_figures), SweepTechnique([4096], applicable=False)),
                  Playbook(name="p", techniques=["sweep"]))
    assert [s.technique for s in outcome.skipped] == ["sweep"]
    assert "applies when asked" in outcome.skipped[0].reason
    assert len(outcome.job.rounds) == 1


def test_model_change_without_quality_results_is_rolled_back_unmeasured() -> None:
    runner = FakeRunner(chunk_figures)
    outcome = run(parts(runner, ModelTechnique()), Playbook(name="p", techniques=["model_selection"]))
    gated = outcome.job.rounds[1]
    assert gated.decision.verdict is Verdict.ROLLBACK
    assert "no quality result" in gated.decision.reasons[0]
    assert len(runner.calls) == 1  # only the baseline ran
    assert outcome.final.model == "org/big-27B"


def test_model_change_with_passing_quality_is_accepted() -> None:
    quality = [QualityResult(subject="org/big-27B", metrics={"accuracy": 0.941}),
               QualityResult(subject="org/small-9B", metrics={"accuracy": 0.933})]
    outcome = run(parts(FakeRunner(chunk_figures), ModelTechnique()),
                  Playbook(name="p", techniques=["model_selection"], quality=quality))
    assert outcome.job.rounds[1].decision.verdict is Verdict.ACCEPT
    assert any("quality within" in r for r in outcome.job.rounds[1].decision.reasons)
    assert outcome.final.model == "org/small-9B"
    assert outcome.final.deployment.groups[0].server.model_path == "org/small-9B"


def test_events_reach_hooks_and_callback_in_order() -> None:
    class Hook:
        def __init__(self) -> None:
            self.calls: list[str] = []

        def on_round_started(self, **kw) -> None:
            self.calls.append(f"started {kw['round_index']}")

        def on_round_finished(self, **kw) -> None:
            self.calls.append(f"finished {kw['round_index']} {kw['verdict']}")

        def on_job_finished(self, **kw) -> None:
            self.calls.append(f"job {kw['state']}")

    hook, seen = Hook(), []
    run(parts(FakeRunner(chunk_figures), SweepTechnique([4096]), hook=hook), Playbook(name="p", techniques=["sweep"]),
        callback=seen.append)
    assert hook.calls == ["started 0", "finished 0 accept", "started 1", "finished 1 keep_tradeoff", "job succeeded"]
    assert [e.kind for e in seen][0] == "job_started" and seen[-1].kind == "job_finished"
    assert all(isinstance(e, JobEvent) for e in seen)


def test_a_broken_listener_does_not_stop_the_job() -> None:
    def explode(event: JobEvent) -> None:
        raise RuntimeError("listener bug")

    outcome = run(parts(FakeRunner(chunk_figures), SweepTechnique([4096])), Playbook(name="p", techniques=["sweep"]),
                  callback=explode)
    assert outcome.job.state is JobState.SUCCEEDED


def test_unknown_technique_in_playbook_is_named() -> None:
    engine = TuningEngine(parts(FakeRunner(chunk_figures)), Playbook(name="p", techniques=["swep"]), scenario())
    with pytest.raises(KeyError, match="swep"):
        engine.steps()


def test_casebook_order_sorts_by_rank_keeping_ties_in_listed_order() -> None:
    class Late(SweepTechnique):
        name = "late"
        rank = 7

    engine = TuningEngine(parts(FakeRunner(chunk_figures), Late([1]), SweepTechnique([1]), ModelTechnique()),
                          Playbook(name="p", order="casebook"), scenario())
    assert engine.steps() == ["model_selection", "sweep", "late"]


def test_finished_rounds_are_immutable_records() -> None:
    outcome = run(parts(FakeRunner(chunk_figures), SweepTechnique([4096])), Playbook(name="p", techniques=["sweep"]))
    from service.engine.states import IllegalTransition, move_round

    with pytest.raises(IllegalTransition):
        move_round(outcome.job.rounds[1], RoundState.RUNNING)
    assert msgspec.json.encode(outcome.job)  # the job record serialises as a whole


class _BaselineFails(FakeRunner):
    """Every round fails the way `failure` says, from the first (the baseline) on."""

    def __init__(self, failure) -> None:  # type: ignore[no-untyped-def]
        super().__init__(chunk_figures)
        self.failure = failure

    async def run_round(self, scenario, *, seed=None, context=None):  # type: ignore[no-untyped-def]
        self.calls.append((scenario, seed))
        return self.failure


def test_a_baseline_that_fails_by_chance_is_launched_again_and_one_that_cannot_start_is_not() -> None:
    from service import Provenance, RoundResult, RoundStatus, Source

    origin = Provenance(source=Source.MEASURED, runner="fake")
    timeout = RoundResult(status=RoundStatus.FAILED, provenance=origin, error_phase="health",
                          error="health_timeout: worker-0 did not answer /health within 600 s")
    flaky = run(parts(_BaselineFails(timeout), SweepTechnique([4096])), Playbook(name="p", techniques=["sweep"]))
    assert [r.technique for r in flaky.job.rounds] == ["baseline"] * MAX_CONSECUTIVE_ERRORS
    assert flaky.job.stop_reason.startswith(f"the starting deployment could not be measured ({MAX_CONSECUTIVE_ERRORS} "
                                            "attempts): health_timeout")
    # Out of memory while loading weights: the same launch fails the same way, so one attempt, and the reason
    # says the deployment has to change.
    oom = RoundResult(status=RoundStatus.FAILED, provenance=origin, error_phase="start", config_fault=True,
                      error="oom: worker-0 exited with code 1 during start: torch.OutOfMemoryError: CUDA out of memory")
    runner = _BaselineFails(oom)
    fault = run(parts(runner, SweepTechnique([4096])), Playbook(name="p", techniques=["sweep"]))
    assert [r.technique for r in fault.job.rounds] == ["baseline"] and len(runner.calls) == 1
    assert fault.job.state is JobState.FAILED and fault.report.final is None
    assert fault.job.stop_reason.startswith("the starting deployment cannot start: oom: ")
    assert "not launched again" in fault.job.stop_reason
