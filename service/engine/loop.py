"""The tuning loop: for each playbook step, propose candidates, run their rounds, decide, keep or roll back.

Every candidate is judged against the last accepted deployment (the baseline). The candidates of one
proposal are alternatives, each judged against that same baseline, and the best one the policy keeps
becomes the new baseline without re-measurement (`service.engine.alternatives`); a stepwise technique's
candidates run one at a time instead, each against the last accepted step. The loop stops
when the SLO and the objective are met, the budget is spent, nothing applicable remains, or measurement
keeps failing (4 consecutive errors pause the job).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from service.components import Playbook, Policy, RoundContext, Runner, Technique, TuningContext
from service.domain import (
    ConfigDelta,
    Decision,
    Job,
    JobState,
    ModelSpec,
    Pattern,
    Round,
    RoundResult,
    RoundState,
    RoundStatus,
    Scenario,
    Verdict,
    resolve_model,
)
from service.engine.alternatives import Trial, pick_winner, superseded
from service.engine.budget import Budget
from service.engine.delta import DeltaError, apply_delta, delta_key
from service.engine.events import EventCallback, EventSink, JobEvent
from service.engine.launch import render_launch
from service.engine.measure import mean_result, measure
from service.engine.outcome import SkippedStep, TuningOutcome, objective_met
from service.engine.quality import check_quality, gate_required
from service.engine.slo import policy_slo_checks
from service.engine.states import move_job, move_round

# Casebook: "a round whose measurement failed" never counts; after this many in a row the job pauses.
MAX_CONSECUTIVE_ERRORS = 4
# An inconclusive round is measured again on as many new seeds (both sides), up to this many times the
# playbook's repeats, and decided on all of them (sequential testing, bounded by the budget).
MAX_REPEAT_FACTOR = 2


@dataclass
class EngineParts:
    """The components one job runs with (looked up from a plugin host, or fakes in tests)."""

    techniques: dict[str, Technique]
    runner: Runner
    policy: Policy
    round_context: RoundContext | None = None
    hook: Any | None = None
    resolve: Callable[[str], ModelSpec] = resolve_model


@dataclass
class _State:
    accepted: Scenario
    baseline: list[RoundResult] = field(default_factory=list)
    tried: set[str] = field(default_factory=set)
    kept: list[str] = field(default_factory=list)
    skipped: list[SkippedStep] = field(default_factory=list)
    errors_in_a_row: int = 0
    paused: bool = False


class TuningEngine:
    """Runs one playbook on one scenario; `run()` returns the outcome."""

    def __init__(self, parts: EngineParts, playbook: Playbook, scenario: Scenario, *, seed: int = 0,
                 repeats: int | None = None, callback: EventCallback | None = None,
                 job_id: str | None = None) -> None:
        self.parts = parts
        self.playbook = playbook
        self.seed = seed
        self.repeats = max(1, repeats if repeats is not None else playbook.repeats)
        scenario = _with_playbook_bench(_with_playbook_quality(scenario, playbook), playbook)
        self.initial = scenario
        self.job = Job(id=job_id or uuid.uuid4().hex[:12], playbook=playbook.name, runner=parts.runner.name,
                       scenario=scenario)
        self.budget = Budget(max_rounds=playbook.max_rounds, max_gpu_minutes=playbook.max_gpu_minutes)
        self.events = EventSink(parts.hook, callback)
        self.state = _State(accepted=scenario)
        self._models: dict[str, ModelSpec] = {}

    # -- the job ------------------------------------------------------------------------------------------

    async def run(self) -> TuningOutcome:
        """Measure the baseline, walk the playbook's steps, and finish with the final deployment."""
        move_job(self.job, JobState.RUNNING)
        self._emit("job_started", message=f"{self.playbook.name} on {self.initial.name}")
        reason = "every step of the playbook ran"
        if await self._measure_baseline():
            for name in self.steps():
                stop = self._stop_reason()
                if stop is not None:
                    reason = stop
                    break
                await self._run_step(name)
            else:
                reason = self._stop_reason() or reason
        if self.state.paused:
            reason = f"paused after {MAX_CONSECUTIVE_ERRORS} consecutive measurement errors"
        return self._finish(reason)

    def steps(self) -> list[str]:
        """Technique names in the order this playbook runs them."""
        names = list(self.playbook.techniques) or list(self.parts.techniques)
        missing = [n for n in names if n not in self.parts.techniques]
        if missing:
            raise KeyError(f"playbook {self.playbook.name!r} names unknown techniques: {', '.join(missing)}")
        if self.playbook.order == "casebook":
            # Casebook "Tuning Order": by effect size; ties keep the listed order.
            names.sort(key=lambda n: self.parts.techniques[n].rank)
        return names

    def _stop_reason(self) -> str | None:
        if self.state.paused:
            return "paused"
        spent = self.budget.exhausted()
        if spent is not None:
            return spent
        checks = policy_slo_checks(self.parts.policy, self.state.baseline, self.initial.slo)
        if all(c.met for c in checks) and objective_met(self.initial.objective, self.initial.slo,
                                                        self.state.baseline):
            return "SLO and objective met"
        return None

    # -- steps and rounds ---------------------------------------------------------------------------------

    async def _run_step(self, name: str) -> None:
        technique = self.parts.techniques[name]
        ran = 0
        while self._stop_reason() is None:
            blocked = self._blocked(technique)
            ctx = self._context(name)
            applicability = technique.applicable(ctx) if blocked is None else None
            if blocked is not None or (applicability is not None and not applicability.applicable):
                if ran == 0:  # after its own rounds, a technique that no longer applies is simply done
                    self._skip(name, blocked or (applicability.reason if applicability else ""))
                return
            candidates = [d for d in technique.propose(ctx) if delta_key(d) not in self.state.tried]
            if not candidates:
                if ran == 0:
                    self._skip(name, "applicable, but every candidate it proposes was already tried")
                return
            group = candidates[:1] if technique.stepwise else candidates
            await self._try_group(group)
            ran += len(group)

    def _blocked(self, technique: Technique) -> str | None:
        clash = [c for c in technique.conflicts if c in self.state.kept]
        if clash:
            return f"conflicts with the accepted {', '.join(clash)}"
        missing = [p for p in technique.prerequisites if p not in self.state.kept]
        if missing:
            return f"needs {', '.join(missing)} accepted first"
        return None

    def _skip(self, name: str, reason: str) -> None:
        self.state.skipped.append(SkippedStep(technique=name, reason=reason))
        self._emit("step_skipped", technique=name, message=reason)

    async def _try_group(self, deltas: list[ConfigDelta]) -> None:
        """Run each alternative against the same accepted baseline; adopt the best one the policy kept."""
        trials: list[Trial] = []
        for delta in deltas:
            if self._stop_reason() is not None:
                break  # the budget ran out or measurement keeps failing: judge what was measured
            trial = await self._try(delta)
            if trial is not None:
                trials.append(trial)
                self.state.errors_in_a_row = _errors_after(self.state.errors_in_a_row, trial.decision)
                self.state.paused = self.state.errors_in_a_row >= MAX_CONSECUTIVE_ERRORS
        winner = pick_winner(trials, self.initial.slo, self.initial.objective)
        for trial in trials:
            decision = trial.decision
            if winner is not None and trial is not winner and decision.verdict.keeps_candidate():
                decision = superseded(trial, winner, self.initial.slo, self.initial.objective)
            self._record(trial.round_, trial.results, decision)
        if winner is not None:
            self._adopt(winner)

    async def _try(self, delta: ConfigDelta) -> Trial | None:
        """Measure one candidate and let the policy judge it; None when it was closed without measuring."""
        self.state.tried.add(delta_key(delta))
        round_ = Round(index=len(self.job.rounds), technique=delta.technique, delta=delta)
        self.job.rounds.append(round_)
        try:
            candidate = apply_delta(self.state.accepted, delta)
        except DeltaError as exc:
            self._close_unmeasured(round_, Verdict.ERROR, f"the candidate is not a valid configuration: {exc}")
            return None
        gate = None
        if gate_required(delta, self.playbook.require_quality_for):
            gate = check_quality(delta, self.state.accepted, self.state.accepted.quality,
                                 self.playbook.quality_tolerance)
            if not gate.passed:
                # Quality inputs are fixed: a candidate that can never be accepted costs no GPU time.
                self._close_unmeasured(round_, Verdict.ROLLBACK, gate.reason)
                return None
        results, decision = await self._measure_until_decided(round_, candidate)
        self.budget.count_round()
        if gate is not None and decision.verdict.keeps_candidate():
            decision = msgspec.structs.replace(decision, reasons=[*decision.reasons, gate.reason])
        return Trial(round_=round_, delta=delta, candidate=candidate, results=results, decision=decision)

    def _close_unmeasured(self, round_: Round, verdict: Verdict, reason: str) -> None:
        round_.decision = Decision(verdict=verdict, pattern=Pattern.NOT_APPLICABLE, reasons=[reason],
                                   policy="engine")
        move_round(round_, RoundState.RUNNING)
        move_round(round_, RoundState.FAILED if verdict is Verdict.ERROR else RoundState.FINISHED)
        self._emit("round_finished", round_index=round_.index, technique=round_.technique,
                   verdict=verdict.value, message=reason)

    async def _run_round(self, round_: Round, scenario: Scenario) -> list[RoundResult]:
        move_round(round_, RoundState.RUNNING)
        self._emit("round_started", round_index=round_.index, technique=round_.technique,
                   message=round_.delta.summary if round_.delta else "baseline")
        return await self._measure(scenario, self._seeds())

    async def _measure(self, scenario: Scenario, seeds: list[int]) -> list[RoundResult]:
        """One result per seed, charged to the budget."""
        results = await measure(self.parts.runner, scenario, seeds=seeds, context=self.parts.round_context)
        self.budget.charge(results, scenario.deployment.total_gpus())
        return results

    def _seeds(self, start: int = 0, count: int | None = None) -> list[int]:
        # The same seeds for every round: baseline and candidate see the same traffic (paired comparison).
        return [self.seed + r for r in range(start, start + (self.repeats if count is None else count))]

    async def _measure_until_decided(self, round_: Round, candidate: Scenario) -> tuple[list[RoundResult], Decision]:
        """Measure a candidate; while the policy finds it inconclusive or unsettled, add seeds to both sides and
        decide again on all of them.

        The baseline gets the same new seeds as the candidate, so the comparison stays paired seed for seed.
        A failed baseline repeat ends the extension and leaves the inconclusive decision standing.
        """
        results = await self._run_round(round_, candidate)
        decision = self._decide(results)
        first = len(results)
        limit = self.repeats * MAX_REPEAT_FACTOR
        while ((decision.verdict is Verdict.INCONCLUSIVE or decision.unsettled) and len(results) < limit
               and self.budget.exhausted() is None and await self._baseline_seeds(len(results) + self.repeats)):
            results = [*results, *await self._measure(candidate, self._seeds(len(results)))]
            decision = self._decide(results)
        if len(results) > first:
            note = f"decided on {len(results)} seeds per side: {first} left it to noise"
            decision = msgspec.structs.replace(decision, reasons=[*decision.reasons, note])
        return results, decision

    async def _baseline_seeds(self, count: int) -> bool:
        """Make sure the accepted baseline was measured on the first `count` seeds; False if a repeat fails."""
        have = len(self.state.baseline)
        if have >= count:
            return True
        more = await self._measure(self.state.accepted, self._seeds(have, count - have))
        if any(r.status is not RoundStatus.OK for r in more):
            return False
        self.state.baseline = [*self.state.baseline, *more]
        return True

    def _decide(self, results: list[RoundResult]) -> Decision:
        bad = [r for r in results if r.status is not RoundStatus.OK]
        if bad:
            why = bad[0].error or f"measurement {bad[0].status.value}"
            return Decision(verdict=Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE, policy="engine",
                            reasons=[f"measurement did not complete, never accepted: {why}"])
        # A baseline measured on more seeds (an earlier extended round) is compared on the candidate's seeds.
        baseline = self.state.baseline[:len(results)]
        try:
            return self.parts.policy.decide(baseline, results, self.initial.slo, self.initial.objective)
        except Exception as exc:  # a policy bug must fail closed, like a failed measurement
            return Decision(verdict=Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE, policy="engine",
                            reasons=[f"policy {self.parts.policy.name!r} failed: {exc}"])

    def _record(self, round_: Round, results: list[RoundResult], decision: Decision) -> None:
        """Close a measured round with its final decision (never changed afterwards)."""
        round_.results = results
        round_.decision = decision
        move_round(round_, RoundState.FAILED if decision.verdict is Verdict.ERROR else RoundState.FINISHED)
        self._emit("round_finished", round_index=round_.index, technique=round_.technique,
                   verdict=decision.verdict.value, message="; ".join(decision.reasons[:1]))

    def _adopt(self, trial: Trial) -> None:
        """The kept candidate becomes the baseline every later candidate is judged against."""
        self.state.accepted = trial.candidate
        self.state.baseline = trial.results
        self.state.kept.append(trial.round_.technique)

    async def _measure_baseline(self) -> bool:
        """Round 0 measures the starting deployment; a failed measurement is retried as a new round."""
        retry_of: int | None = None
        while not self.state.paused:
            round_ = Round(index=len(self.job.rounds), technique="baseline", delta=None, retry_of=retry_of)
            self.job.rounds.append(round_)
            results = await self._run_round(round_, self.state.accepted)
            ok = all(r.status is RoundStatus.OK for r in results)
            verdict = Verdict.ACCEPT if ok else Verdict.ERROR
            reason = "starting point" if ok else (results[0].error or "baseline measurement failed")
            decision = Decision(verdict=verdict, pattern=Pattern.NOT_APPLICABLE, reasons=[reason],
                                policy="engine")
            self._record(round_, results, decision)
            if ok:
                self.state.baseline = results
                self.state.errors_in_a_row = 0
                return True
            self.state.errors_in_a_row += 1
            self.state.paused = self.state.errors_in_a_row >= MAX_CONSECUTIVE_ERRORS
            retry_of = round_.index
        return False

    # -- context and finish -------------------------------------------------------------------------------

    def _context(self, name: str) -> TuningContext:
        scenario = self.state.accepted
        history = [mean_result(r.results) for r in self.job.rounds if r.results]
        return TuningContext(scenario=scenario, model=self._model(scenario.model),
                             baseline=mean_result(self.state.baseline) if self.state.baseline else None,
                             history=history, tried=sorted(self.state.tried),
                             options=dict(self.playbook.options.get(name, {})))

    def _model(self, name: str) -> ModelSpec:
        if name not in self._models:
            self._models[name] = self.parts.resolve(name)
        return self._models[name]

    def _finish(self, reason: str) -> TuningOutcome:
        final = self.state.accepted
        refused: list[str] = []
        try:
            workers, router = render_launch(final.deployment, final.hardware, final.sglang_version, final.model)
        except ValueError as exc:  # the flag catalogue refused the deployment: report why, render nothing
            workers, router, refused = [], None, [str(exc)]
        checks = policy_slo_checks(self.parts.policy, self.state.baseline, final.slo)
        move_job(self.job, JobState.PAUSED if self.state.paused else JobState.SUCCEEDED, reason)
        artifacts: dict[str, str] = {}
        for round_ in self.job.rounds:
            if round_.delta is not None and round_.decision and round_.decision.verdict.keeps_candidate():
                artifacts.update(round_.delta.artifacts)
        outcome = TuningOutcome(job=self.job, initial=self.initial, final=final, final_results=self.state.baseline,
                                skipped=self.state.skipped, budget=self.budget, slo_checks=checks,
                                launch_commands=workers, router_command=router, artifacts=artifacts,
                                accepted=list(self.state.kept), launch_refused=refused)
        self._emit("job_paused" if self.state.paused else "job_finished", state=self.job.state.value,
                   message=reason)
        return outcome

    def _emit(self, kind: Any, **fields: Any) -> None:
        done = sum(1 for r in self.job.rounds if r.state.is_terminal())
        self.events.emit(JobEvent(kind=kind, job_id=self.job.id, rounds_done=done,
                                  rounds_budget=self.budget.max_rounds, **fields))


def _with_playbook_quality(scenario: Scenario, playbook: Playbook) -> Scenario:
    """Quality results given in the playbook join the scenario's (the scenario's win on the same subject)."""
    if not playbook.quality:
        return scenario
    known = {q.subject for q in scenario.quality}
    extra = [q for q in playbook.quality if q.subject not in known]
    return msgspec.structs.replace(scenario, quality=[*scenario.quality, *extra])


def _errors_after(errors_in_a_row: int, decision: Decision) -> int:
    """Consecutive measurement errors after one more decided round."""
    return errors_in_a_row + 1 if decision.verdict is Verdict.ERROR else 0


def _with_playbook_bench(scenario: Scenario, playbook: Playbook) -> Scenario:
    """The playbook's bench settings (round size, warm-up) override the scenario's for every round."""
    if not playbook.bench:
        return scenario
    fields = msgspec.to_builtins(scenario.bench) | dict(playbook.bench)
    try:
        bench = msgspec.convert(fields, type(scenario.bench))
    except msgspec.ValidationError as exc:
        raise ValueError(f"playbook {playbook.name!r}: invalid bench setting: {exc}") from exc
    return msgspec.structs.replace(scenario, bench=bench)
