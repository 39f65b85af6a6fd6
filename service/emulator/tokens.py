"""The emulator's tokenizer: one token per whitespace-separated word, with stable ids.

No model tokenizer is available without the network, and none is needed: what matters to the engine model
is how many tokens a prompt has and which prefixes two prompts share, and both survive this mapping
exactly (equal words give equal ids). The load generator writes prompts one word per token.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

VOCAB_SIZE = 151_000
# Radix-tree keys cover this many tokens: a cache hit is counted in whole blocks of real token ids,
# like SGLang's paged radix cache with a page of this size.
BLOCK_TOKENS = 16
_OUTPUT_WORDS = ("the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "with", "on", "this", "be",
                 "are", "by", "at", "from", "or", "an", "was", "we", "can", "not", "all", "which", "their", "has")
_KEY_MASK = (1 << 62) - 1


def encode(text: str) -> list[int]:
    """Token ids of `text`: one per word."""
    return [zlib.crc32(word.encode()) % VOCAB_SIZE for word in text.split()]


def chat_ids(messages: Iterable[dict[str, object]]) -> list[int]:
    """Token ids of a chat rendered with a ChatML-like template (role marker, content, end marker)."""
    ids: list[int] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):  # OpenAI content parts: keep the text parts
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        ids += encode(f"<|im_start|>{message.get('role', 'user')} {content or ''} <|im_end|>")
    return ids + encode("<|im_start|>assistant")


def blocks_of(ids: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Radix-cache blocks `(key, tokens)` of a prompt: a key per `BLOCK_TOKENS` ids, hashed from their values."""
    blocks = []
    for start in range(0, len(ids), BLOCK_TOKENS):
        chunk = tuple(ids[start:start + BLOCK_TOKENS])
        blocks.append((hash(chunk) & _KEY_MASK, len(chunk)))
    return tuple(blocks)


def output_words(seed: int, start: int, count: int) -> list[str]:
    """The words generated for tokens `start .. start+count-1` of a request (deterministic per request)."""
    return [_OUTPUT_WORDS[(seed * 31 + index * 7) % len(_OUTPUT_WORDS)] for index in range(start, start + count)]


def output_ids(seed: int, start: int, count: int) -> list[int]:
    """Token ids of `output_words`."""
    return word_ids(output_words(seed, start, count))


def word_ids(words: Iterable[str]) -> list[int]:
    """Token ids of generated words, one each."""
    return [zlib.crc32(word.encode()) % VOCAB_SIZE for word in words]
