"""The casebook playbooks end to end: `sglang-tuner tune --playbook P --json` on the simulated runner.

The five jobs start together (two cores run them side by side) the first time a test asks for one.
Where the simulator (following SGLang's real semantics) or the casebook policy decides differently from
the casebook, the assertion states what they decide and docs/tuning.md says why.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from service.plugin_host import PluginHost
from tests.api.service_process import Service, create_keys, free_port

HOST = PluginHost()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif("simulated" not in HOST.components("runner") or "casebook" not in HOST.components("policy"),
                       reason="needs the simulated runner and the casebook policy"),
]
CLI = str(Path(sys.executable).with_name("sglang-tuner"))
CASEBOOK = ("coding-assistant", "document-qa-rag", "nightly-batch", "structured-output", "moe-at-scale")
# moe-at-scale's rounds are the longest to simulate and its changes are tens of percent, far outside the
# noise: one repeat decides the same and keeps the suite quick (bench/tune.py times the full job).
EXTRA = {"moe-at-scale": ["--repeats", "1"]}
_jobs: dict[str, subprocess.Popen[str]] = {}
_reports: dict[str, dict] = {}
# `tune --markdown` writes each job's Markdown report here, beside its JSON on stdout.
_markdown = Path(tempfile.mkdtemp(prefix="sglang-tuner-reports-"))


def tune(playbook: str) -> dict:
    """The JSON report of `tune --playbook <playbook> --json` (all five jobs start on the first call)."""
    if not _jobs:
        for name in CASEBOOK:
            _jobs[name] = subprocess.Popen([CLI, "tune", "--playbook", name, "--seed", "0", "--json",
                                            "--markdown", str(_markdown / f"{name}.md"), *EXTRA.get(name, [])],
                                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if playbook not in _reports:
        out, _ = _jobs[playbook].communicate(timeout=600)
        assert _jobs[playbook].returncode == 0, f"tune --playbook {playbook} failed"
        _reports[playbook] = json.loads(out)
    return _reports[playbook]


def rounds(report: dict, technique: str) -> list[dict]:
    """The technique's rounds on the main line: the casebook's narrative (branches are tested apart)."""
    return [r for r in report["rounds"] if r["technique"] == technique and r.get("line") is None]


def decided(report: dict) -> list[tuple[str, str]]:
    return [(r["delta"]["summary"] if r["delta"] else "baseline", r["verdict"]) for r in report["rounds"]]


def server(report: dict, index: int = 0) -> dict:
    return report["final"]["deployment"]["groups"][index]["server"]


def test_every_round_carries_the_documented_keys_and_all_repeats() -> None:
    report = tune("structured-output")
    assert {"job", "rounds", "final", "slo"} <= set(report)
    for round_ in report["rounds"]:
        assert {"index", "technique", "delta", "verdict", "pattern", "reasons", "result"} <= set(round_)
        assert round_["reasons"]
        # structured-output measures every round 5 times (its tail-only warming gain needs the seeds), and 5
        # more seeds when noise left it undecided.
        extended = any(line.startswith("decided on 10 seeds per side") for line in round_["reasons"])
        assert round_["repeats"] == (10 if extended else 5)
    assert {"deployment", "launch_commands", "router_command"} <= set(report["final"])
    assert {"met", "checks"} == set(report["slo"])


def test_coding_assistant_chunked_prefill_needs_mixed_chunk_and_stops_at_4096() -> None:
    report = tune("coding-assistant")
    chunk = rounds(report, "chunked_prefill")
    # 4096 and 4096 + mixed chunk are alternatives against the BF16 TP8 baseline: without mixed chunk
    # decoding still waits through every chunk (SGLang 0.5.23), so the stall stays and nothing is gained.
    assert [(r["delta"]["summary"], r["verdict"]) for r in chunk[:2]] == [
        ("chunked prefill 4096", "rollback"), ("chunked prefill 4096 + mixed chunk", "keep_tradeoff")]
    assert chunk[1]["result"]["bench"]["max_itl_ms"] < 0.1 * report["rounds"][0]["result"]["bench"]["max_itl_ms"]
    # 2048 is judged against the kept 4096 + mixed chunk, on the same seeds.
    smaller = chunk[2]
    assert smaller["delta"]["summary"] == "chunked prefill 2048"
    assert smaller["figures"]["output_throughput.baseline"] == pytest.approx(
        chunk[1]["result"]["bench"]["output_throughput"])
    # As the casebook: diminishing returns at 4096. The smaller chunk only shortens decode stalls (max and
    # p99 ITL) while the TTFT the SLO names does not fall: on 9 seeds per side (3, then 3 more twice while
    # noise left it open) its median TTFT rises (+27%), a latency traded for one the SLO does not name, so
    # it is rolled back; its pooled TTFT p95, 1,025 ms [945, 1,067], is past the 1 s target the kept
    # 4096 + mixed chunk met (within noise of it), so the SLO gate would roll it back too.
    assert smaller["figures"]["max_itl_ms.change"] < -0.3
    assert smaller["figures"]["p99_ttft_ms.change"] > -0.1
    assert smaller["figures"]["median_ttft_ms.change"] > 0
    assert smaller["verdict"] == "rollback"
    assert "rolled back: the latency that fell (p99 ITL -" in smaller["reasons"][0]
    assert "is not one the SLO names" in smaller["reasons"][0]
    assert smaller["reasons"][1].startswith("the SLO gate would roll it back too (p95 TTFT 1,0")
    assert len(chunk) == 3  # the sweep stops at 2048
    assert server(report)["chunked-prefill-size"] == 4096


def test_coding_assistant_keeps_fp8_measured_seed_by_seed_and_eagle3_within_the_slo_as_the_casebook() -> None:
    report = tune("coding-assistant")
    fp8 = rounds(report, "quantization")[0]
    # +9% throughput with every tail lower: the casebook's "all metrics improved", proven by a paired t over
    # the seeds both sides share (as two unrelated groups the gain sat inside the run-to-run noise).
    assert fp8["verdict"] == "accept" and fp8["pattern"] == "throughput_up_latency_down"
    assert fp8["figures"]["output_throughput.change"] > 0.05 and fp8["figures"]["output_throughput.ci_low"] > 0
    assert any("[paired t over" in line for line in fp8["reasons"])
    eagle = rounds(report, "speculative_decoding")[0]
    assert eagle["delta"]["set_server"]["speculative_algorithm"] == "EAGLE3"
    # The casebook's round 3 (+66.6% throughput, median ITL -40%, TTFT +5-6% within the SLO margin): on SGLang
    # 0.5.23 the kept mixed chunk stays on under EAGLE3, so decoding requests still advance through the long
    # pastes' chunks and the pooled TTFT p95 stays well inside the 1 s target (about 830 ms). The TTFT that
    # rose is a tail inside its headroom: kept as a trade-off.
    assert eagle["verdict"] == "keep_tradeoff" and "kept within SLO headroom" in eagle["reasons"][0]
    assert eagle["figures"]["output_throughput.change"] > 0.4 and eagle["figures"]["output_throughput.ci_low"] > 0.3
    assert eagle["figures"]["median_itl_ms.change"] < -0.5
    assert eagle["figures"]["p99_ttft_ms.change"] > 0
    assert eagle["figures"]["slo.ttft_p95_ms.candidate"] < 0.9 * eagle["figures"]["slo.ttft_p95_ms.target"]


def test_coding_assistant_replicas_are_judged_against_tp8_with_eagle3_and_two_gpu_replicas_break_the_ttft_target(
) -> None:
    report = tune("coding-assistant")
    # TP1 x 8, TP2 x 4 and TP4 x 2 are alternatives against the chunk 4096 + FP8 + EAGLE3 TP8 baseline (the
    # casebook's sequence: it splits after EAGLE3). 27 GB of FP8 weights take 19% of an H200, so TP1 x 8 is
    # offered too.
    split = rounds(report, "parallelism")
    # 25 clients: sglang-router's default --balance-abs-threshold of 64 could never fire, so each split's
    # router balances at one replica's share of them.
    assert [r["delta"]["summary"] for r in split] == [
        "TP1 x 8 + cache_aware router (balance-abs-threshold 4)", "TP2 x 4 + cache_aware router (balance-abs-threshold 7)",
        "TP4 x 2 + cache_aware router (balance-abs-threshold 13)"]
    tp1, tp2, tp4 = split
    # Where the simulator differs from the casebook (docs/tuning.md): TP2 x 4 gains throughput, as the casebook
    # measured (+34.5%), but a 28k-token paste prefills for about 3 s on two GPUs, so its pooled TTFT p95
    # breaks the 1 s target the TP8 baseline meets; on one GPU (TP1 x 8) further, with twice the median ITL.
    for broken in (tp1, tp2):
        assert broken["verdict"] == "rollback" and "breaks an SLO the baseline met (ttft_p95_ms" in broken["reasons"][0]
        assert broken["figures"]["slo.ttft_p95_ms.candidate"] > broken["figures"]["slo.ttft_p95_ms.target"]
    assert tp2["figures"]["output_throughput.change"] > 0.05 and tp2["result"]["bench"]["p99_ttft_ms"] > 1500
    assert tp1["figures"]["median_itl_ms.change"] > 0.5
    # TP4 x 2 keeps the target (pooled p95 about 930 ms) for +16% throughput at level median ITL: the split
    # the casebook's reasons favour (less all-reduce, two batches filled) where the prefill still has 4 GPUs.
    assert tp4["verdict"] == "keep_tradeoff"
    assert tp4["figures"]["output_throughput.change"] > 0.1 and tp4["figures"]["output_throughput.ci_low"] > 0
    assert tp4["figures"]["slo.ttft_p95_ms.candidate"] < tp4["figures"]["slo.ttft_p95_ms.target"]
    final = report["final"]["deployment"]["groups"][0]
    assert final["replicas"] == 2 and final["server"]["tp-size"] == 4
    assert final["server"]["speculative-algorithm"] == "EAGLE3" and final["server"]["quantization"] == "fp8"
    assert report["slo"]["met"]


def test_document_qa_compares_both_routers_against_tp4_and_recommends_prompt_reordering() -> None:
    report = tune("document-qa-rag")
    routers = rounds(report, "router_policy")
    assert [r["delta"]["summary"] for r in routers] == ["TP2 x 2 + round_robin router",
                                                        "TP2 x 2 + cache_aware router (balance-abs-threshold 11)"]
    baseline = report["rounds"][0]["result"]["bench"]["output_throughput"]
    # Both against TP4 (an undecided comparison may add baseline seeds, which moves its mean a little).
    assert all(r["figures"]["output_throughput.baseline"] == pytest.approx(baseline, rel=0.02) for r in routers)
    rr, cache_aware = (r["result"] for r in routers)
    # cache_aware keeps the hit rate round-robin loses, but in the simulator neither TP2 split beats one TP4:
    # two half-size pools hold no larger share of their traffic, and each TP2 prefill is slower (tuning.md).
    assert cache_aware["server"]["cache_hit_rate"] > rr["server"]["cache_hit_rate"] + 0.1
    assert routers[0]["verdict"] == "rollback"
    assert routers[1]["verdict"] in ("rollback", "inconclusive")  # the baseline is kept either way
    assert report["final"]["deployment"]["groups"][0]["replicas"] == 1 and server(report)["tp-size"] == 4
    assert decided(report)[3] == ("prompt re-ordered: fixed parts first, variable last", "accept")
    assert "prompt-structure.md" in report["final"]["artifacts"]
    hicache = rounds(report, "hicache")
    assert [r["delta"]["summary"] for r in hicache] == ["HiCache ratio 2, page 64, write_through",
                                                        "HiCache ratio 2, page 64, write_back"]
    # On the warm service the cold documents the device pool evicted come back from host memory instead of
    # being prefilled again: more hits, more requests per second, a shorter TTFT tail.
    through = hicache[0]
    assert through["verdict"] == "accept"
    assert through["result"]["server"]["cache_hit_rate"] > report["rounds"][3]["result"]["server"]["cache_hit_rate"]
    assert through["result"]["bench"]["request_throughput"] > through["figures"]["request_throughput.baseline"]
    final = server(report)
    assert (final["enable-hierarchical-cache"], final["hicache-write-policy"]) == (True, "write_through")
    assert report["slo"]["met"]


def test_nightly_batch_picks_9b_by_the_quality_table() -> None:
    report = tune("nightly-batch")
    screened = {r["delta"]["model"]: r for r in rounds(report, "model_selection")}
    assert screened["Qwen/Qwen3.6-2B"]["verdict"] == "rollback" and screened["Qwen/Qwen3.6-2B"]["result"] is None
    assert screened["Qwen/Qwen3.6-4B"]["verdict"] == "rollback" and screened["Qwen/Qwen3.6-4B"]["result"] is None
    assert screened["Qwen/Qwen3.6-9B"]["verdict"] == "accept"
    assert report["final"]["model"] == "Qwen/Qwen3.6-9B"
    argv = report["final"]["launch_commands"][0]["argv"]
    assert argv[argv.index("--model-path") + 1] == "Qwen/Qwen3.6-9B"


def test_nightly_batch_drops_speculative_decoding_for_bringing_the_deadline_closer() -> None:
    report = tune("nightly-batch")
    removal = rounds(report, "speculative_decoding")[0]
    assert removal["delta"]["set_server"]["speculative_algorithm"] is None
    # Throughput up, ITL up (the casebook: +20%): no latency SLO, and the missed 12 h deadline moves closer.
    assert removal["result"]["bench"]["output_throughput"] > 1.2 * removal["figures"]["output_throughput.baseline"]
    assert removal["figures"]["slo.deadline_hours.candidate"] < removal["figures"]["slo.deadline_hours.baseline"]
    assert removal["verdict"] == "accept" and "brings the missed target closer" in removal["reasons"][0]
    assert server(report)["speculative-algorithm"] is None


def test_nightly_batch_raises_the_batch_rolls_back_mem_fraction_096_and_meets_the_deadline() -> None:
    report = tune("nightly-batch")
    batch = rounds(report, "batch_parameters")
    raised = batch[0]
    assert raised["delta"]["set_server"]["max_running_requests"] == 512 and raised["delta"]["client_concurrency"] == 512
    # Judged against the accepted removal on the same seeds: +14% throughput, every latency figure up, the
    # missed 12 h deadline closer: a batch effect, accepted (the casebook: +33%).
    assert raised["figures"]["output_throughput.baseline"] == pytest.approx(
        rounds(report, "speculative_decoding")[0]["result"]["bench"]["output_throughput"])
    assert raised["verdict"] == "accept" and "brings the missed target closer" in raised["reasons"][0]
    # mem-fraction-static 0.96 leaves too little outside the static pool: it fails at start, is an error,
    # never accepted, and the job goes on with the next step.
    mem = batch[1]
    assert mem["delta"]["set_server"] == {"mem_fraction_static": 0.96}
    assert mem["verdict"] == "error" and "out of memory" in mem["reasons"][0]
    # The KV pool is far from full at 512 running requests, so the running cap and the clients rise together.
    cap = batch[2]
    assert cap["delta"]["set_server"] == {"max_running_requests": 1024} and cap["delta"]["client_concurrency"] == 1024
    assert cap["verdict"] == "accept" and "meets an SLO the baseline missed" in cap["reasons"][0]
    # More clients than running slots only lengthen the queue (the casebook's saturation check).
    assert (batch[3]["delta"]["summary"], batch[3]["verdict"]) == ("client concurrency 2048", "rollback")
    final = server(report)
    assert (final["max-running-requests"], final["mem-fraction-static"]) == (1024, 0.94)
    deadline = next(c for c in report["slo"]["checks"] if c["name"] == "deadline_hours")
    assert deadline["met"] and deadline["actual"] < 12
    assert report["slo"]["met"]


def test_structured_output_reaches_zero_failures_with_xgrammar_and_moves_tools_first() -> None:
    report = tune("structured-output")
    grammar = rounds(report, "grammar")
    assert grammar[0]["delta"]["set_server"] == {"grammar_backend": "xgrammar"}
    assert grammar[0]["verdict"] == "accept" and grammar[0]["result"]["failure_rate"] == 0.0
    # A fresh server compiles the start burst's schemas side by side on its CPU share: p99 TTFT rises a lot
    # (the casebook: +70%).
    assert grammar[0]["figures"]["p99_ttft_ms.change"] > 0.3
    warm = grammar[1]
    assert warm["delta"]["summary"] == "warm the grammar cache (17 schemas)"
    assert warm["result"]["server"]["grammar_cache_hit_rate"] == 1.0
    # Warming moves the compiles to startup and is kept, as in the casebook (p99 -54%). Whether the policy
    # calls it an accept or a kept trade-off depends on max ITL, which the warm start burst raises within noise.
    assert warm["figures"]["p99_ttft_ms.change"] < -0.25
    assert warm["verdict"] in ("accept", "keep_tradeoff")
    assert "warm_grammar.sh" in report["final"]["artifacts"]
    reorder = rounds(report, "prompt_structure")[0]
    assert reorder["verdict"] == "accept"
    assert reorder["delta"]["workload"]["prefix"]["tools_position"] == "first"
    assert "--grammar-backend" in report["final"]["launch_commands"][0]["argv"]
    assert report["slo"]["met"]


def test_moe_at_scale_accepts_ep_eplb_and_pd_and_picks_a_split_that_holds_itl() -> None:
    report = tune("moe-at-scale")
    plain, overlapped, eplb = rounds(report, "moe_parallelism")[:3]
    group = plain["delta"]["deployment"]["groups"][0]
    assert (group["replicas"], group["server"]["tp-size"], group["server"]["ep-size"],
            group["server"]["attention-dp-size"], group["server"]["moe-a2a-backend"]) == (4, 32, 32, 8, "deepep")
    # The casebook's round-1 layout with DeepEP (its own command chose no all-to-all) loses throughput to
    # TP8 x 16 in the simulator; with two-batch overlap hiding the all-to-all, EP + DP attention is kept,
    # then EPLB.
    assert [plain["verdict"], overlapped["verdict"], eplb["verdict"]] == ["rollback", "accept", "accept"]
    assert overlapped["delta"]["summary"].endswith("two-batch overlap")
    assert eplb["result"]["expert_imbalance"] < 2.5 < 5.0 < plain["result"]["expert_imbalance"]
    splits = rounds(report, "pd_disaggregation")
    # The casebook's TP8 prefill nodes queue past the TTFT SLO; DP-attention prefill nodes keep up.
    assert (splits[0]["delta"]["summary"], splits[0]["verdict"]) == ("PD prefill 5 / decode 11", "rollback")
    dp_splits = splits[1:]
    kept = [r for r in dp_splits if r["verdict"] == "accept"]
    assert kept, "a split with DP-attention prefill nodes is kept"
    first = dp_splits.index(kept[0])
    # The sweep shifts nodes towards prefill past splits that break the TTFT target the round before meets,
    # and tries one more prefill node after a kept split.
    assert all("breaks an SLO the baseline met (ttft_p95_ms" in r["reasons"][0] for r in dp_splits[:first])
    assert len(dp_splits) > first + 1
    final = {g["role"]: g for g in report["final"]["deployment"]["groups"]}
    assert final["prefill"]["replicas"] + final["decode"]["server"]["tp-size"] // 8 == 16
    assert final["prefill"]["replicas"] > 5
    itl = next(c for c in report["slo"]["checks"] if c["name"] == "itl_median_ms")
    assert itl["met"]
    assert final["decode"]["server"]["enable-eplb"]
    # Casebook: 3.07x req/s from TP8 x 16 to the final split.
    before, after = report["rounds"][0]["result"]["bench"], kept[-1]["result"]["bench"]
    assert after["output_throughput"] > 2 * before["output_throughput"]


def _without_job_id(markdown: str) -> str:
    return re.sub(r"Job `[^`]+`", "Job `<id>`", markdown)


def test_the_service_reports_each_casebook_job_byte_for_byte_as_tune_does(tmp_path: Path) -> None:
    """One report: `tune --playbook P --seed 0` and GET /v1/jobs/{id}/report?format=markdown of a job with the
    same playbook and seed (run by `sglang-tuner serve`, stored in SQLite) differ only in the job id."""
    cli = {name: (tune(name), (_markdown / f"{name}.md").read_text(encoding="utf-8"))[1] for name in CASEBOOK}
    db = tmp_path / "tuner.db"
    token = create_keys(db, ["write"])["write"]
    service = Service(db, free_port())
    service.start()
    try:
        with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
            ids = {name: client.post("/v1/jobs", json={"playbook": name, "seed": 0, **_repeats(name)}).json()["id"]
                   for name in CASEBOOK}
            for name, job_id in ids.items():
                _wait_finished(client, job_id)
                served = client.get(f"/v1/jobs/{job_id}/report", params={"format": "markdown"}).text
                assert f"Job `{job_id}`" in served
                assert _without_job_id(served) == _without_job_id(cli[name]), name
    finally:
        service.stop()


def _repeats(name: str) -> dict[str, int]:
    extra = EXTRA.get(name, [])
    return {"repeats": int(extra[extra.index("--repeats") + 1])} if "--repeats" in extra else {}


def _wait_finished(client: httpx.Client, job_id: str, timeout: float = 900.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = client.get(f"/v1/jobs/{job_id}", params={"wait": 20}).json()["state"]  # under the client timeout
        if state not in ("queued", "running"):
            return
    raise AssertionError(f"job {job_id} did not finish in {timeout:.0f} s")
