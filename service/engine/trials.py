"""Measuring and judging rounds, writing each step to the journal, and stopping a job on request.

Part of `TuningEngine` (its base class), kept apart so the loop reads as the casebook's procedure.

A stop (`stop(state, reason)`, callable from any thread or a signal handler) takes effect at the next safe
point: before a round or repeat starts, or at once when a measurement is running (it is cancelled, and the
round recorded as interrupted). A journal write is never cut off half-way.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from service.components import Prediction
from service.domain import Decision, JobState, Pattern, Round, RoundResult, RoundState, RoundStatus, Scenario, Verdict
from service.engine.ending import Ending
from service.engine.events import JobEvent
from service.engine.screen import Screen, screen, widened
from service.engine.states import move_round

if TYPE_CHECKING:
    from service.domain import SLO, Job, Objective
    from service.engine.budget import Budget
    from service.engine.journal import RoundJournal
    from service.engine.loop import EngineParts
    from service.engine.parallel import Prefetch
    from service.engine.state import EngineState


# An inconclusive round is measured again on as many new seeds (both sides), up to this many times the
# playbook's repeats, and decided on all of them (sequential testing, bounded by the budget).
MAX_REPEAT_FACTOR = 3
# ...and on at least this many seeds: from three seeds a paired t over them judges alone, with k - 1 degrees
# of freedom, and at two it cannot reach the policy's level (EAGLE3 on a 9B at +58% throughput, 95% CI
# +53%..+65% over 3 seeds, stayed "uncertain" at a Holm-adjusted p of 0.0024; at 4 seeds it is 0.00007).
MIN_SEQUENTIAL_SEEDS = 5


class Stopped(Exception):  # noqa: N818 - it is the condition, not a failure
    """A stop was requested; the engine unwinds to its ending."""


class JournalFailed(Exception):
    """The journal could not store an entry (lease lost, pipe closed): the job cannot go on here."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class RoundMeasurer:
    """Rounds, repeats and decisions of one job, and the stop request."""

    parts: EngineParts
    journal: RoundJournal
    state: EngineState
    budget: Budget
    job: Job
    initial: Scenario
    seed: int
    repeats: int
    prefetch: Prefetch

    def _init_stop(self) -> None:
        self._stop: Ending | None = None
        self._measuring = False
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: int | None = None

    def _bind_stop(self) -> None:
        self._task = asyncio.current_task()
        self._loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()

    def stop(self, state: JobState, reason: str) -> None:
        """Ask the job to end as `state` (cancelled, or paused to be resumed); safe from any thread."""
        if self._stop is None:  # the first request wins (no lock: a signal handler may call this)
            self._stop = Ending(state, reason)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                if threading.get_ident() == self._thread:  # a signal handler on the engine's own thread
                    self._interrupt_measurement()
                else:
                    loop.call_soon_threadsafe(self._interrupt_measurement)
            except RuntimeError:  # the loop closed meanwhile: the job has ended
                pass

    def _interrupt_measurement(self) -> None:
        if not self._measuring or self._task is None or self._task.done():
            return
        try:
            running = asyncio.current_task() is self._task
        except RuntimeError:  # no loop running on this thread
            running = False
        if running:
            # A signal handler that runs inside the job's own step (a round computed in this process): a
            # cancel now would stay pending and surface at an await after the job has ended, failing it.
            # The computation cannot be cut anyway; the stop takes effect at the next safe point.
            return
        self._task.cancel()

    def check_stop(self) -> None:
        """Raise `Stopped` when a stop was requested (a safe point: nothing is half-written)."""
        if self._stop is not None:
            raise Stopped

    def _stop_ending(self) -> Ending:
        return self._stop or Ending(JobState.CANCELLED, "cancelled")

    # -- the journal --------------------------------------------------------------------------------------

    async def _store(self, round_: Round) -> None:
        try:
            await self.journal.record_round(round_)
        except Exception as exc:
            raise JournalFailed(exc) from exc

    async def journal_event(self, event: JobEvent) -> None:
        try:
            await self.journal.record_event(event)
        except Exception as exc:
            raise JournalFailed(exc) from exc

    async def _start_round(self, round_: Round) -> None:
        move_round(round_, RoundState.RUNNING)
        await self._store(round_)
        self.events.emit(self._job_event("round_started", round_index=round_.index, technique=round_.technique,
                                         message=round_.delta.summary if round_.delta else "baseline"))

    async def _measured(self, round_: Round, results: list[RoundResult]) -> None:
        """An alternative's measurement is stored before its group is decided."""
        round_.results = list(results)
        move_round(round_, RoundState.MEASURED)
        await self._store(round_)
        self.events.emit(self._job_event("round_measured", round_index=round_.index, technique=round_.technique,
                                         message=f"{len(results)} repeats measured"))

    async def _close_predicted(self, round_: Round, screened: Screen, why: str) -> None:
        """Close a candidate on its prediction: a rollback no measurement was spent on."""
        round_.decision = screened.closing(why)
        if round_.state is RoundState.PENDING:
            move_round(round_, RoundState.RUNNING)
        move_round(round_, RoundState.FINISHED)
        await self._store(round_)
        self.events.emit(self._job_event("round_finished", round_index=round_.index, technique=round_.technique,
                                         verdict=Verdict.ROLLBACK.value, message=round_.decision.reasons[0]))

    async def screen_group(self, candidates: list[Scenario | None], techniques: list[str]) -> list[Screen | None]:
        """The runner's predictions of a group's candidates against the accepted baseline on this job's seeds
        (None for a candidate not to screen, and for all when the runner does not predict), each trusted no
        more than the job's earlier predictions of measured rounds earned (`screen.widened`)."""
        predict = getattr(self.parts.runner, "predict", None)  # a runner need not derive from `Runner`
        context = self.parts.round_context
        if predict is None or not any(c is not None for c in candidates):
            return [None for _ in candidates]
        seeds = self.seeds()
        baseline = await predict(self.state.accepted, seeds, context)
        if baseline is None or not _usable(baseline):
            return [None for _ in candidates]
        errors = context.measured.prediction_errors if context is not None else []
        screens: list[Screen | None] = []
        for candidate, technique in zip(candidates, techniques, strict=True):
            predicted = None if candidate is None else await predict(candidate, seeds, context)
            screens.append(None if predicted is None or not _usable(predicted) else screen(
                self.parts.policy.decide, baseline, widened(predicted, technique, errors), self.initial.slo,
                self.initial.objective))
        return screens

    # -- measuring ----------------------------------------------------------------------------------------

    def seeds(self, start: int = 0, count: int | None = None) -> list[int]:
        # The same seeds for every round: baseline and candidate see the same traffic (paired comparison).
        return [self.seed + r for r in range(start, start + (self.repeats if count is None else count))]

    async def measure_seeds(self, scenario: Scenario, seeds: list[int]) -> list[RoundResult]:
        """One result per seed, charged to the budget; stops at the first failed repeat or a stop request."""
        results: list[RoundResult] = []
        self.prefetch.start(scenario, seeds)  # a runner with room for several rounds measures them at once
        for seed in seeds:
            self.check_stop()
            self._measuring = True
            try:
                result = await self.prefetch.take(scenario, seed)
            finally:
                self._measuring = False
            self.budget.charge([result], scenario.deployment.total_gpus())
            results.append(result)
            if result.status is not RoundStatus.OK:
                break
        return results

    async def _measure_until_decided(self, round_: Round, candidate: Scenario) -> tuple[list[RoundResult], Decision]:
        """Measure a candidate; while the policy finds it inconclusive or unsettled, add seeds to both sides and
        decide again on all of them.

        The baseline gets the same new seeds as the candidate, so the comparison stays paired seed for seed.
        A failed baseline repeat ends the extension and leaves the inconclusive decision standing.
        """
        await self._start_round(round_)
        results = await self.measure_seeds(candidate, self.seeds())
        decision = self._decide(results)
        first = len(results)
        limit = max(self.repeats * MAX_REPEAT_FACTOR, MIN_SEQUENTIAL_SEEDS)
        while ((decision.verdict is Verdict.INCONCLUSIVE or decision.unsettled) and len(results) < limit
               and self.budget.exhausted() is None):
            have = len(self.state.baseline)
            wanted = len(results) + self.repeats
            if have < wanted:
                self.prefetch.start(self.state.accepted, self.seeds(have, wanted - have))
            self.prefetch.start(candidate, self.seeds(len(results)))
            if not await self._baseline_seeds(wanted):
                break
            results = [*results, *await self.measure_seeds(candidate, self.seeds(len(results)))]
            decision = self._decide(results)
        if len(results) > first:
            note = f"decided on {len(results)} seeds per side: {first} left it to noise"
            decision = msgspec.structs.replace(decision, reasons=[*decision.reasons, note])
        return results, decision

    async def decide_on(self, results: list[RoundResult], note: str) -> Decision:
        """Judge results measured earlier (a reused or resumed round) against the baseline on the same seeds."""
        if not await self._baseline_seeds(len(results)):
            return Decision(verdict=Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE, policy="engine",
                            reasons=["the baseline could not be measured again on the seeds of this round"])
        decision = self._decide(results)
        return msgspec.structs.replace(decision, reasons=[*decision.reasons, note])

    async def _baseline_seeds(self, count: int) -> bool:
        """Make sure the accepted baseline was measured on the first `count` seeds; False if a repeat fails."""
        have = len(self.state.baseline)
        if have >= count:
            return True
        more = await self.measure_seeds(self.state.accepted, self.seeds(have, count - have))
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
        slo: SLO = self.initial.slo
        objective: Objective = self.initial.objective
        try:
            return self.parts.policy.decide(baseline, results, slo, objective)
        except Exception as exc:  # a policy bug must fail closed, like a failed measurement
            return Decision(verdict=Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE, policy="engine",
                            reasons=[f"policy {self.parts.policy.name!r} failed: {exc}"])

    # Provided by TuningEngine.
    events: Any

    def _job_event(self, kind: Any, **fields: Any) -> JobEvent:  # pragma: no cover - overridden
        raise NotImplementedError


def _usable(prediction: Prediction) -> bool:
    """A prediction the policy can read: every seed's simulation completed."""
    return bool(prediction.results) and all(r.status is RoundStatus.OK for r in prediction.results)
