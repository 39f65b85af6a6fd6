"""bench_serving output and /metrics scrapes are read in every shape users paste them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from service.diagnosis import DiagnosisInputError, diagnose, parse_bench_output, parse_metrics_scrape

FIXTURES = Path(__file__).parent / "fixtures"

# The 0.5.23 block, printed with bench_serving's own "{:<40} {:<10}" format.
FULL_0_5_23 = "\n".join([
    "", "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="),
    *(f"{label:<40} {value:<10}" for label, value in [
        ("Backend:", "sglang"), ("Traffic request rate:", "inf"), ("Max request concurrency:", "not set"),
        ("Successful requests:", 1000), ("Benchmark duration (s):", "61.02"),
        ("Total generated tokens (retokenized):", 250001), ("Output token throughput (tok/s):", "4096.50"),
        ("Peak concurrent requests:", 64), ("Concurrency:", "63.10"), ("Accept length:", "3.10"),
        ("P90 E2E Latency (ms):", "9000.10"), ("P95 TTFT (ms):", "830.00"), ("Std TTFT (ms):", "120.00"),
        ("Median TPOT (ms):", "20.10"), ("Max ITL (ms):", "118.27"),
    ]),
])


def test_full_block_of_0_5_23_reads_every_key() -> None:
    reading = parse_bench_output(FULL_0_5_23)
    assert reading.format == "printed"
    assert reading.max_concurrency is None  # "not set"
    assert math.isinf(reading.request_rate or 0)
    figures = reading.figures
    assert figures.completed == 1000
    assert figures.p95_ttft_ms == 830.0
    assert figures.p90_e2e_latency_ms == 9000.10
    assert figures.median_tpot_ms == 20.10
    assert figures.accept_length == 3.10
    assert figures.max_concurrent_requests == 64
    assert "p99_ttft_ms" not in reading.fields


def test_casebook_rounds_with_change_columns_read_the_first_number() -> None:
    text = "Output token throughput (tok/s): 1498.63 (-3.6%)\nP99 TTFT (ms): 1621.05 (-63.0%)\n"
    reading = parse_bench_output(text)
    assert reading.figures.output_throughput == 1498.63
    assert reading.figures.p99_ttft_ms == 1621.05


def test_json_output_line_is_read_and_the_last_line_wins() -> None:
    first = {"completed": 10, "output_throughput": 1.0, "median_ttft_ms": 1.0}
    last = {"backend": "sglang", "request_rate": float("inf"), "max_concurrency": 25, "completed": 500,
            "output_throughput": 1554.21, "median_ttft_ms": 612.44, "p99_ttft_ms": 4380.92,
            "accept_length": None, "server_info": {"version": "0.5.23"}}
    text = json.dumps(first) + "\n" + json.dumps(last) + "\n"
    reading = parse_bench_output(text)
    assert reading.format == "json"
    assert reading.max_concurrency == 25
    assert reading.figures.completed == 500
    assert reading.figures.p99_ttft_ms == 4380.92
    assert reading.figures.accept_length is None


def test_json_line_gives_the_same_diagnosis_as_the_printed_block() -> None:
    printed = parse_bench_output((FIXTURES / "case1_round0.txt").read_text())
    row = {key: getattr(printed.figures, key) for key in printed.fields} | {"max_concurrency": 25}
    from_json = diagnose(json.dumps(row))
    from_block = diagnose((FIXTURES / "case1_round0.txt").read_text())
    assert [f.id for f in from_json.findings] == [f.id for f in from_block.findings]
    assert from_json.next_technique == from_block.next_technique == "chunked_prefill"


def test_text_without_figures_is_refused_with_what_to_pass() -> None:
    with pytest.raises(DiagnosisInputError, match="bench_output.*Serving Benchmark Result"):
        parse_bench_output("hello world\n")
    with pytest.raises(DiagnosisInputError, match="does not parse"):
        parse_bench_output("{not json")


def test_metrics_with_sglang_colon_names_and_labels_aggregate_over_ranks() -> None:
    scrape = "\n".join([
        "# HELP sglang:num_queue_reqs The number of requests in the waiting queue.",
        "# TYPE sglang:num_queue_reqs gauge",
        'sglang:num_queue_reqs{model_name="m",dp_rank="0"} 3.0',
        'sglang:num_queue_reqs{model_name="m",dp_rank="1"} 5.0',
        "# TYPE sglang:token_usage gauge",
        'sglang:token_usage{model_name="m",dp_rank="0"} 0.9',
        'sglang:token_usage{model_name="m",dp_rank="1"} 1.0',
        "# TYPE sglang:num_retracted_requests_total counter",
        'sglang:num_retracted_requests_total{model_name="m"} 12.0',
        "# TYPE process_cpu_seconds_total counter",
        "process_cpu_seconds_total 1.0",
    ])
    reading = parse_metrics_scrape(scrape)
    assert reading.server.num_queue_reqs == 8.0
    assert reading.server.token_usage == pytest.approx(0.95)
    assert reading.server.num_retracted_requests_total == 12
    assert "process_cpu_seconds_total" not in reading.values


def test_metrics_pasted_from_a_casebook_session_are_cleaned() -> None:
    reading = parse_metrics_scrape((FIXTURES / "case2_round0_metrics.txt").read_text())
    assert reading.server.cache_hit_rate == 0.62
    annotated = "# sglang_num_queue_reqs 18.2 ← Queue is building up\n# sglang_token_usage 0.42\n"
    reading = parse_metrics_scrape(annotated)
    assert reading.server.num_queue_reqs == 18.2
    assert reading.server.token_usage == 0.42


def test_scrape_without_sglang_metrics_is_refused() -> None:
    with pytest.raises(DiagnosisInputError, match="--enable-metrics"):
        parse_metrics_scrape("process_cpu_seconds_total 1.0\n")
