"""The sharing rate read from a prefix structure is the one the simulator's prompts have.

`WorkloadProfile.structure_sharing` is what the techniques read when a workload states no
`prefix_sharing_rate`; here it is held against the prompts `_workload_requests` builds from the same
structure, replayed through a prefix cache that never evicts (the first prompt of each prefix misses).
"""

from __future__ import annotations

import numpy as np
import pytest

from service.domain import (
    BenchSpec,
    DocumentSet,
    LengthDist,
    PrefixStructure,
    WorkloadProfile,
    resolve_model,
)
from service.simulator.requests import _workload_requests

PROMPTS = 800


def _measured(workload: WorkloadProfile) -> float:
    """Share of prompt tokens a never-evicting prefix cache serves, prompts in sending order.

    Blocks are (id, tokens); a block cut to another length than a cached one of the same id after the same
    path (a system prompt longer than the prompt) serves their common length, and the match ends there.
    """
    bench = BenchSpec(num_prompts=PROMPTS, max_concurrency=8)
    requests = _workload_requests(workload, bench, resolve_model("Qwen/Qwen3.6-9B"), np.random.default_rng(3),
                                  PROMPTS)
    cached: dict[tuple[tuple[int, int], ...], dict[int, int]] = {}  # path -> block id -> longest length
    served = 0
    for r in requests:
        path: tuple[tuple[int, int], ...] = ()
        matching = True
        for bid, tokens in r.blocks:
            lengths = cached.setdefault(path, {})
            if matching:
                served += min(tokens, lengths.get(bid, 0))
                matching = lengths.get(bid) == tokens
            lengths[bid] = max(lengths.get(bid, 0), tokens)
            path += ((bid, tokens),)
    return served / sum(r.input_len for r in requests)


WORKLOADS = {
    "no structure": WorkloadProfile(input=LengthDist(median=1500, p95=4000)),
    "long system prompt, short median (casebook case 1)": WorkloadProfile(
        input=LengthDist(median=2100, p95=28000), prefix=PrefixStructure(system_prompt_tokens=3000)),
    "RAG corpus, 80% on 50 of 1,000 documents (case 2)": WorkloadProfile(
        input=LengthDist(median=20530, p95=24800),
        prefix=PrefixStructure(system_prompt_tokens=500,
                               documents=DocumentSet(count=1000, tokens=20000, popular=50, popular_share=0.8))),
    "agent: system prompt and tools, 60 conversations": WorkloadProfile(
        input=LengthDist(median=9000, p95=16000),
        prefix=PrefixStructure(system_prompt_tokens=2000, tool_definition_tokens=1500, history_tokens=4000,
                               conversations=60)),
    "request id in front": WorkloadProfile(
        input=LengthDist(median=3000, p95=6000),
        prefix=PrefixStructure(system_prompt_tokens=2000, variable_tokens=30, variable_position="front")),
    "uniform lengths, tools after an unshared history": WorkloadProfile(
        input=LengthDist(median=4000, kind="uniform", range_ratio=0.5),
        prefix=PrefixStructure(system_prompt_tokens=800, history_tokens=1200, tool_definition_tokens=600,
                               tools_position="after_history")),
}


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_structure_sharing_matches_the_prompts_built_from_it(name: str) -> None:
    workload = WORKLOADS[name]
    expected, measured = workload.structure_sharing(PROMPTS), _measured(workload)
    assert expected == pytest.approx(measured, abs=0.02), name


def test_a_stated_rate_wins_and_a_lone_prompt_shares_nothing() -> None:
    rag = WORKLOADS["RAG corpus, 80% on 50 of 1,000 documents (case 2)"]
    assert rag.sharing_rate(PROMPTS) > 0.6
    stated = WorkloadProfile(prefix=rag.prefix, input=rag.input, prefix_sharing_rate=0.1)
    assert stated.sharing_rate(PROMPTS) == 0.1
    assert rag.structure_sharing(1) == 0.0
    assert WORKLOADS["no structure"].structure_sharing(PROMPTS) == 0.0
    assert WORKLOADS["request id in front"].structure_sharing(PROMPTS) == 0.0


def test_a_huge_corpus_of_conversations_costs_nothing_to_read() -> None:
    # 100,000 documents times 10,000 conversations is a joint law of a billion values, read as four classes.
    corpus = WorkloadProfile(input=LengthDist(median=5000, p95=9000), prefix=PrefixStructure(
        documents=DocumentSet(count=100_000, tokens=3000, popular=100, popular_share=0.5), history_tokens=500,
        conversations=10_000))
    assert 0.3 < corpus.structure_sharing(2000) < 0.5
