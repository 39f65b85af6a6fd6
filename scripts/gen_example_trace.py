"""Write examples/traces/chat-sessions.jsonl: a generated multi-turn chat trace in Mooncake's format.

Ten minutes of a chat service: sessions start as a Poisson stream of 0.5 per second with a burst of four
times that between minutes 4 and 6; each session has one to eight turns (geometric, mean about 2.9) separated
by think times of 20 s on average; every prompt is one of three system prompts (1,800 / 1,200 / 600 tokens,
chosen by 60 / 30 / 10% of sessions), the conversation so far, and a new user message (log-normal, median
150 tokens, p95 1,500: pasted text); answers are log-normal with median 300 and p95 1,200 tokens. Prompts are
token ids, hashed into 512-token blocks by the same `TraceBuilder` that `sglang-tuner profile --trace-out`
uses, so a turn shares every block of its conversation's previous turn. Deterministic:

    .venv/bin/python scripts/gen_example_trace.py [--check]

`--check` regenerates the trace in memory and exits 1 when the shipped file differs. `--out FILE --hours H
--session-rate R` writes a longer or busier trace of the same kind (`bench/trace.py` times one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from service.domain import TraceRecord  # noqa: E402
from service.traces import TraceBuilder, write_trace  # noqa: E402

OUT = ROOT / "examples" / "traces" / "chat-sessions.jsonl"
SEED = 20261201
DURATION_S = 600.0
SESSION_RATE = 0.5
BURST = (240.0, 360.0, 4.0)  # start, end, rate multiplier
SYSTEM_PROMPTS = ((1800, 0.6), (1200, 0.3), (600, 0.1))
MAX_TURNS, TURN_CONTINUE = 8, 0.65
THINK_MEAN_S = 20.0
USER_MEDIAN, USER_P95 = 150, 1500
ANSWER_MEDIAN, ANSWER_P95 = 300, 1200


def _lognormal(rng: np.random.Generator, median: int, p95: int) -> int:
    sigma = np.log(p95 / median) / 1.645
    return int(np.clip(np.rint(rng.lognormal(np.log(median), sigma)), 8, 4 * p95))


def _session_starts(rng: np.random.Generator, duration_s: float, session_rate: float) -> list[float]:
    """Poisson session starts over the trace, thinned from the burst's rate (Lewis-Shedler)."""
    start, end, boost = (duration_s * BURST[0] / DURATION_S, duration_s * BURST[1] / DURATION_S, BURST[2])
    peak = session_rate * boost
    starts, t = [], 0.0
    while True:
        t += float(rng.exponential(1.0 / peak))
        if t >= duration_s:
            return starts
        rate = peak if start <= t < end else session_rate
        if rng.random() < rate / peak:
            starts.append(t)


def generate(seed: int = SEED, duration_s: float = DURATION_S, session_rate: float = SESSION_RATE
             ) -> list[TraceRecord]:
    """Every request of the trace, in time order (the defaults give the shipped example; the burst keeps its
    place, minutes 4 to 6 of 10, on a longer or shorter trace)."""
    rng = np.random.default_rng(seed)
    systems = [np.arange(n, dtype=np.uint32) + (k + 1) * 1_000_000 for k, (n, _) in enumerate(SYSTEM_PROMPTS)]
    weights = np.array([w for _, w in SYSTEM_PROMPTS])
    next_fresh = 100_000_000  # token ids of user messages and answers: consecutive, never repeated

    def fresh(count: int) -> np.ndarray:
        nonlocal next_fresh
        next_fresh += count
        return np.arange(next_fresh - count, next_fresh, dtype=np.uint32)

    requests: list[tuple[float, np.ndarray, int]] = []
    for start in _session_starts(rng, duration_s, session_rate):
        history = systems[int(rng.choice(len(systems), p=weights))]
        t = start
        for _ in range(MAX_TURNS):
            user = fresh(_lognormal(rng, USER_MEDIAN, USER_P95))
            prompt = np.concatenate([history, user])
            answer_len = _lognormal(rng, ANSWER_MEDIAN, ANSWER_P95)
            requests.append((t * 1000.0, prompt, answer_len))
            if rng.random() > TURN_CONTINUE:
                break
            answer = fresh(answer_len)
            history = np.concatenate([prompt, answer])
            t += float(rng.exponential(THINK_MEAN_S))
            if t >= duration_s:
                break
    requests.sort(key=lambda item: item[0])
    builder = TraceBuilder()
    return [builder.record(ts, prompt, out) for ts, prompt, out in requests]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing")
    parser.add_argument("--out", type=Path, default=OUT, help="where to write (default: the shipped example)")
    parser.add_argument("--hours", type=float, default=DURATION_S / 3600)
    parser.add_argument("--session-rate", type=float, default=SESSION_RATE, help="sessions started per second")
    args = parser.parse_args()
    records = generate(duration_s=args.hours * 3600, session_rate=args.session_rate)
    if args.check:
        tmp = OUT.with_suffix(".check.jsonl")
        try:
            write_trace(tmp, records)
            same = tmp.read_bytes() == OUT.read_bytes()
        finally:
            tmp.unlink(missing_ok=True)
        print("up to date" if same else f"{OUT} differs from what this script writes")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_trace(args.out, records)
    print(f"wrote {len(records)} requests to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
