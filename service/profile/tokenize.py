"""Tokenize a whole log quickly and exactly with a Hugging Face `tokenizers` tokenizer.json.

A log repeats most of its text: every request carries the same system prompt, and chat requests carry their
whole history. Text is therefore cut into segments at the tokenizer's own special tokens (the tokenizer
splits there itself before any model runs, so the cut changes no token), each distinct segment is
tokenized once with `encode_batch_fast`, and a prompt's ids are the concatenation of its segments' ids plus
what the post-processor adds (a BOS token, for example). Chat messages are separate segments too; with a
ChatML-style tokenizer whose role markers are special tokens this is again exact, otherwise a message
boundary counts as a token boundary. A message's content is also cut from its role header ("assistant\n")
when it starts with a letter or digit and the tokenizer passes a probe showing that such a cut changes no
token (true of the GPT-2, Llama 3 and Qwen pre-tokenizer patterns, where a newline never joins the next
word), so an answer and the same answer resent in the next turn's history are tokenized once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

ENCODE_BATCH = 4096
TokenIds = np.ndarray


class TokenizerNotFound(FileNotFoundError):
    """No tokenizer.json at the given path."""


def load_tokenizer(path: Path) -> Tokenizer:
    """Load `path/tokenizer.json`, or `path` itself when it is the file.

    Raises:
        TokenizerNotFound: When neither exists.
    """
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise TokenizerNotFound(f"no tokenizer.json at {path}")
    return Tokenizer.from_file(str(file))


class SegmentTokenizer:
    """Tokenizes prompts as concatenations of cached segments (see the module docstring)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        """Wrap a tokenizer; truncation and padding are switched off so lengths are the real ones."""
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self._split = _special_token_pattern(tokenizer)
        self._prefix, self._suffix = _post_processor_ids(tokenizer)
        self._newline_cut = _newline_cut_is_exact(tokenizer)
        self._cache: dict[str, TokenIds] = {}  # segment -> ids, shared by prompts and completions

    @classmethod
    def from_path(cls, path: Path) -> SegmentTokenizer:
        """Load from a folder holding tokenizer.json or from the file itself."""
        return cls(load_tokenizer(path))

    def encode_prompts(self, prompts: Sequence[Sequence[str]]) -> list[TokenIds]:
        """Token ids (uint32) of each prompt, given as text pieces, with the post-processor's special tokens."""
        return self._encode(prompts, with_special=True)

    def encode_texts(self, texts: Iterable[str]) -> list[TokenIds]:
        """Token ids (uint32) of plain texts such as completions, without special tokens."""
        return self._encode([[text] for text in texts], with_special=False)

    def _encode(self, documents: Sequence[Sequence[str]], with_special: bool) -> list[TokenIds]:
        cache = self._cache
        fresh: dict[str, None] = {}
        chunk_layouts: dict[str, list[str]] = {}  # a resent message is split once
        layouts: list[list[str]] = []
        for pieces in documents:
            layout: list[str] = []
            for chunk in self._chunks(pieces):
                known = chunk_layouts.get(chunk)
                if known is None:
                    known = chunk_layouts[chunk] = self._segments(chunk)
                    fresh.update((s, None) for s in known if s not in cache)
                layout.extend(known)
            layouts.append(layout)
        cache.update(zip(fresh, self._encode_unique(list(fresh)), strict=True))
        prefix, suffix = (self._prefix, self._suffix) if with_special else ([], [])
        head = np.asarray(prefix, dtype=np.uint32)
        tail = np.asarray(suffix, dtype=np.uint32)
        out: list[TokenIds] = []
        for layout in layouts:
            parts = [cache[s] for s in layout]
            if len(parts) == 1 and not prefix and not suffix:
                out.append(parts[0])
            else:
                out.append(np.concatenate([head, *parts, tail]))
        return out

    def _chunks(self, pieces: Sequence[str]) -> list[str]:
        """Join pieces back into text, keeping only the cuts after a newline before a letter or digit."""
        chunks: list[str] = []
        current = ""
        for piece in pieces:
            if current and self._newline_cut and current[-1] == "\n" and piece[:1].isalnum():
                chunks.append(current)
                current = piece
            else:
                current += piece
        if current:
            chunks.append(current)
        return chunks

    def _segments(self, piece: str) -> list[str]:
        if self._split is None:
            return [piece] if piece else []
        return [s for s in self._split.split(piece) if s]

    def _encode_unique(self, segments: list[str]) -> list[TokenIds]:
        encoded: list[TokenIds] = []
        for begin in range(0, len(segments), ENCODE_BATCH):
            batch = self.tokenizer.encode_batch_fast(segments[begin:begin + ENCODE_BATCH], add_special_tokens=False)
            encoded.extend(np.asarray(e.ids, dtype=np.uint32) for e in batch)
        return encoded


def _special_token_pattern(tokenizer: Tokenizer) -> re.Pattern[str] | None:
    # Only plain special tokens are safe cut points: with lstrip/rstrip the tokenizer also swallows the
    # neighbouring whitespace, and a normalized token may match only after normalization (tokenizers
    # `added_vocabulary.rs`).
    safe = [t.content for t in tokenizer.get_added_tokens_decoder().values()
            if t.special and t.content and not t.lstrip and not t.rstrip and not t.normalized]
    if not safe:
        return None
    alternatives = "|".join(re.escape(s) for s in sorted(safe, key=len, reverse=True))
    return re.compile(f"({alternatives})")


def _post_processor_ids(tokenizer: Tokenizer) -> tuple[list[int], list[int]]:
    """Ids the post-processor puts before and after a single sequence (BOS/EOS, [CLS]/[SEP])."""
    probe = "a"
    plain = tokenizer.encode(probe, add_special_tokens=False).ids
    full = tokenizer.encode(probe, add_special_tokens=True).ids
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return full[:start], full[start + len(plain):]
    return [], []


NEWLINE_PROBES = [("user\n", "Hello there, world"), ("assistant\n", "42 is the answer"), ("system\n", "x"),
                  ("Question:\n\n", "Why not?"), ("  \n", "éclair au café")]


def _newline_cut_is_exact(tokenizer: Tokenizer) -> bool:
    """Whether tokenizing text cut after a newline before a letter or digit gives the same ids."""

    def ids(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    return all(ids(head + tail) == ids(head) + ids(tail) for head, tail in NEWLINE_PROBES)
