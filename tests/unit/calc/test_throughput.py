"""Threshold batch, deadline throughput, cost, HiCache break-even and page waste from the casebook."""

import pytest

from service.calc import (
    KB,
    completion_hours,
    cost_per_million_output_tokens,
    hicache_break_even,
    page_boundary_waste,
    required_throughput,
    threshold_batch_size,
)
from service.domain import gpu_spec


def test_threshold_batch_is_206_on_h200_and_295_on_h100():
    assert threshold_batch_size("H200") == 206
    assert threshold_batch_size(gpu_spec("H100-SXM")) == 295


def test_fp8_threshold_uses_the_fp8_peak():
    assert threshold_batch_size("H100", "fp8") == 590


def test_nightly_batch_needs_8333_output_and_66667_input_tokens_per_second():
    need = required_throughput(2_400_000, 1_200, 150, 12 * 3600)
    assert need.total_output_tokens == 360_000_000
    assert need.total_input_tokens == 2_880_000_000
    assert round(need.output_tokens_per_s) == 8_333
    assert round(need.input_tokens_per_s) == 66_667


def test_case_1_settings_would_take_46_5_hours():
    assert completion_hours(3.60e8, 2148) == pytest.approx(46.5, abs=0.1)


def test_case_5_costs_1_27_per_million_output_tokens():
    cost = cost_per_million_output_tokens(32 * 16, 112_000)
    assert round(cost, 2) == 1.27


def test_hicache_restores_a_document_7_6_times_faster_than_recomputing_it():
    even = hicache_break_even(20_000, 27e9, 1_979, 4, 96 * KB, 64, efficiency=0.6)
    assert even.prefill_flop == pytest.approx(1.08e15)
    assert round(even.recompute_ms) == 227
    assert even.kv_gb == pytest.approx(1.92)
    assert round(even.transfer_ms) == 30
    assert round(even.ratio, 1) == 7.6
    assert even.offload_pays


def test_short_prefix_on_slow_link_makes_hicache_detrimental():
    even = hicache_break_even(200, 1e9, 1_979, 8, 96 * KB, 0.5)
    assert even.ratio < 1 and not even.offload_pays


def test_boundary_waste_is_43_tokens_when_prefixes_diverge_after_token_20010():
    waste = page_boundary_waste(20_011, 64, document_tokens=20_000, bytes_per_token=96 * KB)
    assert waste.reusable_tokens == 19_968
    assert waste.wasted_tokens == 43
    assert waste.max_wasted_tokens == 63
    assert waste.document_pages == 313
    assert round(waste.max_waste_fraction, 3) == 0.003
    assert round(waste.transfer_unit_mb, 1) == 6.1


def test_page_size_1_wastes_nothing():
    assert page_boundary_waste(20_011, 1).wasted_tokens == 0


def test_the_catalogue_knows_h20_l4_and_a100_40gb_by_name_and_alias():
    # H20: a Hopper with a sixth of H100's tensor throughput and more bandwidth: decode turns compute-bound early,
    # where the casebook's speculative decoding stops paying; L4: GDDR6 on PCIe, memory-bound far longer.
    assert threshold_batch_size("h20") == 37
    assert threshold_batch_size("L4") == 403
    assert threshold_batch_size("a100-40gb") == 200  # 312 / 1.555 = 200.6
    assert gpu_spec("l4").nvlink_gbps == 0 and gpu_spec("L4").supports_fp8
    assert not gpu_spec("A100-40GB").supports_fp8 and gpu_spec("A100-40GB").hbm_gb == 40


def test_an_unknown_gpu_names_the_nearest_and_every_gpu_the_catalogue_has():
    from service.scenario_check import check_gpu

    (issue,) = check_gpu("H300-SXM")
    assert issue.field == "hardware.gpu" and issue.hint.startswith("did you mean 'H200-SXM'?")
    assert "H20" in issue.hint and "L4" in issue.hint and "A100-40GB" in issue.hint
    assert check_gpu("h20") == []
