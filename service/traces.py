"""Request traces in Mooncake's JSON-lines format: reading one for a scenario, writing one from a request log.

One request per line: `{"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [ids]}`, the format
of the traces Mooncake published (kvcache-ai/Mooncake FAST25-release) and of bench_serving's `mooncake`
dataset. A hash id stands for one block of `block_tokens` prompt tokens (the last block may be shorter), so
the trace carries lengths, arrival times and prefix sharing, never text.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from difflib import get_close_matches
from pathlib import Path

import msgspec
import numpy as np

from service.domain import TRACE_BLOCK_TOKENS, TraceRecord
from service.strict_toml import InputFileError, find_unknown_key, parse_msgspec_path

__all__ = ["TraceBuilder", "read_trace", "trace_sharing", "write_trace"]

_KEYS = TraceRecord.__struct_fields__
_RECORD_INFO = msgspec.inspect.type_info(TraceRecord)
_DECODER = msgspec.json.Decoder(TraceRecord)
_ENCODER = msgspec.json.Encoder()


def trace_sharing(records: Sequence[TraceRecord], block_tokens: int = TRACE_BLOCK_TOKENS) -> float:
    """The casebook's sorted-adjacent prefix sharing rate over block ids (shared blocks count their tokens)."""
    blocks = [r.blocks(block_tokens) for r in records]
    keys = sorted((tuple(h for h, _ in b), k) for k, b in enumerate(blocks))
    shared = 0
    for (a, k), (b, _) in zip(keys, keys[1:], strict=False):
        common = 0
        while common < min(len(a), len(b)) and a[common] == b[common]:
            common += 1
        shared += sum(tokens for _, tokens in blocks[k][:common])
    return shared / max(sum(r.input_length for r in records), 1)


def read_trace(path: Path) -> list[TraceRecord]:
    """Every record of a JSON-lines trace, in file order; blank lines are skipped.

    Raises:
        InputFileError: The file is missing, or a line is not a record; the error names the line and the field.
    """
    if not path.is_file():
        raise InputFileError("trace file not found", file=str(path), line=None, field="bench.trace.file",
                             hint="give the path of a JSON-lines trace, relative to the scenario file")
    records: list[TraceRecord] = []
    with path.open("rb") as trace:
        for number, raw in enumerate(trace, start=1):
            if not raw.strip():
                continue
            try:
                records.append(_DECODER.decode(raw))
            except (msgspec.DecodeError, msgspec.ValidationError) as exc:
                raise _line_error(path, number, raw, exc) from None
    if not records:
        raise InputFileError("the trace holds no records", file=str(path), line=None, field="bench.trace.file",
                             hint=f"one JSON object per line with {', '.join(_KEYS)}")
    return records


def _line_error(path: Path, number: int, raw: bytes, exc: Exception) -> InputFileError:
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return InputFileError(f"not valid JSON ({exc})", file=str(path), line=number, field=None,
                              hint="one JSON object per line")
    unknown = find_unknown_key(data, _RECORD_INFO, []) if isinstance(data, dict) else None
    if unknown is not None:
        key = unknown[1]
        near = get_close_matches(key, _KEYS, n=1, cutoff=0.5)
        return InputFileError(f"unknown key `{key}`", file=str(path), line=number, field=key,
                              hint=f"did you mean `{near[0]}`?" if near else f"a record has {', '.join(_KEYS)}")
    message = str(exc).split(" - at ")[0]
    field = ".".join(str(part) for part in parse_msgspec_path(str(exc))) or None
    return InputFileError(message + (f" at `{field}`" if field else ""), file=str(path), line=number, field=field,
                          hint=f"a record has {', '.join(_KEYS)}; timestamp in ms, lengths in tokens")


def write_trace(path: Path, records: list[TraceRecord]) -> None:
    """Write records as a JSON-lines trace (one object per line, Mooncake's key order)."""
    with path.open("wb") as out:
        for record in records:
            out.write(_ENCODER.encode(record))
            out.write(b"\n")


class TraceBuilder:
    """Turns prompts (token ids) into trace records whose hash ids name their blocks.

    Block k of a prompt is hashed together with the hash of block k - 1, as a prefix cache keys its pages, so
    two prompts get the same id for a block only when they agree on every token up to its end. Ids are
    numbered by first appearance (0, 1, 2, ...), as in Mooncake's traces; the last, shorter block of a prompt
    gets an id of its own content too.
    """

    def __init__(self, block_tokens: int = TRACE_BLOCK_TOKENS) -> None:
        self.block_tokens = block_tokens
        self._ids: dict[bytes, int] = {}

    def record(self, timestamp_ms: float, prompt: np.ndarray, output_length: int) -> TraceRecord:
        """The record of one request: `prompt` holds its token ids (any integer dtype)."""
        tokens = np.ascontiguousarray(prompt, dtype=np.uint32)
        digest, hash_ids = b"", []
        for start in range(0, len(tokens), self.block_tokens):
            block = tokens[start:start + self.block_tokens].tobytes()
            digest = hashlib.blake2b(digest + block, digest_size=16).digest()
            hash_ids.append(self._ids.setdefault(digest, len(self._ids)))
        return TraceRecord(timestamp=round(float(timestamp_ms), 3), input_length=max(len(tokens), 1),
                           output_length=max(int(output_length), 1), hash_ids=hash_ids)
