"""A small word-level tokenizer trained locally (no downloads) for the profile_workload tool."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

WORDS = [f"w{i}" for i in range(100)]


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = random.Random(3)
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    corpus = [" ".join(rng.choices(WORDS, k=20)) for _ in range(200)]
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[UNK]", "<|im_start|>", "<|im_end|>"]))
    folder = tmp_path_factory.mktemp("mcp-tokenizer")
    tok.save(str(folder / "tokenizer.json"))
    return folder
