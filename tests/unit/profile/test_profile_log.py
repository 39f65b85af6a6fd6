"""`profile_log` and `sglang-tuner profile` on small generated logs whose answers are known."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from service.cli import main
from service.profile import ProfileError, profile_log

SYSTEM = " ".join(f"w{i}" for i in range(20))  # 20 tokens shared by every request


def _write(tmp_path: Path, rows: list[object]) -> Path:
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def _shared_system_log(tmp_path: Path) -> Path:
    # Ten prompts: the shared 20-token system prompt, then 5 words starting with a distinct word.
    rows = [{"prompt": f"{SYSTEM} w{100 + i} w50 w51 w52 w53", "completion": " ".join(["w9"] * (i + 1))}
            for i in range(10)]
    return _write(tmp_path, rows)


def test_shared_system_prompt_gives_the_known_sharing_rate(tmp_path, word_tokenizer_dir):
    measured = profile_log(_shared_system_log(tmp_path), word_tokenizer_dir)
    assert measured.requests == 10 and measured.skipped_lines == 0
    assert (measured.input_median, measured.input_p95) == (25, 25)
    assert (measured.output_median, measured.output_p95) == (5.5, 10)
    assert measured.prefix_sharing_rate == pytest.approx(9 * 20 / 250)
    assert measured.radix_reuse_rate == pytest.approx(9 * 20 / 250)
    assert measured.peak_concurrency is None and measured.request_rate is None


def test_radix_reuse_sees_earlier_outputs_in_a_conversation(tmp_path, word_tokenizer_dir):
    turn_1 = {"prompt": "w1 w2 w3 w4", "completion": "w5 w6 w7"}
    turn_2 = {"prompt": "w1 w2 w3 w4 w5 w6 w7 w8", "completion": "w9"}
    path = _write(tmp_path, [turn_1, turn_2])
    assert profile_log(path, word_tokenizer_dir).radix_reuse_rate == pytest.approx(7 / 12)
    assert profile_log(path, word_tokenizer_dir, cache_outputs=False).radix_reuse_rate == pytest.approx(4 / 12)
    assert profile_log(path, word_tokenizer_dir).prefix_sharing_rate == pytest.approx(4 / 12)


def test_percentiles_use_the_casebook_index_definitions(tmp_path, word_tokenizer_dir):
    rows = [{"input": " ".join(["w1"] * n), "output": "w2"} for n in range(1, 21)]
    measured = profile_log(_write(tmp_path, rows), word_tokenizer_dir)
    assert measured.input_median == 10.5
    assert measured.input_p95 == 20  # sorted(ins)[int(20 * 0.95)] = sorted(ins)[19]


def test_timestamps_give_peak_concurrency_and_request_rates(tmp_path, word_tokenizer_dir):
    rows = [
        {"prompt": "w1", "completion": "w2", "timestamp": 1_700_000_000.0, "latency": 2},
        {"prompt": "w1", "completion": "w2", "ts": "2023-11-14T22:13:20.200+00:00", "end_time": 1_700_000_003},
        {"prompt": "w1", "completion": "w2", "start_time": "1700000000.5", "latency": 2.2},
        {"prompt": "w1", "completion": "w2", "timestamp": "2023-11-14T22:13:21.100Z", "latency": 0.1},
        {"prompt": "w1", "completion": "w2", "timestamp": 1_700_000_003.0},
    ]
    measured = profile_log(_write(tmp_path, rows), word_tokenizer_dir)
    assert measured.peak_concurrency == 4  # at t=1.1 s the first four requests are all in flight
    assert measured.peak_request_rate == 3  # three arrivals in the first second
    assert measured.request_rate == pytest.approx(5 / 4)  # five arrivals over four one-second windows


def test_chat_messages_and_openai_responses_are_read(tmp_path, word_tokenizer_dir):
    rows = [
        {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "w1 w2"},
                      {"role": "assistant", "content": "w3 w4 w5"}]},
        {"messages": [{"role": "system", "content": SYSTEM},
                      {"role": "user", "content": [{"type": "text", "text": "w6"}]}],
         "response": {"choices": [{"message": {"role": "assistant", "content": "w7"}}]}},
    ]
    measured = profile_log(_write(tmp_path, rows), word_tokenizer_dir)
    assert (measured.output_median, measured.output_p95) == (2, 3)
    # <|im_start|> system+20 words <|im_end|> <|im_start|> user w1 w2 <|im_end|> <|im_start|> assistant;
    # the newline between messages is no word, so it adds no token here.
    assert measured.input_p95 == 1 + 21 + 1 + 1 + 3 + 1 + 1 + 1


MALFORMED = [
    {"prompt": "w1", "completion": "w2"},
    "{not json",
    {"prompt": "w1"},
    ["a", "list"],
    {"prompt": "w1", "completion": "w2", "timestamp": "yesterday"},
    "",
    {"prompt": "w1 w2", "completion": "w2"},
]


def test_malformed_lines_are_skipped_with_their_line_numbers(tmp_path, word_tokenizer_dir):
    measured = profile_log(_write(tmp_path, MALFORMED), word_tokenizer_dir)
    assert measured.requests == 2
    assert measured.skipped_lines == 4
    assert [e.split(":")[0] for e in measured.errors] == ["line 2", "line 3", "line 4", "line 5"]
    assert "no `completion`" in measured.errors[1]


def test_strict_mode_fails_on_the_first_malformed_line(tmp_path, word_tokenizer_dir):
    with pytest.raises(ProfileError, match="line 2: not valid JSON"):
        profile_log(_write(tmp_path, MALFORMED), word_tokenizer_dir, strict=True)


def test_cli_prints_json_and_reports_skipped_lines(tmp_path, word_tokenizer_dir):
    log = _write(tmp_path, MALFORMED)
    result = CliRunner().invoke(main, ["profile", str(log), "--tokenizer", str(word_tokenizer_dir), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["requests"] == 2 and data["skipped_lines"] == 4
    assert "skipped line 3: no `completion`" in result.stderr


def test_cli_strict_exits_non_zero_naming_the_line(tmp_path, word_tokenizer_dir):
    log = _write(tmp_path, MALFORMED)
    result = CliRunner().invoke(main, ["profile", str(log), "--tokenizer", str(word_tokenizer_dir), "--strict"])
    assert result.exit_code == 1
    assert "line 2: not valid JSON" in result.output


def test_cli_text_output_reads_like_the_casebook_script(tmp_path, word_tokenizer_dir):
    result = CliRunner().invoke(main, ["profile", str(_shared_system_log(tmp_path)), "--tokenizer",
                                       str(word_tokenizer_dir / "tokenizer.json")])
    assert result.exit_code == 0, result.output
    assert "prefix sharing rate : 0.720" in result.output
    assert "input p95           : 25" in result.output
