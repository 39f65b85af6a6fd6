"""Expert-parallel load imbalance, and what EPLB with redundant experts does to it.

Routed-expert popularity is skewed: a power law over the experts whose exponent reproduces the casebook's
measured 7.2x max/avg expert load on 256 experts (case 5, round 1). Without EPLB experts sit on EP ranks
in order (`--init-expert-location trivial`); EPLB (`srt/eplb/eplb_algorithms/deepseek.py`) replicates the
hottest experts into the redundant slots and packs physical experts onto ranks to balance load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.domain import ModelSpec, ServerConfig

EXPERT_LOAD_EXPONENT = 0.46
_LAYOUT_SEED = 20_260_807


@dataclass(frozen=True, slots=True)
class ExpertBalance:
    """Max/avg load over physical experts (reported) and over EP ranks (what slows the MoE layer)."""

    expert_imbalance: float
    rank_imbalance: float
    moe_share: float
    static_rank_imbalance: float = 1.0

    def step_factor(self, skew_included: bool = False) -> float:
        """Step-time multiplier: the MoE share of a step waits for the busiest rank.

        With `skew_included` (step times measured under skewed routing with the static placement) the
        factor is relative to that placement, so only what EPLB changes is applied.
        """
        factor = 1.0 - self.moe_share + self.moe_share * self.rank_imbalance
        if skew_included:
            factor /= 1.0 - self.moe_share + self.moe_share * self.static_rank_imbalance
        return factor


def expert_loads(num_experts: int) -> np.ndarray:
    """Share of routed tokens per expert id (fixed layout, so rounds compare like for like)."""
    ranks = np.arange(1, num_experts + 1, dtype=float) ** -EXPERT_LOAD_EXPONENT
    perm = np.random.default_rng(_LAYOUT_SEED).permutation(num_experts)
    loads: np.ndarray = ranks[perm] / ranks.sum()
    return loads


def _replicate(loads: np.ndarray, redundant: int) -> np.ndarray:
    """Physical expert loads after giving `redundant` extra replicas to the hottest experts."""
    copies = np.ones(len(loads), dtype=int)
    for _ in range(redundant):
        copies[np.argmax(loads / copies)] += 1
    return np.repeat(loads / copies, copies)


def _pack(physical: np.ndarray, ranks: int) -> np.ndarray:
    """Greedy balanced packing with equal slots per rank (largest load to the least-loaded rank)."""
    slots = -(-len(physical) // ranks)
    load, used = np.zeros(ranks), np.zeros(ranks, dtype=int)
    for value in np.sort(physical)[::-1]:
        open_ranks = np.flatnonzero(used < slots)
        r = open_ranks[np.argmin(load[open_ranks])]
        load[r] += value
        used[r] += 1
    return load


def expert_balance(model: ModelSpec, server: ServerConfig) -> ExpertBalance | None:
    """Imbalance of an expert-parallel MoE server; None when experts are TP-sharded or the model is dense."""
    if not model.is_moe or model.num_experts <= 1 or server.ep_size <= 1:
        return None
    loads = expert_loads(model.num_experts)
    ranks = min(server.ep_size, model.num_experts)
    redundant = server.ep_num_redundant_experts or 0
    static_load = np.array([chunk.sum() for chunk in np.array_split(loads, ranks)])
    if server.enable_eplb:
        physical = _replicate(loads, redundant)
        rank_load = _pack(physical, ranks)
    else:
        physical, rank_load = loads, static_load
    expert_ratio = float(physical.max() / physical.mean())
    rank_ratio = float(rank_load.max() / rank_load.mean())
    return ExpertBalance(expert_imbalance=expert_ratio, rank_imbalance=rank_ratio, moe_share=_moe_share(model),
                         static_rank_imbalance=float(static_load.max() / static_load.mean()))


def _moe_share(model: ModelSpec) -> float:
    """Share of a step's weight traffic spent in routed experts (active expert params / active params)."""
    inter = model.moe_intermediate_size or model.intermediate_size
    routed = 3 * model.hidden_size * inter * model.experts_per_token * model.num_layers
    return float(min(max(routed / max(model.params_active, 1.0), 0.1), 0.9))
