"""Tokenize a whole log quickly and exactly with a Hugging Face `tokenizers` tokenizer.json.

A log repeats most of its text: every request carries the same system prompt, and chat requests carry their
whole history. Text is therefore cut into segments at the tokenizer's own special tokens (the tokenizer
splits there itself before any model runs, so the cut changes no token), each distinct segment is
tokenized once, and a prompt's ids are the concatenation of its segments' ids plus what the post-processor
adds (a BOS token, for example). Chat messages are separate segments too; with a ChatML-style tokenizer
whose role markers are special tokens this is again exact, otherwise a message boundary counts as a token
boundary. A message's content is also cut from its role header ("assistant\n") when it starts with a letter
or digit and the tokenizer passes a probe showing that such a cut changes no token (true of the GPT-2,
Llama 3 and Qwen pre-tokenizer patterns, where a newline never joins the next word), so an answer and the
same answer resent in the next turn's history are tokenized once.

Pieces between two such cuts form a chunk, kept as a tuple of the record's own strings: a message resent in
a later turn is found by hashing, without joining its text again. Below the segments, a word cache
(`service.profile.words`) tokenizes each distinct word once when the tokenizer's pre-tokenizer proves that
cut exact too; the tokenizer itself (about 0.5 M tokens per CPU second here) then sees only new words and
the segments the word cut cannot take. Ids are joined by one numpy concatenation per batch of prompts.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from itertools import chain
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from service.profile.words import WordCache, unsplit_added_tokens, word_cut_is_exact

ENCODE_BATCH = 4096
TokenIds = np.ndarray
NO_IDS = np.zeros(0, dtype=np.uint32)


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
        split_tokens = _split_special_tokens(tokenizer)
        self._split = _alternatives(split_tokens)
        starts = {t[0] for t in split_tokens}
        self._split_start = starts.pop() if len(starts) == 1 else None  # "<" for ChatML: most text lacks it
        self._unsplit = unsplit_added_tokens(tokenizer, split_tokens)
        self._words = WordCache(tokenizer) if word_cut_is_exact(tokenizer, split_tokens) else None
        self._prefix, self._suffix = _post_processor_ids(tokenizer)
        self._newline_cut = _newline_cut_is_exact(tokenizer)
        self._cache: dict[str, TokenIds] = {}  # segment -> ids, shared by prompts and completions
        self._chunk_ids: dict[tuple[str, ...], TokenIds] = {}  # chunk (its pieces) -> ids of its segments

    @classmethod
    def from_path(cls, path: Path) -> SegmentTokenizer:
        """Load from a folder holding tokenizer.json or from the file itself."""
        return cls(load_tokenizer(path))

    def encode_prompts(self, prompts: Sequence[Sequence[str]], templated: Sequence[bool] = ()) -> list[TokenIds]:
        """Token ids (uint32) of each prompt, given as text pieces, with the post-processor's special tokens.

        A prompt marked in `templated` was rendered by the model's chat template, which writes its own special
        tokens: it gets none added (as `apply_chat_template` tokenizes).
        """
        if not any(templated):
            return self._encode(prompts, with_special=True)
        ids = self._encode(prompts, with_special=False)
        plain = [i for i, rendered in enumerate(templated) if not rendered] + list(range(len(templated), len(prompts)))
        for i, with_special in zip(plain, self._encode([prompts[i] for i in plain], with_special=True), strict=True):
            ids[i] = with_special
        return ids

    def encode_texts(self, texts: Iterable[str]) -> list[TokenIds]:
        """Token ids (uint32) of plain texts such as completions, without special tokens."""
        return self._encode([[text] for text in texts], with_special=False)

    def _encode(self, documents: Sequence[Sequence[str]], with_special: bool) -> list[TokenIds]:
        chunk_ids = self._chunk_ids
        layouts = [self._chunks(pieces) for pieces in documents]
        fresh = set(chain.from_iterable(layouts)).difference(chunk_ids)
        if fresh:
            self._learn_chunks(list(fresh))
        prefix, suffix = (self._prefix, self._suffix) if with_special else ([], [])
        if prefix or suffix:
            head, tail = (np.asarray(prefix, dtype=np.uint32),), (np.asarray(suffix, dtype=np.uint32),)
            return concatenate_each([(*head, *map(chunk_ids.__getitem__, layout), *tail) for layout in layouts])
        return concatenate_each([tuple(map(chunk_ids.__getitem__, layout)) for layout in layouts])

    def _learn_chunks(self, chunks: list[tuple[str, ...]]) -> None:
        """Tokenize the segments of new chunks that no earlier chunk had, then store each chunk's ids."""
        cache = self._cache
        layouts = [self._segments("".join(chunk)) for chunk in chunks]
        fresh = list(set(chain.from_iterable(layouts)).difference(cache))
        cache.update(zip(fresh, self._encode_unique(fresh), strict=True))
        ids = concatenate_each([tuple(map(cache.__getitem__, layout)) for layout in layouts])
        self._chunk_ids.update(zip(chunks, ids, strict=True))

    def _chunks(self, pieces: Sequence[str]) -> list[tuple[str, ...]]:
        """Group pieces into chunks of text, cut only after a newline before a letter or digit.

        A chunk stays a tuple of pieces, so a chunk seen before is found without joining its text again.
        """
        if len(pieces) == 1 or not self._newline_cut:
            return [tuple(pieces)] if any(pieces) else []
        cuts = [0]
        after_newline = False  # whether the text so far ends with a newline
        for i, piece in enumerate(pieces):
            if piece:
                if after_newline and piece[0].isalnum():
                    cuts.append(i)
                after_newline = piece[-1] == "\n"
        if not any(pieces):
            return []
        cuts.append(len(pieces))
        return [tuple(pieces[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]

    def _segments(self, text: str) -> list[str]:
        """The text cut at special tokens, which stand alone (empty pieces dropped)."""
        if self._split is None or (self._split_start is not None and self._split_start not in text):
            return [text] if text else []
        return list(filter(None, self._split.split(text)))

    def _encode_unique(self, segments: list[str]) -> list[TokenIds]:
        if self._words is None:
            return self._encode_whole(segments)
        unsplit = self._unsplit
        whole = [i for i, s in enumerate(segments) if unsplit is not None and unsplit.search(s)]
        if not whole:
            return self._words.encode(segments)
        kept = set(whole)
        by_words = iter(self._words.encode([s for i, s in enumerate(segments) if i not in kept]))
        by_whole = iter(self._encode_whole([segments[i] for i in whole]))
        return [next(by_whole) if i in kept else next(by_words) for i in range(len(segments))]

    def _encode_whole(self, segments: list[str]) -> list[TokenIds]:
        encoded: list[TokenIds] = []
        for begin in range(0, len(segments), ENCODE_BATCH):
            batch = self.tokenizer.encode_batch_fast(segments[begin:begin + ENCODE_BATCH], add_special_tokens=False)
            encoded.extend(np.asarray(e.ids, dtype=np.uint32) for e in batch)
        return encoded


def concatenate_each(groups: list[tuple[TokenIds, ...]]) -> list[TokenIds]:
    """`np.concatenate` of each group, done as one concatenation cut into views (one call, not one per group)."""
    parts = list(chain.from_iterable(groups))
    if not parts:
        return [NO_IDS] * len(groups)
    flat = np.concatenate(parts, dtype=np.uint32)
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)  # where each part starts in `flat`, then the end
    np.cumsum(np.fromiter(map(len, parts), dtype=np.int64, count=len(parts)), out=offsets[1:])
    group_ends = np.cumsum(np.fromiter(map(len, groups), dtype=np.int64, count=len(groups)))
    bounds = offsets[np.concatenate([[0], group_ends])].tolist()
    return [flat[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _split_special_tokens(tokenizer: Tokenizer) -> list[str]:
    # Only plain special tokens are safe cut points: with lstrip/rstrip the tokenizer also swallows the
    # neighbouring whitespace, and a normalized token may match only after normalization (tokenizers
    # `added_vocabulary.rs`).
    return [t.content for t in tokenizer.get_added_tokens_decoder().values()
            if t.special and t.content and not t.lstrip and not t.rstrip and not t.normalized]


def _alternatives(tokens: list[str]) -> re.Pattern[str] | None:
    if not tokens:
        return None
    alternatives = "|".join(re.escape(s) for s in sorted(tokens, key=len, reverse=True))
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
    if tokenizer.pre_tokenizer is None:
        return False  # the model sees the whole text, so a merge may join the newline and the word

    def ids(text: str) -> list[int]:
        return list(tokenizer.encode(text, add_special_tokens=False).ids)

    return all(ids(head + tail) == ids(head) + ids(tail) for head, tail in NEWLINE_PROBES)
