"""`--bench sglang`: the bench_serving command line and reading its output file."""

from __future__ import annotations

from pathlib import Path

from service.domain import BenchSpec, LengthDist, PrefixStructure, WorkloadProfile
from service.loadgen import bench_serving_argv, read_bench_output


def test_a_shared_prompt_workload_becomes_generated_shared_prefix(tmp_path: Path) -> None:
    workload = WorkloadProfile(input=LengthDist(median=2000), output=LengthDist(median=200),
                               prefix=PrefixStructure(system_prompt_tokens=1500))
    bench = BenchSpec(num_prompts=50, max_concurrency=8, flush_cache=True, ignore_eos=False)
    argv = bench_serving_argv("python", "http://127.0.0.1:30000", bench, workload, tmp_path / "o.jsonl", model="m")
    assert argv[:3] == ["python", "-m", "sglang.bench_serving"]
    pairs = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert pairs["--dataset-name"] == "generated-shared-prefix"
    assert (pairs["--gsp-system-prompt-len"], pairs["--gsp-question-len"]) == ("1500", "500")
    assert "--max-concurrency" in argv and "--flush-cache" in argv and "--disable-ignore-eos" in argv


def test_the_last_line_of_the_output_file_is_the_round(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"completed": 1, "median_ttft_ms": 1.0}\n'
                    '{"backend": "sglang", "request_rate": Infinity, "completed": 50, "duration": 10.5, '
                    '"median_ttft_ms": 120.5, "p99_itl_ms": 40.0, "accept_length": null, "server_info": {}}\n')
    figures = read_bench_output(path)
    assert (figures.completed, figures.duration, figures.median_ttft_ms) == (50, 10.5, 120.5)
    assert figures.max_itl_ms == 40.0 and figures.accept_length is None
