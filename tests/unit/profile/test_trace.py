"""A request log written as a trace (`profile --trace-out`), and a trace's own profile (`profile --trace`)."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from service.cli import main
from service.domain import TraceRecord
from service.profile import ProfileError, profile_log, profile_trace
from service.traces import read_trace

SYSTEM = " ".join(f"w{i}" for i in range(8))  # 8 tokens, two blocks of 4


def _log(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def _conversation_log(tmp_path: Path) -> Path:
    # Out of time order in the file: the trace is in start order, timestamps in ms from the first start.
    rows = [{"prompt": f"{SYSTEM} w20 w21 w22 w23 w24", "completion": "w30 w31", "timestamp": 1_700_000_002.5},
            {"prompt": f"{SYSTEM} w10", "completion": "w11 w12 w13", "timestamp": 1_700_000_000.0},
            {"prompt": "w40 w41", "completion": "w42", "timestamp": 1_700_000_001.0}]
    return _log(tmp_path, rows)


def test_a_log_becomes_a_trace_in_start_order_with_shared_blocks(tmp_path, word_tokenizer_dir) -> None:
    out = tmp_path / "trace.jsonl"
    measured = profile_log(_conversation_log(tmp_path), word_tokenizer_dir, trace_out=out, block_tokens=4)
    trace = read_trace(out)
    assert [(r.timestamp, r.input_length, r.output_length) for r in trace] == [(0.0, 9, 3), (1000.0, 2, 1),
                                                                               (2500.0, 13, 2)]
    # The two system-prompt blocks are shared by the first and the third request; everything else is not.
    assert trace[0].hash_ids[:2] == trace[2].hash_ids[:2]
    assert len({*trace[0].hash_ids, *trace[1].hash_ids, *trace[2].hash_ids}) == 3 + 1 + 4 - 2
    assert measured.requests == 3


def test_a_log_line_without_a_time_cannot_become_a_trace(tmp_path, word_tokenizer_dir) -> None:
    path = _log(tmp_path, [{"prompt": "w1", "completion": "w2", "timestamp": 1.0},
                           {"prompt": "w1", "completion": "w2"}])
    with pytest.raises(ProfileError, match="line 2 has no start time"):
        profile_log(path, word_tokenizer_dir, trace_out=tmp_path / "t.jsonl")


def test_a_traces_profile_counts_shared_blocks_and_rates() -> None:
    records = [TraceRecord(timestamp=0, input_length=10, output_length=3, hash_ids=[0, 1, 2]),
               TraceRecord(timestamp=400, input_length=12, output_length=5, hash_ids=[0, 1, 3]),
               TraceRecord(timestamp=1500, input_length=4, output_length=1, hash_ids=[9])]
    profile = profile_trace(records, block_tokens=4)
    assert (profile.requests, profile.input_median, profile.output_p95) == (3, 10, 5)
    assert profile.prefix_sharing_rate == pytest.approx(8 / 26)  # two shared blocks of 4 tokens
    assert profile.radix_reuse_rate == pytest.approx(8 / 26)
    assert (profile.request_rate, profile.peak_request_rate) == (1.5, 2.0)
    assert profile.peak_concurrency is None


def test_radix_reuse_needs_the_whole_prefix_not_just_a_seen_block() -> None:
    # Block 5 was seen, but after a different first block: a prefix cache cannot serve it.
    records = [TraceRecord(timestamp=0, input_length=8, output_length=1, hash_ids=[1, 5]),
               TraceRecord(timestamp=1, input_length=8, output_length=1, hash_ids=[2, 5])]
    assert profile_trace(records, block_tokens=4).radix_reuse_rate == 0.0


def test_the_cli_writes_a_trace_and_profiles_one(tmp_path, word_tokenizer_dir) -> None:
    out = tmp_path / "trace.jsonl"
    runner = CliRunner()
    written = runner.invoke(main, ["profile", str(_conversation_log(tmp_path)), "--tokenizer", str(word_tokenizer_dir),
                                   "--trace-out", str(out), "--block-tokens", "4"])
    assert written.exit_code == 0, written.output
    assert "trace of 3 requests written" in written.output
    profiled = runner.invoke(main, ["profile", str(out), "--trace", "--block-tokens", "4", "--json"])
    assert profiled.exit_code == 0, profiled.output
    assert msgspec.json.decode(profiled.output.splitlines()[-1])["requests"] == 3
    refused = runner.invoke(main, ["profile", str(out)])
    assert refused.exit_code == 2 and "--tokenizer" in refused.output
