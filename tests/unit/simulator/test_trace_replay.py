"""Replaying a request trace (`bench.dataset = "trace"`): arrival times, shared blocks, refusals, replicas."""

from __future__ import annotations

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain import BenchSpec, RouterConfig, Scenario, TraceRecord, TraceSpec, resolve_model
from service.simulator.cluster import representative_scale
from service.simulator.requests import TRACE_BASE, UNIQUE_BASE, trace_blocks, trace_requests

from .conftest import load, run

BASE = load("coding-assistant-final")  # four TP2 workers of Qwen3.6-27B FP8 behind cache_aware, on 8xH200


def _trace(records: list[TraceRecord], max_concurrency: int | None = None, **fields: object) -> Scenario:
    bench = BenchSpec(dataset="trace", num_prompts=len(records), warmup_requests=0, max_concurrency=max_concurrency,
                      trace=TraceSpec(records=records, **fields))  # type: ignore[arg-type]
    return msgspec.structs.replace(BASE, bench=bench)


def _record(ms: float, ids: list[int], length: int = 1024, out: int = 16) -> TraceRecord:
    return TraceRecord(timestamp=ms, input_length=length, output_length=out, hash_ids=ids)


def test_requests_arrive_at_the_trace_times_and_slowdown_stretches_them() -> None:
    records = [_record(0, [1]), _record(10_000, [2]), _record(20_000, [3])]
    plain, slowed = run(_trace(records)), run(_trace(records, slowdown=2.0))
    assert plain.bench.completed == slowed.bench.completed == 3
    # the last request is sent 20 s (40 s) after the first and takes well under a second on an idle server
    assert 20.0 < plain.bench.duration < 21.0
    assert 40.0 < slowed.bench.duration < 41.0
    assert max(plain.samples.ttft_ms) < 500


def test_closed_loop_without_timestamps_sends_as_fast_as_concurrency_allows() -> None:
    records = [_record(k * 10_000, [k]) for k in range(6)]
    closed = run(_trace(records, max_concurrency=2, timestamps=False))
    assert closed.bench.completed == 6
    assert closed.bench.duration < 5.0
    assert closed.bench.max_concurrent_requests == 2


def test_shared_hash_ids_are_cache_hits_and_unshared_ones_are_not() -> None:
    # B repeats A's first 512-token block 5 s later; C shares nothing. Cached tokens: 512 of 3 x 1,024.
    records = [_record(0, [7, 8]), _record(5_000, [7, 9]), _record(10_000, [10, 11])]
    result = run(_trace(records))
    assert result.server.cache_hit_rate == 512 / 3072


def test_the_first_num_prompts_records_are_replayed_in_time_order() -> None:
    model = resolve_model(BASE.model)
    records = [_record(3_000, [1]), _record(2_000, [2]), _record(1_000, [3]), _record(0, [4])]
    trace = TraceSpec(records=records)
    bench = BenchSpec(dataset="trace", num_prompts=2, warm_prompts=1, trace=trace)
    served, measured = trace_requests(trace, bench, model, served=1, n=2)
    assert [r.rid for r in served] == [0]
    assert [r.rid for r in measured] == [2, 1]  # records 1 and 2 of the file, by timestamp
    assert [r.arrival for r in measured] == [0.0, 1.0]


def test_blocks_follow_the_hash_ids_and_a_shorter_id_list_leaves_a_unique_tail() -> None:
    assert trace_blocks(_record(0, [5, 6], length=700), 512, rid=3) == ((TRACE_BASE + 5, 512), (TRACE_BASE + 6, 188))
    assert trace_blocks(_record(0, [5], length=700), 512, rid=3) == ((TRACE_BASE + 5, 512), (UNIQUE_BASE + 12, 188))
    assert trace_blocks(_record(0, [], length=40), 512, rid=0) == ((UNIQUE_BASE, 40),)


def test_a_request_longer_than_the_context_is_refused_as_sglang_refuses_it() -> None:
    context = resolve_model(BASE.model).max_context
    records = [_record(0, [1]), _record(1_000, [2], length=context - 8, out=64)]
    result = run(_trace(records))
    assert result.bench.completed == 1
    assert result.failure_rate == 0.5
    assert result.status == "partial"
    assert result.error and "1 requests refused: requested token count exceeds" in result.error


def test_a_cache_aware_router_over_a_trace_simulates_every_replica() -> None:
    records = [_record(0, [1])]
    many = msgspec.structs.replace(BASE, deployment=msgspec.structs.replace(BASE.deployment, groups=[
        msgspec.structs.replace(BASE.deployment.groups[0], replicas=8)]))
    assert representative_scale(_trace(records)) == 1
    assert representative_scale(msgspec.structs.replace(_trace(records), deployment=many.deployment)) == 1
    blind = msgspec.structs.replace(many.deployment, router=RouterConfig(policy="round_robin"))
    assert representative_scale(msgspec.structs.replace(_trace(records), deployment=blind)) == 8


RECORDS = st.lists(st.builds(_record, st.floats(0, 30_000), st.lists(st.integers(0, 6), max_size=6),
                             st.integers(1, 4000), st.integers(1, 200)), min_size=1, max_size=30)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=RECORDS, slowdown=st.sampled_from([0.5, 1.0, 3.0]))
def test_trace_round_invariants(records: list[TraceRecord], slowdown: float) -> None:
    result = run(_trace(records, slowdown=slowdown))
    assert result.bench.completed == len(records)  # every record is one request, finished once
    assert result.bench.total_input_tokens == sum(r.input_length for r in records)
    assert result.bench.total_output_tokens == sum(r.output_length for r in records)
    span = (max(r.timestamp for r in records) - min(r.timestamp for r in records)) / 1000 * slowdown
    assert result.bench.duration >= span - 1e-6
    # a hit needs the block sent before: never more cached tokens than blocks some earlier request carried
    seen: set[int] = set()
    reusable = 0
    for record in sorted(records, key=lambda r: r.timestamp):
        for (block, tokens) in trace_blocks(record, 512, rid=0):
            reusable += tokens if block in seen else 0
            seen.add(block)
    assert result.server.cache_hit_rate * result.bench.total_input_tokens <= reusable + 1e-6
