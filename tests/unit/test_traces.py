"""Request traces: the shipped example, reading with errors that name the line, scenarios that carry them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from service.domain import BenchSpec, TraceRecord, TraceSpec
from service.scenario import InputFileError, load_scenario, parse_scenario, scenario_from_data
from service.traces import TraceBuilder, read_trace, write_trace

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "traces" / "chat-sessions.toml"


def test_the_shipped_trace_is_what_its_script_writes() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_example_trace.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_example_scenario_loads_its_trace_from_next_to_it() -> None:
    scenario = load_scenario(EXAMPLE)
    trace = scenario.bench.trace
    assert trace is not None and trace.file == "chat-sessions.jsonl"
    assert len(trace.records) == scenario.bench.num_prompts == 1383
    assert trace.records[0].hash_ids == [0, 1, 2]


def test_a_trace_round_trips_through_a_file(tmp_path: Path) -> None:
    records = [TraceRecord(timestamp=0.5, input_length=600, output_length=7, hash_ids=[0, 1]),
               TraceRecord(timestamp=12.0, input_length=20, output_length=1)]
    write_trace(tmp_path / "t.jsonl", records)
    assert read_trace(tmp_path / "t.jsonl") == records


@pytest.mark.parametrize(("line", "message", "field"), [
    ('{"timestamp": 0, "input_len": 10, "output_length": 3}', "unknown key `input_len` (did you mean "
                                                              "`input_length`?)", "input_len"),
    ('{"timestamp": 0, "input_length": "ten", "output_length": 3}', "Expected `int`, got `str`", "input_length"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 3}', "at least 1 token", None),
    ('{"timestamp": 0, "input_length": 5, "output_length": 3, "hash_ids": [-1]}', "non-negative", None),
    ('{"timestamp": 0, "input_length": 5,', "not valid JSON", None),
])
def test_a_bad_line_names_the_file_the_line_and_the_field(tmp_path: Path, line: str, message: str,
                                                          field: str | None) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"timestamp": 0, "input_length": 5, "output_length": 3}\n\n' + line + "\n")
    with pytest.raises(InputFileError) as info:
        read_trace(path)
    assert info.value.line == 3 and info.value.file == str(path)
    assert message in str(info.value)
    assert info.value.field == field


def test_a_scenario_whose_trace_file_is_missing_says_where_it_looked(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace('file = "chat-sessions.jsonl"', 'file = "elsewhere.jsonl"')
    (tmp_path / "s.toml").write_text(text)
    with pytest.raises(InputFileError) as info:
        load_scenario(tmp_path / "s.toml")
    assert info.value.file == str(tmp_path / "elsewhere.jsonl")
    assert info.value.field == "bench.trace.file"


def test_a_scenario_sent_as_text_or_data_must_carry_its_records() -> None:
    with pytest.raises(InputFileError) as info:
        parse_scenario(EXAMPLE.read_text())
    assert info.value.field == "bench.trace.file"
    assert "bench.trace.records" in str(info.value)
    inline = {"name": "t", "model": "Qwen/Qwen3.6-27B", "deployment": {"groups": [{}]},
              "bench": {"dataset": "trace", "trace": {"records": [
                  {"timestamp": 0, "input_length": 100, "output_length": 5, "hash_ids": [3]}]}}}
    trace = scenario_from_data(inline).bench.trace
    assert trace is not None and trace.records[0].input_length == 100


@pytest.mark.parametrize(("bench", "message"), [
    ({"dataset": "trace"}, 'dataset "trace" needs a [bench.trace] table'),
    ({"trace": {"file": "t.jsonl"}}, 'set dataset = "trace"'),
    ({"dataset": "trace", "trace": {}}, "a trace needs `file`"),
    ({"dataset": "trace", "trace": {"file": "t.jsonl", "slowdown": -1}}, "slowdown must be 0 or more"),
])
def test_bench_trace_settings_are_checked_and_named(bench: dict[str, object], message: str) -> None:
    data = {"name": "t", "model": "Qwen/Qwen3.6-27B", "deployment": {"groups": [{}]}, "bench": bench}
    with pytest.raises(InputFileError) as info:
        scenario_from_data(data)
    assert message in str(info.value)
    assert (info.value.field or "").startswith("bench")


def test_block_ids_name_the_whole_prefix_so_far() -> None:
    builder = TraceBuilder(block_tokens=4)
    a = builder.record(0, np.arange(10), 5)
    b = builder.record(1, np.concatenate([np.arange(8), [99, 100]]), 5)  # same first 8 tokens, new tail
    c = builder.record(2, np.concatenate([[50], np.arange(1, 10)]), 5)  # differs in token 0: nothing shared
    assert (a.hash_ids, b.hash_ids) == ([0, 1, 2], [0, 1, 3])
    assert not set(c.hash_ids) & set(a.hash_ids)
    assert BenchSpec(dataset="trace", trace=TraceSpec(records=[a, b, c])).trace is not None
