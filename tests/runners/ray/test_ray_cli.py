"""`sglang-tuner round examples/ray/two-nodes-pd.toml --runner ray --ray-address local --json`, in a process
of its own: a PD round over two nodes of a throwaway local cluster, and nothing of it left afterwards (every
process it starts is re-parented to `reaper.py` when orphaned, and none may still run when it ends)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[3]
REAPER = Path(__file__).with_name("reaper.py")
BENCH_SERVING_KEYS = {"completed", "duration", "request_throughput", "output_throughput", "median_ttft_ms",
                      "p99_ttft_ms", "median_itl_ms", "median_e2e_latency_ms"}


def _reaped(*argv: str, env: dict[str, str] | None = None, timeout: float = 60) -> dict[str, Any]:
    """ARGV run under `reaper.py`: its exit code, its stdout and the command lines of what it left running."""
    done = subprocess.run([sys.executable, str(REAPER), *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["returncode"] == 0, done.stderr[-2000:] + report["stdout"][-2000:]
    return report


def _cli(tmp_path: Path, *argv: str, timeout: float) -> dict[str, Any]:
    """`sglang-tuner ARGV --runner ray --ray-address local --json` on the emulator; its JSON, after checking that
    nothing it started (the local cluster's processes, the emulated workers) outlived it."""
    env = {**os.environ, "SGLANG_TUNER_RUNNER_ENGINE": "emulator",
           "SGLANG_TUNER_RUNNER_TIME_SCALE": "0.25", "SGLANG_TUNER_RUNNER_LOG_DIR": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    report = _reaped(sys.executable, "-c", "from service.cli import main; main()", "--log-level", "warning",
                     *argv, "--runner", "ray", "--ray-address", "local", "--json", env=env, timeout=timeout)
    assert report["left"] == []
    answer: dict[str, Any] = json.loads(report["stdout"].strip().splitlines()[-1])
    return answer


def test_the_round_command_measures_pd_on_two_nodes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    result: Any = _cli(tmp_path, "round", "examples/ray/two-nodes-pd.toml", timeout=300)
    assert result["status"] == "ok" and result["provenance"]["source"] == "emulated"
    placement = result["provenance"]["placement"]
    assert [p["worker"] for p in placement] == ["prefill-0", "decode-0"]
    assert len({p["node_id"] for p in placement}) == 2
    assert BENCH_SERVING_KEYS <= set(result["bench"]) and result["bench"]["completed"] == 24


def test_the_reaper_finds_a_process_left_running_and_ends_it() -> None:
    assert _reaped("sh", "-c", "sleep 30 & echo started")["left"] == ["sleep 30 "]
    assert _reaped("sh", "-c", "sleep 0.1; echo done")["left"] == []


def test_the_parallel_alternatives_playbook_measures_four_candidates_each_in_its_own_group(tmp_path: Path) -> None:
    report: Any = _cli(tmp_path, "tune", "--playbook", "examples/ray/parallel-alternatives.toml", timeout=420)
    candidates = [r for r in report["rounds"] if r["technique"] == "router_policy"]
    assert len(candidates) == 4 and all(r["result"]["status"] == "ok" for r in candidates)
    assert all(r["result"]["provenance"]["source"] == "emulated" for r in report["rounds"])
    groups = [{p["placement_group"] for p in r["result"]["provenance"]["placement"]} for r in candidates]
    nodes = [{p["node_id"] for p in r["result"]["provenance"]["placement"]} for r in candidates]
    assert all(len(g) == 1 for g in groups) and len(set().union(*groups)) == 4
    assert all(len(n) == 1 for n in nodes) and len(set().union(*nodes)) == 4  # four nodes of four GPUs, one each
