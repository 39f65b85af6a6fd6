"""The emulator reads launch argv as the emulated version's argparse would, and exits 2 otherwise."""

from __future__ import annotations

import subprocess
import sys

import pytest

from service.emulator import ArgvError, parse_server_argv


def test_flags_are_read_per_version() -> None:
    args = parse_server_argv(["--model-path", "Qwen/Qwen3.6-27B", "--tp", "2", "--max-prefill-tokens", "16k",
                              "--enable-metrics", "--attn-dp-size", "2"], "0.5.23")
    assert args.server.tp_size == 2  # `--tp` is a unique abbreviation of --tp-size, as argparse accepts
    assert args.server.max_prefill_tokens == 16000
    assert args.server.attention_dp_size == 2
    assert args.get("enable_metrics") is True
    old = parse_server_argv(["--model-path", "m", "--cuda-graph-max-bs", "64"], "0.5.9")
    assert old.server.cuda_graph_max_bs == 64


@pytest.mark.parametrize(("argv", "message"), [
    # Removed in 0.5.20; argparse then reads it as an abbreviation of two newer flags.
    (["--model-path", "m", "--cuda-graph-max-bs", "64"], "ambiguous option: --cuda-graph-max-bs could match"),
    (["--model-path", "m", "--bogus-flag"], "unrecognized arguments: --bogus-flag"),
    (["--model-path", "m", "--kv-cache-dtype", "fp7"], "invalid choice: 'fp7'"),
    (["--model-path", "m", "--tp-size", "two"], "invalid int value: 'two'"),
    (["--model-path", "m", "--enable"], "ambiguous option: --enable"),
    (["--tp-size", "2"], "required: --model-path"),
])
def test_what_argparse_refuses(argv: list[str], message: str) -> None:
    with pytest.raises(ArgvError) as caught:
        parse_server_argv(argv, "0.5.23")
    assert message in caught.value.message


def test_the_process_exits_2_like_argparse() -> None:
    done = subprocess.run([sys.executable, "-m", "service.emulator", "--model-path", "m", "--enable-ep-moe"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "error: unrecognized arguments: --enable-ep-moe" in done.stderr
