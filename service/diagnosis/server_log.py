"""Read the SGLang server log lines the casebook reads: preemption warnings and speculative accept length.

Recognised lines:
- casebook case 3: `Warning: cache pool exhausted, preempting 14 requests`;
- SGLang's scheduler (srt/managers/scheduler.py): `KV cache pool is full. Retract requests. #retracted_reqs: 3`;
- casebook cases 1 and 3: `accept_length_mean: 2.14 / 6`, `accept_rate: 0.357`, `draft_overhead_ratio: 0.284`;
- SGLang's decode batch line: `Decode batch. ... accept len: 3.82, ...`.
"""

from __future__ import annotations

import re

import msgspec

_PREEMPTING = re.compile(r"preempting\s+(\d+)\s+requests?", re.IGNORECASE)
_RETRACTED = re.compile(r"#retracted_reqs:\s*(\d+)")
_ACCEPT_MEAN = re.compile(r"accept_length_mean:\s*([\d.]+)(?:\s*/\s*(\d+))?")
_ACCEPT_LEN = re.compile(r"accept len:\s*([\d.]+)")
_ACCEPT_RATE = re.compile(r"accept_rate:\s*([\d.]+)")
_DRAFT_OVERHEAD = re.compile(r"draft_overhead_ratio:\s*([\d.]+)")


class LogReading(msgspec.Struct, kw_only=True):
    """What a server log says about retractions and speculative decoding.

    Attributes:
        preemption_warnings: Lines that announced preempted or retracted requests.
        preempted_requests: Requests those lines named, summed.
        accept_length: The last speculative accept length logged.
        draft_tokens: Draft tokens proposed per step, when logged as `x / N`.
        accept_rate: The last speculative accept rate logged.
        draft_overhead_ratio: The last draft overhead ratio logged.
    """

    preemption_warnings: int = 0
    preempted_requests: int = 0
    accept_length: float | None = None
    draft_tokens: int | None = None
    accept_rate: float | None = None
    draft_overhead_ratio: float | None = None


def read_server_log(text: str) -> LogReading:
    """Scan log text (a server log, or a pasted benchmark session) for the lines above."""
    reading = LogReading()
    for line in text.splitlines():
        _read_preemption(line, reading)
        _read_speculative(line, reading)
    return reading


def _read_preemption(line: str, reading: LogReading) -> None:
    match = _PREEMPTING.search(line) or _RETRACTED.search(line)
    if match:
        reading.preemption_warnings += 1
        reading.preempted_requests += int(match.group(1))


def _read_speculative(line: str, reading: LogReading) -> None:
    if match := _ACCEPT_MEAN.search(line):
        reading.accept_length = float(match.group(1))
        if match.group(2):
            reading.draft_tokens = int(match.group(2))
    elif match := _ACCEPT_LEN.search(line):
        reading.accept_length = float(match.group(1))
    if match := _ACCEPT_RATE.search(line):
        reading.accept_rate = float(match.group(1))
    if match := _DRAFT_OVERHEAD.search(line):
        reading.draft_overhead_ratio = float(match.group(1))
