"""`sglang-tuner round SCENARIO.toml` on the simulator: bench_serving's keys, seeds, and a replayed trace."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from service.cli import main

ROOT = Path(__file__).resolve().parents[2]
CASE1 = ROOT / "playbooks" / "scenarios" / "coding-assistant-round0.toml"
TRACE = ROOT / "examples" / "traces" / "chat-sessions.toml"
# sglang.bench_serving's output-file keys (0.5.23), plus max_itl_ms.
BENCH_KEYS = {"completed", "duration", "request_throughput", "input_throughput", "output_throughput",
              "total_throughput", "concurrency", "accept_length", "max_concurrent_requests", "max_itl_ms",
              *(f"{stat}_{metric}_ms" for stat in ("mean", "median", "p90", "p95", "p99")
                for metric in ("ttft", "itl", "tpot", "e2e_latency"))}
SERVER_KEYS = {"token_usage", "cache_hit_rate", "num_queue_reqs", "num_running_reqs", "num_retracted_requests_total",
               "spec_accept_length", "spec_accept_rate", "grammar_compile_time_mean_ms", "grammar_compile_time_p99_ms"}


def _round(*args: str) -> dict:
    done = CliRunner().invoke(main, ["round", *args])
    assert done.exit_code == 0, done.output
    return msgspec.json.decode(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def case1_rounds() -> tuple[dict, dict, dict]:
    return _round(str(CASE1), "--seed", "1", "--json"), _round(str(CASE1), "--seed", "1", "--json"), _round(
        str(CASE1), "--seed", "2", "--json")


def test_the_round_prints_bench_servings_keys_and_sglangs_metric_names(case1_rounds) -> None:
    result = case1_rounds[0]
    assert BENCH_KEYS <= set(result["bench"])
    assert SERVER_KEYS <= set(result["server"])
    assert {"failure_rate", "expert_imbalance", "cost_per_1m_output_tokens"} <= set(result)
    assert result["provenance"]["source"] == "simulated" and result["bench"]["completed"] == 500


def test_a_seed_repeats_its_figures_and_another_seed_moves_them_by_noise(case1_rounds) -> None:
    first, again, other = (r["bench"] for r in case1_rounds)
    assert first == again
    assert first != other
    for key in ("output_throughput", "median_ttft_ms", "median_itl_ms"):
        assert other[key] == pytest.approx(first[key], rel=0.25), key


def test_the_example_trace_replays_at_its_times() -> None:
    done = CliRunner().invoke(main, ["round", str(TRACE)])
    assert done.exit_code == 0, done.output
    assert "traffic: trace chat-sessions.jsonl, 1383 of 1383 records, at their times x1" in done.stdout
    result = _round(str(TRACE), "--json")
    # Ten minutes of trace: the replay lasts as long, and shared conversation blocks are cache hits.
    assert result["bench"]["completed"] == 1383
    assert 600 <= result["bench"]["duration"] < 660
    assert result["server"]["cache_hit_rate"] > 0.6
