"""Calculators refuse non-positive and overflowing sizes, naming the argument (or the CLI option)."""

import pytest
from click.testing import CliRunner

from service import calc
from service.calc import CalcInputError
from service.cli import main


@pytest.mark.parametrize(("call", "field"), [
    (lambda: calc.kv_bytes_per_token(-48, 8, 128), "num_layers"),
    (lambda: calc.kv_bytes_per_token(48, 0, 128), "num_kv_heads"),
    (lambda: calc.mla_kv_bytes_per_token(61, 512, -64), "qk_rope_head_dim"),
    (lambda: calc.kv_memory_gb(196_608, 3000, -25), "requests"),
    (lambda: calc.required_throughput(-2_400_000, 1200, 150, 43_200), "requests"),
    (lambda: calc.required_throughput(10, 1e308, 1e308, 1), "input_tokens"),
    (lambda: calc.required_throughput(10, 1200, float("nan"), 1), "output_tokens"),
    (lambda: calc.required_throughput(10, 1200, 150, 0), "deadline_s"),
    (lambda: calc.kv_capacity(320, -27, 35, 98_304), "weights_gb"),
    (lambda: calc.kv_capacity(320, 27, 35, 98_304, document_tokens=0), "document_tokens"),
    (lambda: calc.kv_capacity(320, 27, 35, 98_304, hicache_ratio=float("inf")), "hicache_ratio"),
    (lambda: calc.hicache_break_even(20_000, 27e9, 1979, -4, 98_304, 64), "gpus"),
    (lambda: calc.page_boundary_waste(20_011, 0), "page_size"),
    (lambda: calc.cost_per_million_output_tokens(512, 0), "output_tokens_per_s"),
])
def test_a_size_out_of_range_is_refused_naming_it(call, field):
    with pytest.raises(CalcInputError) as refused:
        call()
    assert refused.value.field == field
    assert field in str(refused.value)


def test_the_casebook_figures_are_inside_the_ranges():
    assert calc.kv_bytes_per_token(48, 8, 128) == 196_608
    assert round(calc.required_throughput(2_400_000, 1200, 150, 43_200).output_tokens_per_s) == 8333
    assert calc.kv_capacity(320, 27, 35, 98_304, document_tokens=20_000).documents == 134


@pytest.mark.parametrize(("args", "option"), [
    (["kv-per-token", "--layers", "-4", "--kv-heads", "8", "--head-dim", "128"], "--layers"),
    (["required-throughput", "--requests", "10", "--input-tokens", "1e308", "--output-tokens", "1",
      "--deadline-hours", "1"], "--input-tokens"),
    (["kv-capacity", "--gpus", "0", "--weights-gb", "27", "--kv-bytes-per-token", "98304"], "--gpus"),
    (["cost", "--price-per-hour", "32", "--output-tps", "-5"], "--output-tps"),
])
def test_the_cli_refuses_the_same_sizes_naming_the_option(args, option):
    result = CliRunner().invoke(main, ["calc", *args])
    assert result.exit_code == 2 and option in result.output
