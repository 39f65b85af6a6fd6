"""Workload profile: what the traffic looks like (casebook "Workload Profile - Metrics to Secure")."""

from __future__ import annotations

from typing import Literal

import msgspec

Position = Literal["front", "back"]
# A log-normal length given by its median alone is read with this p95 (a moderate spread).
DEFAULT_P95_OVER_MEDIAN = 1.6


class LengthDist(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A token-length distribution: a median and p95 (log-normal fit), a uniform range, or samples."""

    median: int
    p95: int | None = None
    kind: Literal["lognormal", "uniform", "empirical", "fixed"] = "lognormal"
    range_ratio: float = 0.0
    samples: list[int] = msgspec.field(default_factory=list)
    minimum: int = 1
    maximum: int | None = None

    def lognormal_p95(self) -> int:
        """The p95 a log-normal length is drawn with: the given one, else the median's default spread."""
        return self.p95 or int(self.median * DEFAULT_P95_OVER_MEDIAN)

    def p95_tokens(self) -> int:
        """The length 95% of requests stay under: the longest a uniform or fixed one draws, the samples' 95th
        percentile, or the log-normal's p95; never above `maximum`."""
        if self.kind in ("fixed", "uniform"):
            value = self.median
        elif self.kind == "empirical" and self.samples:
            ordered = sorted(self.samples)
            value = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
        else:
            value = self.lognormal_p95()
        return min(value, self.maximum) if self.maximum else value


class DocumentSet(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A corpus of long shared documents with a popularity law (casebook case 2: 80% on 50 of 1,000)."""

    count: int
    tokens: int
    popular: int = 0
    popular_share: float = 0.0


class PrefixStructure(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How a prompt is assembled, so cache hits come from real prefix matching.

    Order: [variable fields if front][system prompt][tools if first][documents][history]
    [tools if after history][question][variable fields if back].
    """

    system_prompt_tokens: int = 0
    tool_definition_tokens: int = 0
    tools_position: Literal["first", "after_history"] = "first"
    history_tokens: int = 0
    documents: DocumentSet | None = None
    variable_tokens: int = 0
    variable_position: Position = "back"
    conversations: int = 0
    # How long the variable fields keep one value (a time stamp formatted to the minute: 60); requests sent
    # within one period share them. None: a new value per request (a request id).
    variable_period_s: float | None = None


class StructuredOutput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """JSON output requirements (casebook case 4)."""

    mode: Literal["none", "prompt_only", "json_schema"] = "none"
    schemas: int = 0
    dynamic_schemas: bool = False
    structural_token_fraction: float = 0.5
    prompt_only_failure_rate: float = 0.0374
    # Every known schema compiled at startup by a warm-up script (casebook case 4, round 2).
    cache_warmed: bool = False


class SpeculativeBehaviour(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The draft model for this traffic and how predictable the outputs are for it (per-token acceptance).

    `draft_model` names an EAGLE3 draft trained for the scenario's model (a Hugging Face id or a folder); when
    unset, the model's own known draft is used (`eagle3_draft` in a shipped model's `model.toml`), and a model
    with neither gets no speculative decoding proposed: a made-up draft path would never launch.
    """

    draft_acceptance: float = 0.75
    draft_model: str | None = None


class WorkloadProfile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Traffic as the casebook profiles it before tuning."""

    name: str = "workload"
    input: LengthDist = LengthDist(median=2048)
    output: LengthDist = LengthDist(median=256)
    prefix: PrefixStructure = PrefixStructure()
    prefix_sharing_rate: float | None = None
    peak_concurrency: int | None = None
    request_rate: float | None = None
    peak_request_rate: float | None = None
    total_requests: int | None = None
    structured_output: StructuredOutput = StructuredOutput()
    speculative: SpeculativeBehaviour = SpeculativeBehaviour()


class MeasuredProfile(msgspec.Struct, kw_only=True):
    """What `sglang-tuner profile` measures from a request log."""

    requests: int
    skipped_lines: int
    input_median: float
    input_p95: int
    output_median: float
    output_p95: int
    prefix_sharing_rate: float
    radix_reuse_rate: float
    peak_concurrency: int | None = None
    request_rate: float | None = None
    peak_request_rate: float | None = None
    errors: list[str] = msgspec.field(default_factory=list)
