"""`--bench sglang`: the bench_serving command line and reading its output file."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from service.domain import SLO, BenchSpec, LengthDist, PrefixStructure, TraceRecord, TraceSpec, WorkloadProfile
from service.loadgen import (
    bench_module,
    bench_serving_argv,
    bench_serving_warm_argv,
    read_bench_output,
    read_cache_tiers,
    write_bench_traces,
)
from service.traces import read_trace


def test_a_shared_prompt_workload_becomes_generated_shared_prefix(tmp_path: Path) -> None:
    workload = WorkloadProfile(input=LengthDist(median=2000), output=LengthDist(median=200),
                               prefix=PrefixStructure(system_prompt_tokens=1500))
    bench = BenchSpec(num_prompts=50, max_concurrency=8, flush_cache=True, ignore_eos=False)
    argv = bench_serving_argv("python", "http://127.0.0.1:30000", bench, workload, tmp_path / "o.jsonl", model="m",
                              sglang_version="0.5.9")
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


@pytest.mark.parametrize(("version", "module"), [("0.5.2", "sglang.bench_serving"), ("0.5.14", "sglang.bench_serving"),
                                                 ("0.5.15", "sglang.benchmark.serving"),
                                                 ("0.5.23", "sglang.benchmark.serving"),
                                                 (None, "sglang.benchmark.serving")])
def test_the_module_is_the_one_the_version_ships(version: str | None, module: str) -> None:
    # sglang/benchmark/serving.py first ships in the 0.5.15 wheel; 0.5.14's has only sglang/bench_serving.py.
    assert bench_module(version) == module


def test_goodput_bounds_come_from_the_slo_and_only_versions_with_goodput_get_them(tmp_path: Path) -> None:
    slo = SLO(ttft_p95_ms=800, ttft_median_ms=300, itl_median_ms=40, e2e_p95_ms=20000, min_output_throughput=1000)
    bench = BenchSpec(num_prompts=20)
    argv = bench_serving_argv("python", "http://h:1", bench, WorkloadProfile(), tmp_path / "o.jsonl", model="m",
                              sglang_version="0.5.23", slo=slo)
    at = argv.index("--goodput")
    # The tail target set bounds every request: TTFT p95 (not the median), TPOT the ITL median, e2e p95.
    assert argv[at + 1:at + 4] == ["ttft:800", "tpot:40", "e2el:20000"]
    assert "--cache-report" in argv
    older = bench_serving_argv("python", "http://h:1", bench, WorkloadProfile(), tmp_path / "o.jsonl", model="m",
                               sglang_version="0.5.20", slo=slo)
    assert "--goodput" not in older and "--cache-report" in older
    oldest = bench_serving_argv("python", "http://h:1", bench, WorkloadProfile(), tmp_path / "o.jsonl", model="m",
                                sglang_version="0.5.9", slo=slo)
    assert "--goodput" not in oldest and "--cache-report" not in oldest
    no_latency = bench_serving_argv("python", "http://h:1", bench, WorkloadProfile(), tmp_path / "o.jsonl",
                                    model="m", sglang_version="0.5.23", slo=SLO(min_output_throughput=1.0))
    assert "--goodput" not in no_latency


def test_goodput_and_cache_tiers_are_read_from_the_output_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    # Keys as sglang 0.5.23's benchmark/serving.py writes them with --goodput ttft:500 tpot:50 --cache-report.
    path.write_text('{"completed": 40, "duration": 8.0, "median_ttft_ms": 200.0, '
                    '"goodput_slos_ms": {"ttft": 500.0, "tpot": 50.0}, "request_goodput": 4.5, '
                    '"slo_attainment": 0.9, "slo_attainment_by_metric": {"ttft": 0.95, "tpot": 0.92}, '
                    '"cache_report": {"total_prompt_tokens": 10000, "total_cached_tokens": 6000, '
                    '"cache_hit_rate_pct": 60.0, "device_cached_tokens": 4500, "host_cached_tokens": 1500, '
                    '"storage_cached_tokens": null, "storage_backend": null}}\n')
    figures = read_bench_output(path)
    assert (figures.request_goodput, figures.slo_attainment) == (4.5, 0.9)
    assert figures.goodput_slos_ms == {"ttft": 500.0, "tpot": 50.0}
    assert read_cache_tiers(path) == {"device": 0.45, "host": 0.15}
    plain = tmp_path / "plain.jsonl"
    plain.write_text('{"completed": 40, "duration": 8.0}\n')
    assert read_bench_output(plain).request_goodput is None and read_cache_tiers(plain) is None
