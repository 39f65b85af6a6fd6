"""Workload profile: what the traffic looks like (casebook "Workload Profile - Metrics to Secure")."""

from __future__ import annotations

import functools
import math
from statistics import NormalDist
from typing import Literal

import msgspec

Position = Literal["front", "back"]
# A log-normal length given by its median alone is read with this p95 (a moderate spread).
DEFAULT_P95_OVER_MEDIAN = 1.6
# The per-token draft acceptance speculative rounds are simulated with when the workload states none: a
# middle value between the casebook's drafts (case 1 accepts 0.637 of its drafted tokens, case 3 0.357).
DEFAULT_DRAFT_ACCEPTANCE = 0.75
# Every generated prompt ends with at least this many tokens of its own (its question, however short).
OWN_TAIL_TOKENS = 32
# Without an explicit maximum, a log-normal length is capped at this multiple of its p95 (a fitted
# log-normal's far tail is not in any measured log).
TAIL_CAP_OVER_P95 = 2
# Prompt lengths are read at this many evenly spaced quantiles when averaging over the length law.
_LENGTH_QUANTILES = 40


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

    def quantiles(self, count: int = _LENGTH_QUANTILES) -> list[float]:
        """`count` evenly spaced quantiles of the law (mid-points), for averages over it; a log-normal's far
        tail is cut at `maximum`, else at twice its p95, as the simulator draws it."""
        mids = [(k + 0.5) / count for k in range(count)]
        if self.median < 1:  # out of range (the door's range check names it): no law to read
            return [float(max(self.minimum, 1))] * count
        if self.kind == "fixed":
            values = [float(self.median)] * count
        elif self.kind == "uniform":
            low = max(int(self.median * self.range_ratio), 1)
            values = [low + q * (self.median - low) for q in mids]
        elif self.kind == "empirical" and self.samples:
            ordered = sorted(self.samples)
            values = [float(ordered[min(len(ordered) - 1, int(q * len(ordered)))]) for q in mids]
        else:
            p95 = self.lognormal_p95()
            sigma = max(math.log(max(p95, self.median + 1) / self.median) / 1.645, 1e-3)
            normal = NormalDist()
            tail = TAIL_CAP_OVER_P95 * p95 if self.maximum is None else math.inf  # a stated maximum cuts instead
            values = [min(self.median * math.exp(sigma * normal.inv_cdf(q)), tail) for q in mids]
        top = self.maximum or math.inf
        return [min(max(v, float(self.minimum), 1.0), top) for v in values]


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

    # Per-token acceptance; None when the workload does not state it (`acceptance` reads the default then).
    draft_acceptance: float | None = None
    draft_model: str | None = None

    @property
    def acceptance(self) -> float:
        """The stated per-token acceptance, else DEFAULT_DRAFT_ACCEPTANCE."""
        return self.draft_acceptance if self.draft_acceptance is not None else DEFAULT_DRAFT_ACCEPTANCE


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

    def sharing_rate(self, prompts: int) -> float:
        """The prefix sharing rate the tuner reads: the stated `prefix_sharing_rate`, else what the prefix
        structure shares over `prompts` prompts (`structure_sharing`)."""
        if self.prefix_sharing_rate is not None:
            return self.prefix_sharing_rate
        return self.structure_sharing(prompts)

    def structure_sharing(self, prompts: int) -> float:
        """The share of prompt tokens that repeat another prompt's prefix, expected from `prefix` over
        `prompts` prompts: the casebook's rate (shared tokens over all prompt tokens) of the prompts the
        workload dataset builds from this structure.

        A prompt's fixed parts are shared in order until the first that is its own: a request id in front
        shares nothing, a document counts when another prompt asks for the same one (by its popularity law),
        a conversation's history when another turn of it is among the prompts. Parts longer than a prompt are
        cut, leaving its own tail, and lengths are averaged over the input law, so long unshared prompts
        weigh as they do in the rate.
        """
        prefix = self.prefix
        if prompts < 2 or (prefix.variable_tokens and prefix.variable_position == "front"
                           and prefix.variable_period_s is None):
            return 0.0
        parts = _shared_parts(prefix, prompts)
        back = prefix.variable_tokens if prefix.variable_position == "back" else 0
        shared = total = 0.0
        for length in self.input.quantiles():
            budget, expected = max(length - OWN_TAIL_TOKENS - back, 0.0), 0.0
            for k, (tokens, repeats) in enumerate(parts):
                if budget <= 0 or repeats <= 0:
                    break
                # A document fills what the prompt's other parts leave (the dataset draws documents from the
                # input law, casebook case 2: a longer prompt is a longer document).
                rest = budget - sum(float(t or 0) for t, _ in parts[k + 1:])
                take = min(float(tokens), budget) if tokens is not None else max(rest, 0.0)
                budget -= take
                expected += repeats * take
            shared += expected
            total += length
        return min(shared / total, 1.0) if total else 0.0


@functools.lru_cache(maxsize=256)
def _shared_parts(prefix: PrefixStructure, prompts: int) -> tuple[tuple[int | None, float], ...]:
    """The prompt's fixed parts in order, each with the share of `prompts` prompts whose prefix up to and
    including it an earlier prompt had (the first of each value is the one that misses); a document's length
    is None (what the other parts leave).

    A law is a few classes of equally likely values, (probability of each, how many), so a corpus of 100,000
    documents times 10,000 conversations costs no more than one of each.
    """
    parts: list[tuple[int | None, float]] = []
    law: list[tuple[float, int]] = [(1.0, 1)]  # the joint law of the values of the parts so far
    if prefix.variable_tokens and prefix.variable_position == "front":
        parts.append((prefix.variable_tokens, _repeats(law, prompts)))  # one value per period: shared within it
    parts.append((prefix.system_prompt_tokens, _repeats(law, prompts)))
    if prefix.tools_position == "first":
        parts.append((prefix.tool_definition_tokens, _repeats(law, prompts)))
    documents = prefix.documents
    if documents is not None and documents.count > 0:
        law = _document_law(documents)
        parts.append((None, _repeats(law, prompts)))
    if prefix.history_tokens:
        conversations = prefix.conversations
        # Each prompt's history is its conversation's (drawn apart from its document), else its own.
        law = [(p / conversations, n * conversations) for p, n in law] if conversations else []
        parts.append((prefix.history_tokens, _repeats(law, prompts)))
    if prefix.tools_position == "after_history":
        parts.append((prefix.tool_definition_tokens, _repeats(law, prompts)))
    return tuple((tokens, repeats) for tokens, repeats in parts if tokens is None or tokens > 0)


def _document_law(documents: DocumentSet) -> list[tuple[float, int]]:
    """Documents by popularity: a popular request draws one of the first `popular`, any other one of the rest
    (of all of them when every document is popular)."""
    count, popular = documents.count, min(documents.popular, documents.count)
    share = documents.popular_share if popular else 0.0
    if not popular:
        return [(1 / count, count)]
    if popular >= count:
        return [(share / popular + (1 - share) / count, count)]
    return [(share / popular, popular), ((1 - share) / (count - popular), count - popular)]


def _repeats(law: list[tuple[float, int]], prompts: int) -> float:
    """The share of `prompts` draws from `law` (classes of values: probability of each, how many) whose value
    an earlier draw had: one less the expected number of distinct values over the draws (no law: every draw
    its own)."""
    distinct = sum(n * (1 - (1 - p) ** prompts) for p, n in law if p > 0) if law else prompts
    return max(1 - distinct / prompts, 0.0)


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
