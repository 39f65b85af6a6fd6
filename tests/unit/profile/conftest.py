"""Small tokenizers trained locally on generated text (no downloads)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

CHATML = ["<|im_start|>", "<|im_end|>"]
WORDS = [f"w{i}" for i in range(200)]


def _corpus(seed: int, lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=30)) for _ in range(lines)]


@pytest.fixture(scope="session")
def word_tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A word-level tokenizer: every whitespace-separated word is one token, so counts are easy to know."""
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator(_corpus(1), trainers.WordLevelTrainer(special_tokens=["[UNK]", *CHATML]))
    folder = tmp_path_factory.mktemp("word-tokenizer")
    tok.save(str(folder / "tokenizer.json"))
    return folder


@pytest.fixture(scope="session")
def bpe_tokenizer_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A byte-level BPE with ChatML special tokens and a BOS post-processor, like production tokenizers."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", *CHATML],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(2), trainer)
    bos = ("<s>", tok.token_to_id("<s>"))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[bos])
    path = tmp_path_factory.mktemp("bpe-tokenizer") / "tokenizer.json"
    tok.save(str(path))
    return path
