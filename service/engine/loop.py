"""The tuning loop: for each playbook step, propose candidates, run their rounds, decide, keep or roll back.

Every candidate is judged against the last accepted deployment (the baseline). The candidates of one
proposal are alternatives, each judged against that same baseline, and the best one the policy keeps
becomes the new baseline without re-measurement (`service.engine.alternatives`); a stepwise technique's
candidates run one at a time instead, each against the last accepted step. This module walks the steps,
lines and branches and ends the job; the rounds themselves (round 0, vetting, measuring, judging and adopting
a candidate) are `service.engine.candidates`.

The engine owns the job's whole life. It writes every round start, every measured alternative, every
decision and every job event to its journal (`service.engine.journal`) and waits for each write; it resumes
from the journal's rounds (`resume`); and it decides every ending once (`service.engine.ending`): succeeded,
slo_not_met, failed, cancelled (`stop`) or paused (`stop`, to be resumed), firing `on_job_finished` once.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from service.components import Playbook, Policy, RoundContext, Runner, Technique, TuningContext
from service.domain import (
    Decision,
    Job,
    JobState,
    ModelSpec,
    Pattern,
    Round,
    RoundState,
    RoundStatus,
    Scenario,
    SkippedStep,
    Verdict,
    resolve_model,
)
from service.engine.beam import Line, choose_line, why_branched
from service.engine.budget import Budget
from service.engine.candidates import MAX_CONSECUTIVE_ERRORS, CandidateRounds
from service.engine.delta import delta_key
from service.engine.ending import Ending, decide_ending
from service.engine.estimate import latency_capacity
from service.engine.events import EventCallback, EventSink, JobEvent
from service.engine.fallback import fall_back_to_best_passing
from service.engine.gated import gated_levers
from service.engine.journal import NullJournal, RoundJournal
from service.engine.measure import mean_result
from service.engine.outcome import TuningOutcome, build_outcome, objective_met
from service.engine.overrides import with_playbook_bench, with_playbook_quality
from service.engine.parallel import Prefetch
from service.engine.resume import remember_measured, resume_state
from service.engine.slo import policy_slo_checks
from service.engine.state import EngineState, branch_prefix, round_key
from service.engine.states import move_job, move_round
from service.engine.trials import MAX_REPEAT_FACTOR, JournalFailed, Stopped
from service.engine.walk import resumed_steps


@dataclass
class EngineParts:
    """The components one job runs with (looked up from a plugin host, or fakes in tests)."""

    techniques: dict[str, Technique]
    runner: Runner
    policy: Policy
    round_context: RoundContext | None = None
    hook: Any | None = None
    resolve: Callable[[str], ModelSpec] = resolve_model
    # Problems that keep a candidate from launching (flag catalogue, topology, values); empty when it can run.
    refuse: Callable[[Scenario], list[str]] | None = None


class TuningEngine(CandidateRounds):
    """Runs one playbook on one scenario; `run()` returns the outcome, `resume(history)` continues a job."""

    def __init__(self, parts: EngineParts, playbook: Playbook, scenario: Scenario, *, seed: int = 0,
                 repeats: int | None = None, callback: EventCallback | None = None,
                 job_id: str | None = None, journal: RoundJournal | None = None,
                 parallel: int | None = None) -> None:
        self.parts = parts
        self.playbook = playbook
        self.seed = seed
        self.repeats = max(1, repeats if repeats is not None else playbook.repeats)
        scenario = with_playbook_bench(with_playbook_quality(scenario, playbook), playbook)
        self.initial = scenario
        self.job = Job(id=job_id or uuid.uuid4().hex[:12], playbook=playbook.name, runner=parts.runner.name,
                       scenario=scenario)
        self.budget = Budget(max_rounds=playbook.max_rounds, max_gpu_minutes=playbook.max_gpu_minutes)
        self.events = EventSink(parts.hook, callback)
        self.journal: RoundJournal = journal or NullJournal()
        self.state = EngineState(accepted=scenario)
        self._models: dict[str, ModelSpec] = {}
        self.prefetch = Prefetch(parts.runner, parts.round_context, limit=parallel)
        # Why a job that ran its course ended, taken before the line ends are evened (their extra seeds spend
        # GPU-minutes but are not why the walk ended).
        self._course_reason: str | None = None
        self._init_stop()

    # -- the job ------------------------------------------------------------------------------------------

    async def run(self) -> TuningOutcome:
        """Measure the baseline, walk the playbook's steps, and end the job in exactly one terminal state."""
        self._bind_stop()
        move_job(self.job, JobState.RUNNING)
        await self._event("job_started", message=f"{self.playbook.name} on {self.initial.name}")
        try:
            await self.prefetch.size_for(self.initial)
            ending = await self._walk()
        except Stopped:
            ending = self._stop_ending()
        except asyncio.CancelledError:
            if self._stop is None:
                raise  # cancelled from outside without a stop request: nobody is there to hear an ending
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            ending = self._stop_ending()
        except JournalFailed as failure:
            raise failure.error from None  # the job cannot go on here (lease lost, pipe closed): no ending
        except Exception as exc:
            ending = Ending(JobState.FAILED, f"the tuning engine raised {type(exc).__name__}: {exc}")
        finally:
            await self.prefetch.drain()  # nothing measured ahead outlives the job
        return await self._finish(ending)

    async def resume(self, history: list[Round], skipped: Sequence[SkippedStep] = ()) -> TuningOutcome:
        """Continue a job after the rounds its journal kept and the steps it recorded as skipped: nothing
        decided is measured, decided or judged again."""
        self.budget = Budget(max_rounds=self.playbook.max_rounds, max_gpu_minutes=self.playbook.max_gpu_minutes)
        self.state = resume_state(self.initial, history, self.budget)
        self.state.skipped = list(skipped)
        self.job.rounds = sorted(history, key=lambda r: r.index)
        if self.parts.round_context is not None:  # a runner that learns from the job's rounds learns them again
            remember_measured(self.parts.round_context.measured, self.state, history)
        return await self.run()

    async def _walk(self) -> Ending | None:
        """The job's rounds: the main line, then the best branches (`service.engine.beam`) while the budget
        lasts; an Ending when it stops early, None when it ran its course."""
        if not self.state.baseline_measured and not await self._measure_baseline():
            return None
        # The line being walked first: the main line, or on a resume the branch the job was on.
        line = self.state.line
        await self._walk_line(self._resumed_steps(
            self.steps() if line is None else self.state.snapshot().pending(self.steps(), self.job.rounds[line].technique)))
        while self._stop_reason() is None:
            offer = self._next_branch()
            if offer is None:
                break
            self.state.ends.append(self.state.snapshot())
            await self._start_branch(offer)
        self._course_reason = self.steps_done_reason()
        if self.state.ends:
            await self._even_line_ends()  # inside the walk: a stop while measuring ends the job as stopped
        return None

    async def _walk_line(self, pending: list[str]) -> None:
        # A step skipped on this line is passed (a resumed line's journal may hold some): never judged again.
        # One that has rounds on the line is not (a journal of a job resumed before skips were kept may say
        # both), and a step listed twice is passed once per skip.
        passed = Counter(s.technique for s in self.state.skipped
                         if s.line == self.state.line and not self._ran_on_line(s.technique))
        walk = []
        for step in pending:
            if passed[step] > 0:
                passed[step] -= 1
            else:
                walk.append(step)
        pending = walk
        while pending:
            if self._stop_reason() is not None:
                return
            name = self._diagnosis_for(pending[0], pending) or pending[0]
            pending.remove(name)
            path = len(self.state.path)
            await self._run_step(name)
            if len(self.state.path) > path:
                again = self._reopened(name, pending)
                for step in again:
                    await self._event("step_reopened", technique=step,
                                      message=f"{name} was kept: {step} is tried again on the new deployment")
                pending[:0] = again

    def _next_branch(self) -> Line | None:
        """The best branch not yet walked, while the playbook's beam has room for another line."""
        if not self.state.offers or 1 + len(self.state.walked) >= self.playbook.beam_width:
            return None
        return self.state.offers.pop(0)

    async def _start_branch(self, branch: Line) -> None:
        assert branch.root is not None, "an offer is a branch"
        root = self.job.rounds[branch.root]
        self.state.switch(branch)
        self.state.walked.append(root.index)
        await self._event("branch_started", round_index=root.index, technique=root.technique,
                          message=f"the branch from round {root.index} ({root.delta.summary if root.delta else ''}), "
                                  f"{why_branched(root)}")
        await self._walk_line(branch.pending(self.steps(), root.technique))

    def _diagnosis_for(self, step: str, pending: list[str]) -> str | None:
        """A pending technique whose diagnosis must precede `step` and that applies now (casebook order only)."""
        if self.playbook.order != "casebook":
            return None  # a listed order is the playbook author's
        for name in pending[1:]:
            technique = self.parts.techniques[name]
            if step in technique.diagnoses_before and self._blocked(technique) is None:
                if technique.applicable(self._context(name)).applicable:
                    return name
        return None

    def _resumed_steps(self, steps: list[str]) -> list[str]:
        """The steps the line being walked still runs, given the rounds it already has (`resumed_steps`)."""
        reopens = ({n: t.reopens for n, t in self.parts.techniques.items()}
                   if self.playbook.order == "casebook" else {})
        return resumed_steps(self.job.rounds, self.state.line, self.state.path, steps, reopens)

    def _ran_on_line(self, name: str) -> bool:
        """Whether `name` has a round on the line being walked."""
        return any(r.technique == name and r.line == self.state.line and r.delta is not None for r in self.job.rounds)

    def _reopened(self, name: str, pending: list[str]) -> list[str]:
        """The earlier steps a kept change of `name` sends back to (`Technique.reopens`; casebook order only):
        those that measured a round on this line and are not still to come."""
        if self.playbook.order != "casebook":
            return []  # a listed order is the playbook author's
        measured = {r.technique for r in self.job.rounds if r.line == self.state.line and r.results}
        return [s for s in self.parts.techniques[name].reopens
                if s in self.parts.techniques and s in measured and s not in pending]

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
        self.check_stop()
        if self.state.errors_in_a_row >= MAX_CONSECUTIVE_ERRORS:
            return "measurement keeps failing"
        spent = self.budget.exhausted()
        if spent is not None:
            return spent
        if not self.state.baseline:
            return None
        checks = policy_slo_checks(self.parts.policy, self.state.baseline, self.initial.slo)
        if all(c.met for c in checks) and objective_met(self.initial.objective, self.initial.slo,
                                                        self.state.baseline):
            return "SLO and objective met"
        return None

    # -- steps and groups ---------------------------------------------------------------------------------

    async def _run_step(self, name: str) -> None:
        technique = self.parts.techniques[name]
        ran = 0
        while self._stop_reason() is None:
            blocked = self._blocked(technique)
            ctx = self._context(name)
            applicability = technique.applicable(ctx) if blocked is None else None
            # After its own rounds (in this walk, or before a restart), a technique that no longer applies or
            # has nothing left to try is simply done.
            done = ran > 0 or self._ran_on_line(name)
            if blocked is not None or (applicability is not None and not applicability.applicable):
                if not done:
                    await self._skip(name, blocked or (applicability.reason if applicability else ""))
                return
            candidates = [d for d in technique.propose(ctx) if delta_key(d) not in self.state.tried]
            if not candidates:
                if not done:
                    await self._skip(name, "applicable, but every candidate it proposes was already tried")
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

    async def _skip(self, name: str, reason: str) -> None:
        """Record and journal that `name` runs no round on this line (a resumed line does not judge it again);
        the report says once a branch's skip for the main line's reason (`shown_skips`)."""
        line = self.state.line
        step = SkippedStep(technique=name, reason=reason if line is None else branch_prefix(line) + reason, line=line)
        self.state.skipped.append(step)
        await self._event("step_skipped", technique=name, message=step.reason, line=line)

    # -- context and finish -------------------------------------------------------------------------------

    def _context(self, name: str) -> TuningContext:
        scenario = self.state.accepted
        # Only decided rounds: a resumed job proposes from exactly what the first attempt knew.
        history = [mean_result(r.results) for r in self.job.rounds
                   if r.results and r.state in (RoundState.FINISHED, RoundState.FAILED)]
        return TuningContext(scenario=scenario, model=self._model(scenario.model),
                             baseline=mean_result(self.state.baseline) if self.state.baseline else None,
                             history=history, tried=sorted(self.state.tried),
                             options=dict(self.playbook.options.get(name, {})))

    def _model(self, name: str) -> ModelSpec:
        if name not in self._models:
            self._models[name] = self.parts.resolve(name)
        return self._models[name]

    async def _even_line_ends(self) -> None:
        """Measure every line's end on as many seeds as the most measured one before the ends are compared.

        The policy judges two ends on the seeds both were measured on; an end measured on 2 seeds against one
        extended to 6 would be judged on 2, where a branch 23% ahead and 38% closer to a missed target reads as
        noise (casebook case 1 at 512 streams). The extra seeds are charged to the GPU-minute budget like any
        repeat and use no round (a walk that spent its rounds is still evened); an end whose extra repeat fails
        keeps the seeds it had.
        """
        current = self.state.snapshot()
        lines = [line for line in [*self.state.ends, current] if line.baseline]
        most = max((len(line.baseline) for line in lines), default=0)
        budget = self.budget
        for line in lines:
            have = len(line.baseline)
            spent = budget.max_gpu_minutes is not None and budget.gpu_minutes_used >= budget.max_gpu_minutes
            if have >= most or spent:
                continue
            more = await self.measure_seeds(line.accepted, self.seeds(have, most - have))
            if any(r.status is not RoundStatus.OK for r in more):
                continue
            line.baseline = [*line.baseline, *more]
            if line is current:
                self.state.baseline = list(line.baseline)

    async def _finish(self, stopped: Ending | None) -> TuningOutcome:
        """Close what is open, decide the ending once, tell the journal and the plugins, build the outcome."""
        await self._close_open_rounds(paused=stopped is not None and stopped.state is JobState.PAUSED)
        # Nothing measured, nothing to assess: the report says the starting deployment was never measured.
        if stopped is None and self.state.ends:
            choose_line(self.state, self.job.rounds, self.parts.policy, self.initial)
        checks = (policy_slo_checks(self.parts.policy, self.state.baseline, self.initial.slo)
                  if self.state.baseline else [])
        if stopped is None and not all(c.met for c in checks):
            checks = fall_back_to_best_passing(self.state, self.job.rounds, self.parts.policy, self.initial) or checks
        ending = stopped or decide_ending(self.state, checks, MAX_CONSECUTIVE_ERRORS, self.job.rounds,
                                          self.budget, self._course_reason or self.steps_done_reason())
        if ending.state is JobState.SLO_NOT_MET:
            self.state.latency_capacity = await latency_capacity(
                self.state.accepted, self.state.baseline, checks, self.parts.round_context, self.parts.policy,
                self.seed)
            self.state.gated_levers = await gated_levers(self.state.accepted, checks, self.job.rounds,
                                                         self.parts.round_context, self.parts.policy, self.seed)
        move_job(self.job, ending.state, ending.reason)
        outcome = build_outcome(self.job, self.initial, self.state, self.budget, checks, seed=self.seed)
        await self._event("job_finished", state=ending.state.value, message=ending.reason)
        return outcome

    def steps_done_reason(self) -> str:
        try:
            return self._stop_reason() or "every step of the playbook ran"
        except Stopped:
            return "every step of the playbook ran"

    async def _close_open_rounds(self, *, paused: bool) -> None:
        """A round cut off by a stop is interrupted; measured alternatives are kept for a resume, or closed."""
        for round_ in self.job.rounds:
            if round_.state in (RoundState.PENDING, RoundState.RUNNING):
                move_round(round_, RoundState.INTERRUPTED)
                await self._store(round_)
            elif round_.state is RoundState.MEASURED and not paused:
                round_.decision = Decision(verdict=Verdict.ROLLBACK, pattern=Pattern.NOT_APPLICABLE, policy="engine",
                                           reasons=["the job ended before this round's group was decided"])
                move_round(round_, RoundState.FINISHED)
                await self._store(round_)

    async def _event(self, kind: Any, **fields: Any) -> None:
        event = self._job_event(kind, **fields)
        await self.journal_event(event)
        self.events.emit(event)

    def _job_event(self, kind: Any, **fields: Any) -> JobEvent:
        done = sum(1 for r in self.job.rounds if r.state.is_terminal())
        return JobEvent(kind=kind, job_id=self.job.id, rounds_done=done, rounds_budget=self.budget.max_rounds,
                        **fields)


__all__ = ["MAX_CONSECUTIVE_ERRORS", "MAX_REPEAT_FACTOR", "EngineParts", "TuningEngine", "round_key"]
