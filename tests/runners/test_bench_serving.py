"""`--bench sglang`: the bench_serving command line and reading its output file."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from service.domain import BenchSpec, LengthDist, PrefixStructure, TraceRecord, TraceSpec, WorkloadProfile
from service.loadgen import bench_serving_argv, bench_serving_warm_argv, read_bench_output, write_bench_traces
from service.traces import read_trace


def test_a_shared_prompt_workload_becomes_generated_shared_prefix(tmp_path: Path) -> None:
    workload = WorkloadProfile(input=LengthDist(median=2000), output=LengthDist(median=200),
                               prefix=PrefixStructure(system_prompt_tokens=1500))
    bench = BenchSpec(num_prompts=50, max_concurrency=8, flush_cache=True, ignore_eos=False)
    argv = bench_serving_argv("python", "http://127.0.0.1:30000", bench, workload, tmp_path / "o.jsonl", model="m")
    assert argv[:3] == ["python", "-m", "sglang.bench_serving"]
    pairs = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert pairs["--dataset-name"] == "generated-shared-prefix"
    assert (pairs["--gsp-system-prompt-len"], pairs["--gsp-question-len"]) == ("1500", "500")
    assert "--max-concurrency" in argv and "--flush-cache" in argv and "--disable-ignore-eos" in argv


def test_the_last_line_of_the_output_file_is_the_round(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"completed": 1, "median_ttft_ms": 1.0}\n'
                    '{"backend": "sglang", "request_rate": Infinity, "completed": 50, "duration": 10.5, '
                    '"median_ttft_ms": 120.5, "p99_itl_ms": 40.0, "accept_length": null, "server_info": {}}\n')
    figures = read_bench_output(path)
    assert (figures.completed, figures.duration, figures.median_ttft_ms) == (50, 10.5, 120.5)
    assert figures.max_itl_ms == 40.0 and figures.accept_length is None


def test_a_trace_becomes_the_mooncake_dataset_over_its_own_records(tmp_path: Path) -> None:
    records = [TraceRecord(timestamp=float(k * 100), input_length=600, output_length=8, hash_ids=[k % 3, 9])
               for k in range(10)]
    bench = BenchSpec(dataset="trace", num_prompts=6, warm_prompts=3, request_rate=5.0, max_concurrency=4,
                      trace=TraceSpec(records=records, slowdown=2.0))
    served, measured = write_bench_traces(bench, tmp_path)
    assert served is not None and measured is not None
    assert read_trace(served) == records[:3] and read_trace(measured) == records[3:9]
    argv = bench_serving_argv("python", "http://h:1", bench, WorkloadProfile(), tmp_path / "o.jsonl", model="m",
                              trace_file=measured)
    pairs = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert (pairs["--dataset-name"], pairs["--dataset-path"]) == ("mooncake", str(measured))
    assert pairs["--mooncake-slowdown-factor"] == "2.0" and pairs["--num-prompts"] == "6"
    assert "--request-rate" not in argv  # bench_serving's trace replay ignores it
    warm = bench_serving_warm_argv("python", "http://h:1", bench, WorkloadProfile(), tmp_path / "w.jsonl", model="m",
                                   trace_file=served)
    assert warm is not None and dict(zip(warm[3::2], warm[4::2], strict=False))["--dataset-path"] == str(served)
    closed = msgspec.structs.replace(bench, trace=TraceSpec(records=records, timestamps=False))
    argv = bench_serving_argv("python", "http://h:1", closed, WorkloadProfile(), tmp_path / "o.jsonl", model="m",
                              trace_file=measured)
    assert dict(zip(argv[3::2], argv[4::2], strict=False))["--mooncake-slowdown-factor"] == "0.0"
    with pytest.raises(ValueError, match="write_bench_traces"):
        bench_serving_argv("python", "http://h:1", bench, WorkloadProfile(), tmp_path / "o.jsonl", model="m")
