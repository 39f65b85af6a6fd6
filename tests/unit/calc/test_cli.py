"""`sglang-tuner calc ...` prints the casebook's figures, as text and as JSON."""

import json

from click.testing import CliRunner

from service.cli import main

QWEN_FP8 = ["--layers", "48", "--kv-heads", "8", "--head-dim", "128", "--kv-dtype", "fp8_e5m2"]


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["calc", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_kv_per_token_text_names_192_kb():
    out = _run("kv-per-token", "--layers", "48", "--kv-heads", "8", "--head-dim", "128")
    assert "196,608 bytes = 192 KB" in out


def test_kv_capacity_json_counts_402_documents_with_hicache():
    out = _run("kv-capacity", "--gpu", "H100", "--gpus", "4", "--weights-gb", "27", "--headroom-gb", "35",
               "--document-tokens", "20000", "--hicache-ratio", "2", *QWEN_FP8, "--json")
    data = json.loads(out)
    assert data["kv_available_gb"] == 258
    assert (data["documents"], data["host_documents"], data["total_documents"]) == (134, 268, 402)


def test_threshold_batch_json():
    assert json.loads(_run("threshold-batch", "--gpu", "H200", "--json"))["threshold_batch_size"] == 206


def test_cost_text():
    out = _run("cost", "--price-per-hour", "32", "--units", "16", "--output-tps", "112000")
    assert "$1.27 per 1M output tokens" in out


def test_required_throughput_json():
    data = json.loads(_run("required-throughput", "--requests", "2400000", "--input-tokens", "1200",
                           "--output-tokens", "150", "--deadline-hours", "12", "--json"))
    assert round(data["output_tokens_per_s"]) == 8333 and round(data["input_tokens_per_s"]) == 66667


def test_hicache_break_even_and_page_waste_text():
    out = _run("hicache-break-even", "--tokens", "20000", "--params", "27e9", "--gpu", "H100", "--gpus", "4",
               "--bandwidth-gbps", "64", *QWEN_FP8)
    assert "recompute 227 ms vs transfer 30 ms" in out and "7.6x" in out
    out = _run("page-waste", "--shared-through", "20010", "--page-size", "64")
    assert "43 wasted (at most 63" in out


def test_missing_model_shape_is_a_usage_error():
    result = CliRunner().invoke(main, ["calc", "kv-memory", "--requests", "25", "--tokens", "3000"])
    assert result.exit_code == 2
    assert "give --model" in result.output
