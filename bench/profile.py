"""Time `sglang-tuner profile` end to end on a generated 100,000-line chat log.

Run: `.venv/bin/python -m bench.profile [--lines N] [--runs R]`. The log imitates a production chat
service: one dominant system prompt (two rarer ones), conversations of one to four turns whose history is
resent each turn, log-normal user message and completion lengths, a tenth of the lines as `prompt`
strings with the chat template already applied, and arrival times with latencies. The tokenizer is a
byte-level BPE with ChatML special tokens, trained here on the same vocabulary. Prints one JSON line:
lines, tokens, the wall seconds of each run and their median, the CPU seconds of each run (all threads of
the process, from getrusage, so a busy machine shows as wall time well above CPU time), the 1-minute load
average before and after each run, and the measured profile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import tempfile
import time
from pathlib import Path

import msgspec
import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from service.profile import SegmentTokenizer, profile_log, read_log
from service.profile.records import GENERATION_PROMPT, render_message

SYLLABLES = ["ka", "lo", "mi", "ne", "ra", "to", "su", "vi", "den", "gor", "pla", "ex", "in", "ter", "ion",
             "al", "ing", "the", "con", "str", "ay", "ou", "qu", "ph"]


class LogWriter:
    """Generates the chat log from a seeded random stream."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        pieces = self.rng.choice(SYLLABLES, size=(6_000, 4))
        sizes = self.rng.integers(1, 5, size=6_000)
        self.words = np.array(["".join(p[:n]) for p, n in zip(pieces, sizes, strict=True)])
        self.systems = [self.text(650) for _ in range(3)]

    def text(self, words: int) -> str:
        """`words` random words with sentence punctuation every ~12 words."""
        chosen = self.words[self.rng.zipf(1.3, size=max(words, 1)) % len(self.words)]
        for i in range(11, len(chosen), 12):
            chosen[i] += "."
        return " ".join(chosen)

    def length(self, median: float, sigma: float, cap: int) -> int:
        return int(min(cap, max(1, self.rng.lognormal(np.log(median), sigma))))

    def write(self, path: Path, lines: int) -> None:
        """Write `lines` request lines, conversation by conversation, in arrival order."""
        clock = 1_700_000_000.0
        written = 0
        with path.open("w") as out:
            while written < lines:
                system = self.systems[int(self.rng.choice(3, p=[0.8, 0.15, 0.05]))]
                history: list[str] = []
                for _ in range(int(self.rng.integers(1, 5))):
                    if written == lines:
                        break
                    clock += float(self.rng.exponential(0.05))
                    user, answer = self.text(self.length(30, 1.0, 1500)), self.text(self.length(60, 0.7, 1000))
                    out.write(json.dumps(self._line(system, history, user, answer, clock)) + "\n")
                    history += [user, answer]
                    written += 1

    def _line(self, system: str, history: list[str], user: str, answer: str, clock: float) -> dict[str, object]:
        timing = {"timestamp": round(clock, 3), "latency": round(float(self.rng.gamma(2.0, 1.5)), 3)}
        roles = ["system"] + ["user", "assistant"] * (len(history) // 2) + ["user"]
        contents = [system, *history, user]
        if self.rng.random() < 0.1:
            # A /generate-style line: the chat template already applied to the prompt text.
            prompt = "".join(render_message(r, c) for r, c in zip(roles, contents, strict=True)) + GENERATION_PROMPT
            return {"prompt": prompt, "completion": answer, **timing}
        messages = [{"role": r, "content": c} for r, c in zip(roles, contents, strict=True)]
        return {"messages": messages, "completion": answer, **timing}


def train_tokenizer(writer: LogWriter, path: Path) -> None:
    """A byte-level BPE (8,000 tokens) with ChatML special tokens, like Qwen's tokenizer in shape."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8_000, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([writer.text(300) for _ in range(3_000)], trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.save(str(path))


def main() -> None:
    """Generate the log and tokenizer, profile R times, print one JSON line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        writer = LogWriter()
        writer.write(folder / "requests.jsonl", args.lines)
        train_tokenizer(writer, folder / "tokenizer.json")
        seconds, cpu_seconds, load = [], [], []
        for _ in range(args.runs):
            load_before = os.getloadavg()[0]
            begin, begin_cpu = time.perf_counter(), _cpu_seconds()
            measured = profile_log(folder / "requests.jsonl", folder)
            seconds.append(time.perf_counter() - begin)
            cpu_seconds.append(_cpu_seconds() - begin_cpu)
            load.append([round(load_before, 2), round(os.getloadavg()[0], 2)])
        tokens = _token_totals(folder)
    print(json.dumps({
        "benchmark": "profile", "lines": args.lines, "runs": args.runs,
        "seconds_median": round(statistics.median(seconds), 2), "seconds": [round(s, 2) for s in seconds],
        "cpu_seconds": [round(s, 2) for s in cpu_seconds], "load_average_1m": load, **tokens,
        "python": platform.python_version(),
        "profile": msgspec.to_builtins(measured),
    }))


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process, summed over all its threads (the tokenizer's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _token_totals(folder: Path) -> dict[str, int]:
    """Input and output tokens in the log, and the distinct segment tokens actually sent to the tokenizer."""
    records, _, _ = read_log(folder / "requests.jsonl")
    segmenter = SegmentTokenizer.from_path(folder)
    prompts = segmenter.encode_prompts([r.prompt_pieces for r in records])
    outputs = segmenter.encode_texts(r.completion for r in records)
    return {"input_tokens": int(sum(len(p) for p in prompts)), "output_tokens": int(sum(len(o) for o in outputs))}


if __name__ == "__main__":
    main()
