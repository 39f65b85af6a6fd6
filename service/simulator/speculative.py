"""EAGLE-style speculative decoding: accepted length per verify step and the draft's cost.

A verify forward checks `speculative_num_draft_tokens` tokens per request; the request keeps the accepted
drafts plus one bonus token (`sglang:spec_accept_length` counts both, `srt/speculative/eagle_worker.py`).
Acceptance is a per-token probability from the workload (`SpeculativeBehaviour.draft_acceptance`), so
accepted drafts follow a truncated geometric law, capped by the draft depth.

`--enable-mixed-chunk` under EAGLE, EAGLE3 and NEXTN (an alias of EAGLE) depends on the version: up to
0.5.18 `_handle_eagle_family` turns it off ("Mixed chunked prefill is disabled because of using eagle
speculative decoding"); from 0.5.19 it stays on for the algorithms whose `supports_mixed_chunk()` says so
(EAGLE, EAGLE3, `speculative/spec_info.py`), and a mixed step carries the running requests as a plain
1-token decode ("Mixed steps degrade running requests to a plain 1-token decode", `speculative_hook.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.domain import ModelSpec, ServerConfig
from service.sglang.flags import version_key

# Defaults SGLang picks for EAGLE/EAGLE3 when the flags are unset (`arg_groups/spec_hook.py` auto choice).
DEFAULT_STEPS, DEFAULT_TOPK, DEFAULT_DRAFT_TOKENS = 3, 1, 4
# The first SGLang version that keeps --enable-mixed-chunk on under EAGLE-family speculation.
MIXED_CHUNK_FROM = "0.5.19"


def keeps_mixed_chunk(sglang_version: str | None) -> bool:
    """Whether `--enable-mixed-chunk` stays on under EAGLE, EAGLE3 or NEXTN in this SGLang version (unknown:
    the newest behaviour)."""
    return sglang_version is None or version_key(sglang_version) >= version_key(MIXED_CHUNK_FROM)


@dataclass(frozen=True, slots=True)
class SpeculativeSettings:
    """One server's speculative decoding setup."""

    steps: int
    topk: int
    draft_tokens: int
    acceptance: float
    draft_share: float
    # Mixed chunk stays on (this SGLang version): a prefill step carries the running requests, 1 token each.
    mixes_chunks: bool = False

    @property
    def max_accept(self) -> int:
        return min(self.steps, self.draft_tokens - 1) + 1

    def accept_cdf(self) -> np.ndarray:
        """Cumulative probability of emitting 1..max_accept tokens in one verify step."""
        depth = self.max_accept - 1
        a = min(max(self.acceptance, 0.0), 0.999)
        probs = np.array([a**j * (1 - a) for j in range(depth)] + [a**depth])
        return np.cumsum(probs / probs.sum())

    @property
    def mean_accept(self) -> float:
        a = min(max(self.acceptance, 0.0), 0.999)
        return float(sum(a**j for j in range(self.max_accept)))


def speculative_settings(server: ServerConfig, model: ModelSpec, acceptance: float,
                         sglang_version: str | None = None) -> SpeculativeSettings | None:
    """Settings when `--speculative-algorithm` is EAGLE, EAGLE3 or NEXTN; None otherwise."""
    algo = (server.speculative_algorithm or "").upper()
    if algo not in ("EAGLE", "EAGLE3", "NEXTN"):
        return None
    steps = server.speculative_num_steps or DEFAULT_STEPS
    topk = server.speculative_eagle_topk or DEFAULT_TOPK
    draft = server.speculative_num_draft_tokens or max(steps + 1, DEFAULT_DRAFT_TOKENS if topk == 1 else steps + 1)
    # The draft head is one decoder layer plus the LM head: about two layers' worth of the target.
    share = max(2.0 / max(model.num_layers, 1), 0.02)
    return SpeculativeSettings(steps=steps, topk=topk, draft_tokens=max(draft, 2), acceptance=acceptance,
                               draft_share=share,
                               mixes_chunks=bool(server.enable_mixed_chunk) and keeps_mixed_chunk(sglang_version))


def sample_accepts(cdf: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Tokens each of `n` requests emits in one verify step (1 = only the bonus token)."""
    return np.searchsorted(cdf, rng.random(n), side="right") + 1
