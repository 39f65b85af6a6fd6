"""A job's measured rounds: round 0 on the starting deployment, then each candidate's.

A candidate is vetted before any GPU time (the doors' check, the quality gate), measured once per job (a
deployment measured earlier is reused), judged against the accepted baseline on the same seeds, and the
alternatives of one proposal are decided together: the best one the policy keeps is adopted
(`service.engine.alternatives`), and one kept out only by the SLO or noise is offered as a branch
(`service.engine.beam`). The starting deployment is refused like a candidate when it could never launch.
"""

from __future__ import annotations

import msgspec

from service.components import Playbook
from service.domain import ConfigDelta, Decision, Pattern, Round, RoundResult, RoundState, Scenario, Verdict
from service.engine.alternatives import Trial, Vetted, pick_winner, simpler_when_same, superseded
from service.engine.beam import branch_line, worth_a_branch
from service.engine.delta import DeltaError, apply_delta, delta_key
from service.engine.quality import check_quality, gate_required
from service.engine.screen import Screen, change_error, closed_by_prediction, with_prediction_error
from service.engine.state import BASELINE_KEY, fingerprint
from service.engine.states import move_round
from service.engine.trials import RoundMeasurer

# Casebook: "a round whose measurement failed" never counts; after this many in a row the job fails.
MAX_CONSECUTIVE_ERRORS = 4


class CandidateRounds(RoundMeasurer):
    """Round 0 and the candidates' rounds of one job: vet, measure once, judge, adopt the winner."""

    playbook: Playbook

    async def _try_group(self, deltas: list[ConfigDelta]) -> None:
        """Run each alternative against the same accepted baseline; adopt the best one the policy kept.

        Each alternative is journaled as measured as soon as it is, so a restart mid-group keeps it.
        """
        trials: list[Trial] = []
        await self.prefetch.size_for(self.state.accepted)
        vetted = [self._vet(delta) for delta in deltas]  # the accepted baseline is the same for the whole group
        fresh = [vet.candidate if (vet.candidate is not None and vet.closed is None and delta_key(delta) not in
                                   self.state.awaiting_decision and fingerprint(vet.candidate) not in self.state.measured)
                 else None for delta, vet in zip(deltas, vetted, strict=True)]
        screens = await self.screen_group(fresh, [delta.technique for delta in deltas])  # a predicting runner's reading (service.engine.screen)
        top_k = min((s.prediction.measure_top_k for s in screens if s is not None), default=1)
        # A removal predicted to measure the same as the baseline would be kept once measured (simpler_when_same).
        same = {i for i, s in enumerate(screens) if s is not None and deltas[i].simplifies and s.decision.same_as_baseline}
        predicted = {i: why for i, why in closed_by_prediction(screens, top_k).items() if i not in same}
        for i, candidate in enumerate(fresh):
            if candidate is not None and i not in predicted:
                self.prefetch.start(candidate, self.seeds())
        try:
            for i, (delta, vet) in enumerate(zip(deltas, vetted, strict=True)):
                if trials and self._stop_reason() is not None:
                    break  # the budget ran out or measurement keeps failing: judge what was measured
                trial = await self._try(delta, vet, screens[i], predicted.get(i))
                if trial is not None:
                    trials.append(trial)
                    if trial.results:
                        failed = trial.decision.verdict is Verdict.ERROR
                        self.state.errors_in_a_row = self.state.errors_in_a_row + 1 if failed else 0
        finally:
            self.prefetch.discard()  # alternatives the walk stopped before are not measured to the end
        await self._decide_group(trials)

    def _vet(self, delta: ConfigDelta) -> Vetted:
        """The candidate of `delta` on the accepted baseline, or why it is closed without measuring."""
        try:
            candidate = apply_delta(self.state.accepted, delta)
        except DeltaError as exc:
            return Vetted(None, (Verdict.ERROR, f"the candidate is not a valid configuration: {exc}"))
        refused = self._refusal(candidate)
        if refused:
            return Vetted(candidate, (Verdict.ROLLBACK, f"refused before launch, never run: {refused}"))
        if not gate_required(delta, self.playbook.require_quality_for):
            return Vetted(candidate)
        gate = check_quality(delta, self.state.accepted, self.state.accepted.quality, self.playbook.quality_tolerance)
        # Quality inputs are fixed: a candidate that can never be accepted costs no GPU time.
        return Vetted(candidate, None if gate.passed else (Verdict.ROLLBACK, gate.reason), gate)

    async def _decide_group(self, trials: list[Trial]) -> None:
        winner = pick_winner(trials, self.initial.slo, self.initial.objective, self.parts.policy)
        for trial in trials:
            decision = trial.decision
            if winner is not None and trial is not winner and decision.verdict.keeps_candidate():
                decision = superseded(trial, winner, self.initial.slo, self.initial.objective)
            await self._record(trial.round_, trial.results, decision)
            if worth_a_branch(trial.decision) and trial.results and self.playbook.beam_width > 1:
                self._offer_branch(trial)
        if winner is not None:
            self._adopt(winner)

    def _offer_branch(self, trial: Trial) -> None:
        """Keep a candidate only the SLO or noise kept out as a branch the later techniques are tried on."""
        line = branch_line(self.job.rounds, trial.round_, trial.candidate, self.state.lineage[trial.round_.index],
                           self.state.inherited, self.state.ran)
        self.state.offers.append(line)
        self.state.offers.sort(key=lambda offer: offer.root or 0)  # earliest root first

    async def _try(self, delta: ConfigDelta, vet: Vetted, screened: Screen | None = None,
                   predicted: str | None = None) -> Trial | None:
        """Measure one candidate and let the policy judge it; None when it was closed without measuring."""
        key = delta_key(delta)
        self.state.tried.add(key)
        waiting = self.state.awaiting_decision.pop(key, None)
        round_ = waiting or self._new_round(delta.technique, delta, key)
        if vet.closed is not None or vet.candidate is None:
            verdict, reason = vet.closed or (Verdict.ERROR, "no candidate")
            await self._close_unmeasured(round_, verdict, reason)
            return None
        if screened is not None and predicted is not None:
            await self._close_predicted(round_, screened, predicted)
            return None
        candidate, gate = vet.candidate, vet.gate
        results, decision = await self._results_and_decision(round_, candidate, waiting is not None)
        if screened is not None:
            decision = with_prediction_error(decision, screened, results, self.state.baseline)
            error, context = change_error(decision), self.parts.round_context
            if error is not None and context is not None:
                context.measured.prediction_errors.append((delta.technique, error))
        self.state.scenarios[round_.index] = candidate
        self.state.lineage[round_.index] = list(self.state.path)
        if gate is not None and decision.verdict.keeps_candidate():
            decision = msgspec.structs.replace(decision, reasons=[*decision.reasons, gate.reason])
        return Trial(round_=round_, delta=delta, candidate=candidate, results=results,
                     decision=simpler_when_same(delta, decision))

    async def _results_and_decision(self, round_: Round, candidate: Scenario,
                                    resumed: bool) -> tuple[list[RoundResult], Decision]:
        """Measure the candidate, or reuse a measurement of the same deployment made earlier in this job."""
        if resumed:
            results = list(round_.results)
            decision = await self.decide_on(results, "measured before the job was restarted; its results are kept")
            return results, decision
        earlier = self.state.measured.get(fingerprint(candidate))
        if earlier is not None:
            results = list(self.job.rounds[earlier].results)
            await self._start_round(round_)
            decision = await self.decide_on(results, f"the same deployment as round {earlier}: its measurement "
                                                     "is reused, no new run")
            await self._measured(round_, results)
            return results, decision
        results, decision = await self._measure_until_decided(round_, candidate)
        self.budget.count_round()
        self.state.measured.setdefault(fingerprint(candidate), round_.index)
        await self._measured(round_, results)
        return results, decision

    def _refusal(self, candidate: Scenario) -> str:
        if self.parts.refuse is None:
            return ""
        try:
            return "; ".join(self.parts.refuse(candidate))
        except Exception as exc:  # a validator bug must not let a candidate through unchecked
            return f"the candidate could not be validated ({type(exc).__name__}: {exc})"

    # -- rounds -------------------------------------------------------------------------------------------

    def _new_round(self, technique: str, delta: ConfigDelta | None, key: str) -> Round:
        round_ = Round(index=len(self.job.rounds), technique=technique, delta=delta,
                       retry_of=self.state.interrupted.pop(key, None), line=self.state.line,
                       base=self.state.path[-1] if delta is not None and self.state.path else None)
        self.job.rounds.append(round_)
        return round_

    async def _close_unmeasured(self, round_: Round, verdict: Verdict, reason: str) -> None:
        round_.decision = Decision(verdict=verdict, pattern=Pattern.NOT_APPLICABLE, reasons=[reason],
                                   policy="engine")
        if round_.state is RoundState.PENDING:
            move_round(round_, RoundState.RUNNING)
        move_round(round_, RoundState.FAILED if verdict is Verdict.ERROR else RoundState.FINISHED)
        await self._store(round_)
        self.events.emit(self._job_event("round_finished", round_index=round_.index, technique=round_.technique,
                                         verdict=verdict.value, message=reason))

    async def _record(self, round_: Round, results: list[RoundResult], decision: Decision) -> None:
        """Close a measured round with its final decision (never changed afterwards)."""
        round_.results = results
        round_.decision = decision
        move_round(round_, RoundState.FAILED if decision.verdict is Verdict.ERROR else RoundState.FINISHED)
        await self._store(round_)
        self.events.emit(self._job_event("round_finished", round_index=round_.index, technique=round_.technique,
                                         verdict=decision.verdict.value, message="; ".join(decision.reasons[:1])))

    def _adopt(self, trial: Trial) -> None:
        """The kept candidate becomes the baseline every later candidate is judged against."""
        self.state.accepted = trial.candidate
        self.state.baseline = trial.results
        self.state.kept.append(trial.round_.technique)
        self.state.path.append(trial.round_.index)

    async def _measure_baseline(self) -> bool:
        """Round 0 measures the starting deployment; a failed measurement is retried as a new round."""
        failed = [r.index for r in self.job.rounds if r.technique == "baseline" and r.state is RoundState.FAILED]
        retry_of = self.state.interrupted.pop(BASELINE_KEY, failed[-1] if failed else None)
        refused = self._refusal(self.state.accepted)
        if refused:
            # A starting deployment the doors would refuse (a scenario handed to the engine directly, or stored
            # before a check existed) is never simulated as if it launched: the job fails and names the fix.
            round_ = self._new_round("baseline", None, BASELINE_KEY)
            round_.retry_of = retry_of
            self.state.baseline_refused = refused
            await self._close_unmeasured(round_, Verdict.ERROR, f"refused before launch, never run: {refused}")
            return False
        while self.state.errors_in_a_row < MAX_CONSECUTIVE_ERRORS:
            self.check_stop()
            round_ = self._new_round("baseline", None, BASELINE_KEY)
            round_.retry_of = retry_of
            await self._start_round(round_)
            results = await self.measure_seeds(self.state.accepted, self.seeds())
            ok = all(r.status.value == "ok" for r in results)
            reason = "starting point" if ok else (results[-1].error or "baseline measurement failed")
            decision = Decision(verdict=Verdict.ACCEPT if ok else Verdict.ERROR, pattern=Pattern.NOT_APPLICABLE,
                                reasons=[reason], policy="engine")
            await self._record(round_, results, decision)
            if ok:
                self.state.baseline = results
                self.state.baseline_measured = True
                self.state.errors_in_a_row = 0
                self.state.measured.setdefault(fingerprint(self.state.accepted), round_.index)
                self.state.scenarios[round_.index] = self.state.accepted
                self.state.lineage[round_.index] = []
                self.state.path = [round_.index]
                return True
            self.state.errors_in_a_row += 1
            retry_of = round_.index
            if any(r.config_fault for r in results):
                # Out of memory at load, a refused flag, no engine: the same launch fails the same way again.
                break
        return False

    # Provided by TuningEngine.
    def _stop_reason(self) -> str | None:  # pragma: no cover - overridden
        raise NotImplementedError
