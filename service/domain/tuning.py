"""Tuning records: config deltas, decisions, rounds and jobs, with state enums that carry behaviour."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

import msgspec

from service.domain.bench import RoundResult
from service.domain.calibration import Calibration
from service.domain.deployment import Deployment, FlagValue, RouterConfig
from service.domain.scenario import Scenario
from service.domain.workload import WorkloadProfile


class ConfigDelta(msgspec.Struct, frozen=True, kw_only=True):
    """What one candidate changes, with a sentence a person can check."""

    technique: str
    summary: str
    set_server: dict[str, FlagValue | None] = msgspec.field(default_factory=dict)
    roles: list[str] = msgspec.field(default_factory=lambda: ["unified", "prefill", "decode"])
    deployment: Deployment | None = None
    router: RouterConfig | None = None
    workload: WorkloadProfile | None = None
    client_concurrency: int | None = None
    model: str | None = None
    # Files a person runs besides the launch (warm-up scripts, prompt templates): name -> content.
    artifacts: dict[str, str] = msgspec.field(default_factory=dict)
    # Set when the change may cost output quality and no passing quality result covers it: the sentence
    # says what to check. Such a change is to be adopted only after a quality check (casebook case 1, FP8).
    quality_check: str | None = None
    # The change only turns off a feature the technique judged of no use here (HiCache with nothing to restore,
    # speculation that does not pay, DP attention or PD below scale): kept when it measures the same as the
    # baseline (`Decision.same_as_baseline`), the simpler deployment for the same figures.
    simplifies: bool = False


class Verdict(StrEnum):
    ACCEPT = "accept"
    KEEP_TRADEOFF = "keep_tradeoff"
    ROLLBACK = "rollback"
    INCONCLUSIVE = "inconclusive"
    ERROR = "error"

    def keeps_candidate(self) -> bool:
        return self in (Verdict.ACCEPT, Verdict.KEEP_TRADEOFF)


class Pattern(StrEnum):
    """The casebook's metric-change pattern table, and the combinations it leaves unnamed.

    Each value says only what the round's figures show (output throughput, median TTFT, p99 TTFT, median
    ITL, beyond their noise band): docs/policies.md gives the rule.
    """

    THROUGHPUT_UP_LATENCY_UP = "throughput_up_latency_up"
    THROUGHPUT_UP_LATENCY_DOWN = "throughput_up_latency_down"
    THROUGHPUT_UP = "throughput_up_latency_flat"
    THROUGHPUT_DOWN_TAIL_DOWN = "throughput_down_tail_down_a_lot"
    THROUGHPUT_DOWN = "throughput_down_latency_flat"
    MEDIAN_FLAT_P99_DOWN = "median_flat_p99_down"
    LATENCY_DOWN = "throughput_flat_latency_down"
    LATENCY_TRADEOFF = "throughput_flat_latency_traded"
    LATENCY_UP = "throughput_flat_latency_up"
    THROUGHPUT_DOWN_LATENCY_UP = "throughput_down_latency_up"
    NOTHING_CHANGED = "nothing_changed"
    NOT_APPLICABLE = "not_applicable"


class SLOCheck(msgspec.Struct, frozen=True, kw_only=True):
    """One SLO target checked against one round: `actual` is None when the round lacks the figure."""

    name: str
    target: float
    actual: float | None
    met: bool


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """A policy's judgement of a candidate round against the baseline."""

    verdict: Verdict
    pattern: Pattern
    reasons: list[str]
    figures: dict[str, float] = msgspec.field(default_factory=dict)
    policy: str = ""
    # The SLO assessment both sides were judged by (repeats averaged), for the report.
    slo_checks: list[SLOCheck] = msgspec.field(default_factory=list)
    baseline_slo_checks: list[SLOCheck] = msgspec.field(default_factory=list)
    # More repeats could change this decision (a change large enough to matter is not yet beyond noise):
    # the engine measures more seeds on both sides, within its budget, and asks again.
    unsettled: bool = False
    # Not kept, but a reading of the noise (an uncertain change read as real, an SLO target within noise read
    # as met or missed) would keep it: a prediction so judged is measured, never closed on the prediction.
    noise_could_keep: bool = False
    # Rolled back only because the candidate misses an SLO target the baseline met, while it improves the
    # objective beyond noise: the engine keeps it as a branch of the search (`service.engine.beam`).
    slo_vetoed_win: bool = False
    # Every figure the policy compares within noise of the baseline and every SLO target the baseline met still
    # met: a change that only simplifies the deployment (`ConfigDelta.simplifies`) is kept on it.
    same_as_baseline: bool = False


class RoundState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    # Measured, waiting for the decision of its group of alternatives (its results are kept on a restart).
    MEASURED = "measured"
    FINISHED = "finished"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    def is_terminal(self) -> bool:
        return self in (RoundState.FINISHED, RoundState.FAILED, RoundState.INTERRUPTED)


class Round(msgspec.Struct, kw_only=True):
    """One benchmark round of a job; finished rounds never change, a retry is a new round."""

    index: int
    technique: str
    delta: ConfigDelta | None
    state: RoundState = RoundState.PENDING
    results: list[RoundResult] = msgspec.field(default_factory=list)
    decision: Decision | None = None
    retry_of: int | None = None
    # The search line this round was tried on: None for the main line, else the index of the round whose
    # SLO-vetoed candidate started the branch (`service.engine.beam`).
    line: int | None = None
    # The round whose deployment this round's delta changed (the last round kept on its line before it).
    base: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    SUCCEEDED = "succeeded"
    # Ran to its end, but the final deployment misses an SLO target (the report says what would meet it).
    SLO_NOT_MET = "slo_not_met"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def is_terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.SLO_NOT_MET, JobState.FAILED, JobState.CANCELLED)


class SkippedStep(msgspec.Struct, frozen=True, kw_only=True):
    """A playbook step that ran no round on a search line, with the casebook rule that said so."""

    technique: str
    reason: str
    # The branch's root round when it was skipped on a branch (its reason then says so); None: the main line.
    line: int | None = None


class Job(msgspec.Struct, kw_only=True):
    """A tuning job: a playbook applied to a scenario on a runner."""

    id: str
    playbook: str
    runner: str
    state: JobState = JobState.QUEUED
    scenario: Scenario | None = None
    rounds: list[Round] = msgspec.field(default_factory=list)
    created_at: datetime | None = None
    finished_at: datetime | None = None
    stop_reason: str | None = None
    kind: Literal["tune", "round"] = "tune"
    seed: int = 0
    repeats: int | None = None
    # The stored calibrations when the job started: simulated rounds apply the one that matches.
    calibrations: list[Calibration] = msgspec.field(default_factory=list)
    # The steps the journal says were skipped before a restart: a resumed job does not judge them again.
    skipped: list[SkippedStep] = msgspec.field(default_factory=list)
