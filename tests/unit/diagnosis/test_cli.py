"""`sglang-tuner diagnose` prints the reading in order, as text or JSON, and refuses unreadable input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from service.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
SCENARIO = Path(__file__).parents[3] / "examples" / "casebook" / "coding-assistant-final.toml"


def test_text_output_names_the_next_technique_and_quotes_the_rule() -> None:
    result = CliRunner().invoke(main, ["diagnose", str(FIXTURES / "case1_round0.txt"), "--scenario", str(SCENARIO)])
    assert result.exit_code == 0, result.output
    assert "Next technique: chunked_prefill." in result.output
    assert "If the ratio is 3x or more" in result.output
    assert "[critical] TTFT p95" in result.output


def test_json_output_with_metrics_and_failure_rate() -> None:
    result = CliRunner().invoke(main, [
        "diagnose", str(FIXTURES / "case4_round0.txt"), "--failure-rate", "0.0374", "--json",
        "--metrics", str(FIXTURES / "reading_order_example_metrics.txt"),
    ])
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["next_technique"] == "grammar"
    assert body["server"]["token_usage"] == 0.61
    assert body["max_concurrency"] == 40


def test_stdin_is_read_with_a_dash() -> None:
    block = (FIXTURES / "case1_round0.txt").read_text()
    result = CliRunner().invoke(main, ["diagnose", "-", "--json"], input=block)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["next_technique"] == "chunked_prefill"


def test_unreadable_bench_output_is_a_usage_error_that_says_what_to_pass(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("nothing here\n")
    result = CliRunner().invoke(main, ["diagnose", str(empty)])
    assert result.exit_code == 2
    assert "Serving Benchmark Result" in result.output
