"""What a diagnosis returns: findings in the casebook's reading order, and the technique to try next."""

from __future__ import annotations

from typing import Literal

import msgspec

from service.domain import SLO, BenchFigures, ServerMetrics

Severity = Literal["info", "warning", "critical"]
# A reading is a figure worth knowing (the baseline); a symptom is a target missed; a cause is a
# bottleneck the figures point at. The next technique addresses a cause before a symptom.
FindingKind = Literal["reading", "symptom", "cause"]
Evidence = dict[str, float | int | str | None]


class Finding(msgspec.Struct, frozen=True, kw_only=True):
    """One observation, with the figures it read and the casebook rule that interprets them.

    Attributes:
        id: Stable snake_case name (`ttft_tail_blocking`, `kv_cache_shortage`, ...).
        step: Position in the casebook's reading order (1 = concurrency vs max concurrency).
        severity: `info`, `warning`, or `critical` (a stated target is missed).
        kind: `reading`, `symptom` or `cause`.
        title: One line a person can check against the figures.
        evidence: The figures read, under their bench_serving or Prometheus names.
        rule: The casebook sentence the finding applies, quoted.
        source: Where in the casebook the rule is written.
        technique: The technique that addresses it, or None for a plain reading.
        alternatives: Other techniques the casebook names for the same finding.
    """

    id: str
    step: int
    severity: Severity
    kind: FindingKind
    title: str
    evidence: Evidence
    rule: str
    source: str
    technique: str | None = None
    alternatives: list[str] = msgspec.field(default_factory=list)


class DiagnosisContext(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What bench_serving does not print but the casebook's diagnosis uses.

    Attributes:
        slo: Targets to check the figures against (TTFT p95, failure rate, deadline...).
        failure_rate: Share of outputs that failed to parse or validate (casebook case 4 audits it
            separately, since bench_serving does not print it).
        model_is_moe: Whether the served model is a mixture of experts.
        workers: Serving instances behind the router (1 = a single instance).
        tp_size: Tensor-parallel size of one instance.
        ep_size: Expert-parallel size of one instance.
        router_policy: The router's policy when there is a router.
        server_log: SGLang server log text (`preempting` warnings, speculative accept lengths).
    """

    slo: SLO | None = None
    failure_rate: float | None = None
    model_is_moe: bool | None = None
    workers: int | None = None
    tp_size: int | None = None
    ep_size: int | None = None
    router_policy: str | None = None
    server_log: str | None = None


class Diagnosis(msgspec.Struct, kw_only=True):
    """The casebook's reading of one benchmark: findings in reading order and the next technique.

    Attributes:
        findings: Every finding, in the casebook's reading order.
        next_technique: The technique to try next (None when nothing needs fixing).
        next_reason: Why that technique, in one sentence.
        summary: A few lines a person reads first.
        bench: The bench_serving figures read (fields not printed stay 0).
        bench_fields: Which bench_serving fields the input actually carried.
        max_concurrency: `Max request concurrency` as printed, when set.
        server: Server metrics read from the /metrics scrape, when one was given.
        missing: Inputs that would let the diagnosis read further, and what each would add.
    """

    findings: list[Finding]
    next_technique: str | None
    next_reason: str
    summary: str
    bench: BenchFigures
    bench_fields: list[str]
    max_concurrency: int | None = None
    server: ServerMetrics | None = None
    missing: list[str] = msgspec.field(default_factory=list)


class DiagnosisInputError(ValueError):
    """An input could not be read; the message names the input and what to pass instead."""
