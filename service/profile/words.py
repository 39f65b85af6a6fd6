"""A word-level token cache in front of a Hugging Face tokenizer: each distinct word is tokenized once.

Text is cut at every space that has a printable ASCII character on each side ("is the" -> "is", " the").
The pre-tokenizer patterns of GPT-2, Llama 3 and Qwen (and Whitespace, WhitespaceSplit, Metaspace) always
end a pre-token before such a space and start the next one at it, and the model tokenizes each pre-token on
its own (tokenizers `tokenizer/pre_tokenizer.rs`), so the ids of a text are the ids of its first word
followed by the ids of " " + each later word. A tokenizer gets the cut only when it has a pre-tokenizer and
a probe of every printable character on either side of the space, in varied context, changes no token; text
holding an added token that the special-token split has not already cut out is tokenized whole elsewhere
(an added token may swallow the space next to it).

Most text has only such spaces, so `str.split(" ")` cuts it; a text with any other space (a run of spaces,
a space next to a newline or a non-ASCII character, a space at either end) is cut by a regular expression
that skips those spaces. Ids are assembled with numpy gathers, never per token in Python.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import chain, cycle

import numpy as np
from tokenizers import Tokenizer

TokenIds = np.ndarray
WORD_CUT = re.compile(r"(?<=[!-~]) (?=[!-~])")
PRINTABLE = frozenset(chr(c) for c in range(0x21, 0x7F))
ENCODE_BATCH = 4096
WORD_BATCH = 8192  # texts cut into words at a time: about half a million words

# The probe pairs every printable character with a few of each kind on the other side of the space, each
# pair in one of 8 x 7 contexts: what comes before the left character and after the right one.
PROBE_PARTNERS = "aZq09.,'(-_<\\~\""
PROBE_HEADS = ["word", "", "12", "a.", "é", "x  ", "\n", "Ab"]
PROBE_TAILS = ["", "ord", "ello world", "x. 42", "é", "  y", "'s\n\nz"]


class WordCache:
    """Token ids of texts assembled from cached words (see the module docstring)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        """Wrap a tokenizer whose word cut has been proven exact (`word_cut_is_exact`)."""
        self.tokenizer = tokenizer
        self._index = _WordIndex()  # word -> k; table rows 2k and 2k + 1 hold ids of word and " " + word
        self._rows: list[TokenIds] = []
        self._starts_ok = np.zeros(0, dtype=bool)  # per word: starts with a printable ASCII character
        self._ends_ok = np.zeros(0, dtype=bool)  # per word: ends with one
        self._table = np.zeros(0, dtype=np.uint32)  # every row's ids, back to back
        self._starts = np.zeros(0, dtype=np.int64)
        self._lengths = np.zeros(0, dtype=np.int64)

    def encode(self, texts: Sequence[str]) -> list[TokenIds]:
        """Ids (uint32, no special tokens added) of each non-empty text, equal to the tokenizer's own."""
        encoded: list[TokenIds] = []
        for begin in range(0, len(texts), WORD_BATCH):  # bounds the words held at once
            encoded += self._encode_batch(texts[begin:begin + WORD_BATCH])
        return encoded

    def _encode_batch(self, texts: Sequence[str]) -> list[TokenIds]:
        words = [text.split(" ") for text in texts]
        counts, keys = self._rows_of(words)
        firsts = np.cumsum(counts) - counts
        # A space is a proven cut only with a printable character on each side.
        bad = ~(self._ends_ok[keys[:-1]] & self._starts_ok[keys[1:]])
        bad[firsts[1:] - 1] = False  # the pair straddling two texts is no cut
        irregular = np.unique(np.searchsorted(firsts, np.flatnonzero(bad) + 1, side="right") - 1)
        if len(irregular):
            counts, keys = self._recut(texts, irregular.tolist(), counts, keys)
            firsts = np.cumsum(counts) - counts
        spaced = np.ones(len(keys), dtype=np.int64)
        spaced[firsts] = 0
        return self._gather(2 * keys + spaced, counts)

    def _rows_of(self, words: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Words per text, and every word's index, learning new words."""
        counts = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
        flat = chain.from_iterable(words)
        keys = np.fromiter(map(self._index.__getitem__, flat), dtype=np.int64, count=int(counts.sum()))
        self._learn(self._index.take_new())
        return counts, keys

    def _recut(self, texts: Sequence[str], irregular: list[int], counts: np.ndarray,
               keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cut the irregular texts with `WORD_CUT` and splice their words in place of their `split(" ")` words."""
        redo_counts, redo_keys = self._rows_of([WORD_CUT.split(texts[t]) for t in irregular])
        firsts = (np.cumsum(counts) - counts).tolist()
        redo_ends = np.cumsum(redo_counts).tolist()
        parts, done = [], 0
        for t, redo_begin, redo_end in zip(irregular, [0, *redo_ends[:-1]], redo_ends, strict=True):
            parts += [keys[done:firsts[t]], redo_keys[redo_begin:redo_end]]
            done = firsts[t] + int(counts[t])
        parts.append(keys[done:])
        counts = counts.copy()
        counts[irregular] = redo_counts
        return counts, np.concatenate(parts)

    def _gather(self, rows: np.ndarray, counts: np.ndarray) -> list[TokenIds]:
        """Concatenate the table rows of each text."""
        lengths = self._lengths[rows]
        ends = np.cumsum(lengths)
        # Output position p inside row k reads table[starts[k] + p - (ends[k] - lengths[k])].
        gather = np.repeat(self._starts[rows] - (ends - lengths), lengths) + np.arange(int(ends[-1]), dtype=np.int64)
        ids = self._table[gather]
        text_ends = ends[np.cumsum(counts) - 1]
        text_starts = np.concatenate([[0], text_ends[:-1]])
        return [ids[a:b] for a, b in zip(text_starts.tolist(), text_ends.tolist(), strict=True)]

    def _learn(self, new: list[str]) -> None:
        """Tokenize words just indexed, alone and after a space, and append them to the table."""
        if not new:
            return
        texts = list(chain.from_iterable((word, " " + word) for word in new))
        for begin in range(0, len(texts), ENCODE_BATCH):
            batch = self.tokenizer.encode_batch_fast(texts[begin:begin + ENCODE_BATCH], add_special_tokens=False)
            self._rows.extend(np.asarray(e.ids, dtype=np.uint32) for e in batch)
        self._starts_ok = np.concatenate([self._starts_ok, [w[:1] in PRINTABLE for w in new]])
        self._ends_ok = np.concatenate([self._ends_ok, [w[-1:] in PRINTABLE for w in new]])
        self._lengths = np.fromiter(map(len, self._rows), dtype=np.int64, count=len(self._rows))
        self._starts = np.cumsum(self._lengths) - self._lengths
        self._table = np.concatenate(self._rows)


class _WordIndex(dict[str, int]):
    """Word -> number; a word not seen before gets the next number and is kept for learning."""

    def __init__(self) -> None:
        super().__init__()
        self._new: list[str] = []

    def __missing__(self, word: str) -> int:
        number = self[word] = len(self)
        self._new.append(word)
        return number

    def take_new(self) -> list[str]:
        """The words numbered since the last call, in number order."""
        new, self._new = self._new, []
        return new


def word_cut_is_exact(tokenizer: Tokenizer, split: Sequence[str]) -> bool:
    """Whether cutting text at a space between two printable ASCII characters changes no id.

    Args:
        tokenizer: The tokenizer.
        split: The added tokens that text is already cut at before it gets here.
    """
    if tokenizer.pre_tokenizer is None:
        return False  # without one the model sees the whole text and a merge may cross the cut
    if tokenizer.normalizer is not None and any(
            t.normalized and t.content not in split for t in tokenizer.get_added_tokens_decoder().values()):
        return False  # such a token matches normalized text, which a literal search cannot find
    pairs = [(head + left, f" {right}{tail}") for (left, right), head, tail in
             zip(_probe_pairs(), cycle(PROBE_HEADS), cycle(PROBE_TAILS), strict=False)]
    texts = [head + tail for head, tail in pairs] + list(chain.from_iterable(pairs))
    encoded = [e.ids for e in tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
    whole, parts = encoded[:len(pairs)], encoded[len(pairs):]
    return all(w == parts[2 * i] + parts[2 * i + 1] for i, w in enumerate(whole))


def _probe_pairs() -> list[tuple[str, str]]:
    printable = sorted(PRINTABLE)
    return [(c, p) for c in printable for p in PROBE_PARTNERS] + [(p, c) for c in printable for p in PROBE_PARTNERS]


def unsplit_added_tokens(tokenizer: Tokenizer, split: Sequence[str]) -> re.Pattern[str] | None:
    """A pattern finding the added tokens that the special-token split leaves inside text, or None."""
    rest = sorted({t.content for t in tokenizer.get_added_tokens_decoder().values()
                   if t.content and t.content not in split}, key=len, reverse=True)
    return re.compile("|".join(re.escape(s) for s in rest)) if rest else None
