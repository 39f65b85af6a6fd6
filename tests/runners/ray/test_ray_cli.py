"""`sglang-tuner round examples/ray/two-nodes-pd.toml --runner ray --ray-address local --json`, in a process
of its own: a PD round over two nodes of a throwaway local cluster, and nothing of it left afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[3]
BENCH_SERVING_KEYS = {"completed", "duration", "request_throughput", "output_throughput", "median_ttft_ms",
                      "p99_ttft_ms", "median_itl_ms", "median_e2e_latency_ms"}


def _marked(mark: str) -> list[str]:
    """Command lines of live processes whose environment carries `mark` (the command and all it started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if mark.encode() in (entry / "environ").read_bytes():
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120])
        except OSError:
            continue
    return found


def _cli(tmp_path: Path, mark: str, *argv: str, timeout: float) -> dict[str, object]:
    """`sglang-tuner ARGV --runner ray --ray-address local --json` on the emulator, every process marked; its JSON."""
    env = {**os.environ, "SGLANG_TUNER_TEST_MARK": mark, "SGLANG_TUNER_RUNNER_ENGINE": "emulator",
           "SGLANG_TUNER_RUNNER_TIME_SCALE": "0.25", "SGLANG_TUNER_RUNNER_LOG_DIR": str(tmp_path)}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-c", "from service.cli import main; main()", "--log-level", "warning",
                           *argv, "--runner", "ray", "--ray-address", "local", "--json"], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-2000:]
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_the_round_command_measures_pd_on_two_nodes_and_leaves_nothing_behind(tmp_path: Path) -> None:
    mark = f"sglang-tuner-test-{uuid.uuid4().hex}"
    result: Any = _cli(tmp_path, mark, "round", "examples/ray/two-nodes-pd.toml", timeout=300)
    assert result["status"] == "ok" and result["provenance"]["source"] == "emulated"
    placement = result["provenance"]["placement"]
    assert [p["worker"] for p in placement] == ["prefill-0", "decode-0"]
    assert len({p["node_id"] for p in placement}) == 2
    assert BENCH_SERVING_KEYS <= set(result["bench"]) and result["bench"]["completed"] == 24
    assert _marked(mark) == []


def test_a_marked_process_is_found_while_it_runs() -> None:
    mark = f"sglang-tuner-test-{uuid.uuid4().hex}"
    sleeper = subprocess.Popen(["sleep", "30"], env={**os.environ, "SGLANG_TUNER_TEST_MARK": mark})
    try:
        assert _marked(mark) == ["sleep 30 "]
    finally:
        sleeper.kill()
        sleeper.wait()
    assert _marked(mark) == []


def test_the_parallel_alternatives_playbook_measures_four_candidates_each_in_its_own_group(tmp_path: Path) -> None:
    mark = f"sglang-tuner-test-{uuid.uuid4().hex}"
    report: Any = _cli(tmp_path, mark, "tune", "--playbook", "examples/ray/parallel-alternatives.toml", timeout=420)
    candidates = [r for r in report["rounds"] if r["technique"] == "router_policy"]
    assert len(candidates) == 4 and all(r["result"]["status"] == "ok" for r in candidates)
    assert all(r["result"]["provenance"]["source"] == "emulated" for r in report["rounds"])
    groups = [{p["placement_group"] for p in r["result"]["provenance"]["placement"]} for r in candidates]
    nodes = [{p["node_id"] for p in r["result"]["provenance"]["placement"]} for r in candidates]
    assert all(len(g) == 1 for g in groups) and len(set().union(*groups)) == 4
    assert all(len(n) == 1 for n in nodes) and len(set().union(*nodes)) == 4  # four nodes of four GPUs, one each
    assert _marked(mark) == []
