"""Two emulated workers behind the real SGLang router, through `sglang-tuner round --runner local`."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from .conftest import cli_round

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("sglang_router") is None, reason="sglang-router is not installed")

# Emulated vs simulated agreement (docs/runners.md, "Agreement with the simulator").
RELATIVE = {"duration": 0.15, "output_throughput": 0.15, "median_itl_ms": 0.15, "median_ttft_ms": 0.25,
            "p99_ttft_ms": 0.25}
CACHE_HIT_ABSOLUTE = 0.05


@pytest.fixture(scope="module")
def local_rounds() -> dict[str, dict[str, Any]]:
    return {policy: cli_round(f"two-workers-{policy}.toml", "--runner", "local")
            for policy in ("round-robin", "cache-aware")}


def _keys(value: Any, prefix: str = "") -> set[str]:
    if isinstance(value, dict):
        return {f"{prefix}{k}" for k in value} | {key for k, v in value.items() for key in _keys(v, f"{prefix}{k}.")}
    return set()


def test_both_examples_run_end_to_end_with_the_simulated_runners_keys(local_rounds: dict[str, Any]) -> None:
    simulated = cli_round("two-workers-round-robin.toml", "--cost-model", "roofline")
    for result in local_rounds.values():
        assert result["status"] == "ok", result.get("error")
        assert result["provenance"]["source"] == "emulated" and result["provenance"]["runner"] == "local"
        assert result["bench"]["completed"] == 96
        assert _keys(result) == _keys(simulated)


def test_cache_aware_routing_raises_the_workers_hit_rate_and_lowers_ttft(local_rounds: dict[str, Any]) -> None:
    rr, ca = local_rounds["round-robin"], local_rounds["cache-aware"]
    # Read from the workers' own sglang:cached_tokens_total / sglang:prompt_tokens_total counters.
    assert ca["server"]["cache_hit_rate"] > rr["server"]["cache_hit_rate"] + 0.05
    assert ca["bench"]["median_ttft_ms"] < rr["bench"]["median_ttft_ms"]


def test_local_and_simulated_rounds_agree(local_rounds: dict[str, Any]) -> None:
    local = local_rounds["round-robin"]
    simulated = cli_round("two-workers-round-robin.toml", "--cost-model", "roofline")
    for key, tolerance in RELATIVE.items():
        emulated, expected = local["bench"][key], simulated["bench"][key]
        assert abs(emulated - expected) <= tolerance * expected, f"{key}: local {emulated:.1f} vs simulated {expected:.1f}"
    gap = abs(local["server"]["cache_hit_rate"] - simulated["server"]["cache_hit_rate"])
    assert gap <= CACHE_HIT_ABSOLUTE
