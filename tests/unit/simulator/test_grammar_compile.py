"""Grammar compilation as SGLang 0.5.23 runs it: a cache of finished grammars, one executor task per miss,
compiles sharing the host's cores, and a warm-up script that leaves nothing to compile."""

from __future__ import annotations

import msgspec
import pytest

from service.domain import Hardware, Scenario
from service.simulator.grammar import CompilePool, GrammarCache, HostShare, host_share, solo_compile_seconds

from .conftest import load, run


def _cache(backend: str = "xgrammar", cores: float = 48.0, ranks: int = 1, workers: int = 32) -> GrammarCache:
    return GrammarCache(backend=backend, host=HostShare(cores=cores, ranks=ranks, executor_workers=workers))


def _drain(cache: GrammarCache, until: float = 1e9) -> list[tuple[float, object]]:
    """Run the cache's compiles to completion: (time, payload) of every request released."""
    released: list[tuple[float, object]] = []
    while (t := cache.next_done()) is not None and t <= until:
        released += [(t, p) for p in cache.collect(t)]
    return released


def test_concurrent_misses_each_submit_a_task_and_xgrammar_compiles_the_schema_once() -> None:
    cache = _cache("xgrammar")
    assert not cache.request("a", 3, 0.0, measured=True)
    assert not cache.request("b", 3, 0.01, measured=True)  # the first is still compiling: a miss too
    assert cache.pending == 2 and len(cache.pool.active) == 1
    released = _drain(cache)
    assert [p for _, p in released] == ["a", "b"] and released[0][0] == released[1][0]
    # Each task's own timer: the second waited for the shared compile from its own start.
    assert cache.compile_seconds[0] == pytest.approx(cache.compile_seconds[1] + 0.01)
    assert (cache.lookups, cache.hits) == (2, 0)


def test_backends_without_a_compile_cache_run_every_missed_compile() -> None:
    cache = _cache("llguidance")
    for k in range(3):
        assert not cache.request(k, 7, 0.0, measured=True)
    assert len(cache.pool.active) == 3
    assert len(_drain(cache)) == 3 and len(cache.compile_seconds) == 3


def test_a_finished_grammar_is_served_from_the_cache_without_a_compile() -> None:
    cache = _cache()
    cache.request("first", 1, 0.0, measured=True)
    done_at = _drain(cache)[0][0]
    assert cache.request("later", 1, done_at + 1.0, measured=True)
    assert cache.pending == 0 and not cache.pool.active and len(cache.compile_seconds) == 1
    assert (cache.lookups, cache.hits) == (2, 1)


def test_warming_leaves_nothing_to_compile() -> None:
    cache = _cache()
    cache.warm(17)
    assert all(cache.request(k, k % 17, 0.0, measured=True) for k in range(40))
    assert cache.pending == 0 and cache.next_done() is None and not cache.compile_seconds
    assert cache.hits == cache.lookups == 40


def test_compiles_outnumbering_the_cores_share_them() -> None:
    # Two compiles of 8 threads on each of 2 TP ranks want 32 threads; 16 cores run them at half speed.
    pool = CompilePool(host=HostShare(cores=16.0, ranks=2), threads=8)
    pool.start(0, 1.0, 0.0)
    pool.start(1, 2.0, 0.0)
    assert pool.rate == pytest.approx(0.5)
    assert pool.next_done() == pytest.approx(2.0)
    assert [j.schema for j in pool.finish(2.0)] == [0]
    # Alone, the second runs at full speed: its remaining second of work ends at 3.0.
    assert pool.next_done() == pytest.approx(3.0)


def test_a_full_executor_queues_the_next_schema_behind_a_running_compile() -> None:
    cache = _cache("xgrammar", workers=2)
    cache.request("a", 0, 0.0, measured=True)
    cache.request("b", 1, 0.0, measured=True)
    cache.request("c", 2, 0.0, measured=True)
    assert len(cache.pool.active) == 2 and len(cache.queued) == 1
    released = dict((p, t) for t, p in _drain(cache))
    # Schema 2's compile starts only when a worker frees, so it ends after the first of the two others.
    assert released["c"] > min(released["a"], released["b"])


def test_a_schema_compiles_in_the_same_time_in_every_round_within_the_backends_range() -> None:
    xgrammar = [solo_compile_seconds("xgrammar", k) for k in range(17)]
    assert xgrammar == [solo_compile_seconds("xgrammar", k) for k in range(17)]
    # Casebook case 4's table: xgrammar 40-400 ms; llguidance almost nothing.
    assert 0.04 < min(xgrammar) and max(xgrammar) < 0.4 and len(set(xgrammar)) == 17
    assert max(solo_compile_seconds("llguidance", k) for k in range(17)) < 0.02


def test_a_servers_share_of_the_host_counts_its_ranks_and_busy_processes() -> None:
    share = host_share(Hardware(gpus_per_node=2).cpus_per_node, 2, 2)
    # 26 threads per GPU by default: 52, less a scheduler per rank and the tokenizer and detokenizer.
    assert (share.cores, share.ranks, share.executor_workers) == (48.0, 2, 32)
    assert host_share(Hardware(gpus_per_node=8, host_cpus=224).cpus_per_node, 8, 2).cores == pytest.approx(52.0)


def _structured(warmed: bool, prompts: int = 300) -> Scenario:
    base = load("structured-output-round0")
    so = msgspec.structs.replace(base.workload.structured_output, mode="json_schema", cache_warmed=warmed)
    group = base.deployment.groups[0]
    group = msgspec.structs.replace(group, server=msgspec.structs.replace(group.server, grammar_backend="xgrammar"))
    return msgspec.structs.replace(
        base, workload=msgspec.structs.replace(base.workload, structured_output=so),
        deployment=msgspec.structs.replace(base.deployment, groups=[group]),
        bench=msgspec.structs.replace(base.bench, num_prompts=prompts, warmup_requests=1))


def test_a_fresh_server_compiles_during_the_start_burst_and_the_warm_up_script_removes_it() -> None:
    cold, warm = run(_structured(False)), run(_structured(True))
    assert cold.server.grammar_cache_hit_rate is not None and cold.server.grammar_cache_hit_rate < 1.0
    # The start burst's distinct schemas compile at once on 48 cores: slower than one compile alone.
    assert cold.server.grammar_compile_time_p99_ms and cold.server.grammar_compile_time_p99_ms > 400
    assert warm.server.grammar_cache_hit_rate == 1.0 and warm.server.grammar_compile_time_mean_ms == 0.0
    assert warm.bench.p99_ttft_ms < 0.8 * cold.bench.p99_ttft_ms
    assert warm.bench.median_ttft_ms == pytest.approx(cold.bench.median_ttft_ms, rel=0.05)
