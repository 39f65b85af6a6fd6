"""Service level objectives and what to optimise within them."""

from __future__ import annotations

from typing import Literal

import msgspec

ObjectiveKind = Literal["latency", "throughput", "deadline", "cost", "failure_rate"]


class SLO(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Targets a round must meet; unset targets are not checked."""

    ttft_p95_ms: float | None = None
    ttft_p99_ms: float | None = None
    ttft_median_ms: float | None = None
    itl_median_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p95_ms: float | None = None
    failure_rate_max: float | None = None
    min_request_throughput: float | None = None
    min_output_throughput: float | None = None
    deadline_hours: float | None = None
    deadline_output_tokens: float | None = None
    cost_per_1m_output_max: float | None = None


class Objective(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What to maximise once the SLO holds (casebook: latency, throughput, deadline, cost, failure rate)."""

    kind: ObjectiveKind = "throughput"
    target: float | None = None
