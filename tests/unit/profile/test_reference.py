"""The fast profile equals a straightforward computation: whole-text tokenization, sorting and a trie replay.

A few thousand generated lines mix chat messages, templated prompt strings and plain inputs, with unicode,
whitespace runs, punctuation against spaces, special and added tokens inside the text, and empty texts.
"""

import json
import random
import statistics
from pathlib import Path

import pytest
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from service.profile import SegmentTokenizer, profile_log, read_log
from service.profile.records import GENERATION_PROMPT, render_message
from service.profile.words import word_cut_is_exact

WORDS = ["the", "cache", "prefix", "token", "Radix", "batch", "x", "ok", "I'm", "we've", "42", "3.14", "café",
         "naïve", "日本語", "Ωmega", "🙂", "(note)", "[1]", "a_b", "--flag", "e.g.", "\"quoted\"", "it's", "x+y=z"]
GAPS = [" "] * 12 + ["  ", "\t", "\n", "\n\n", " \n ", ", ", ". ", " - ", "", "   ", "\u00a0", "\u3000"]
INSERTS = ["<|im_start|>", "<|im_end|>", "<think>", "<|endoftext|>"]
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _text(rng: random.Random, words: int) -> str:
    parts = []
    for _ in range(words):
        parts += [rng.choice(WORDS), rng.choice(GAPS)]
        if rng.random() < 0.02:
            parts.append(rng.choice(INSERTS))
    text = "".join(parts)
    return rng.choice(["", " ", "\n"]) + text if rng.random() < 0.2 else text


def _lines(rng: random.Random, count: int) -> list[dict[str, object]]:
    systems = [_text(rng, 60) for _ in range(3)]
    rows: list[dict[str, object]] = []
    while len(rows) < count:
        history = [("system", rng.choice(systems))]
        for _ in range(rng.randint(1, 4)):
            user, answer = _text(rng, rng.randint(0, 25)), _text(rng, rng.randint(0, 30))
            turns = [*history, ("user", user)]
            kind = rng.random()
            if kind < 0.15:
                prompt = "".join(render_message(r, c) for r, c in turns) + GENERATION_PROMPT
                rows.append({"prompt": prompt, "completion": answer, "ts": len(rows) * 0.1, "latency": 1.5})
            elif kind < 0.25:
                rows.append({"input": user, "output": {"choices": [{"text": answer}]}})
            else:
                rows.append({"messages": [{"role": r, "content": c} for r, c in turns], "completion": answer,
                             "timestamp": len(rows) * 0.1, "latency": 2.0})
            history += [("user", user), ("assistant", answer)]
    return rows[:count]


def _byte_level(corpus: list[str], pattern: str | None) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    if pattern is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:  # Qwen's layout: a Split with its own pattern, then bytes mapped without the GPT-2 regex
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    return tok


def _metaspace(corpus: list[str], pattern: str | None) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=500, show_progress=False,
                                                        special_tokens=["<unk>", "<|im_start|>", "<|im_end|>"]))
    return tok


def _no_pre_tokenizer(corpus: list[str], pattern: str | None) -> Tokenizer:
    tok = _byte_level(corpus, None)
    tok.pre_tokenizer = None
    tok.normalizer = normalizers.Sequence([normalizers.Replace(" ", "Ġ"), normalizers.Replace("\n", "Ċ")])
    return tok


TOKENIZERS = {"gpt2": (_byte_level, None), "qwen": (_byte_level, QWEN_PATTERN), "metaspace": (_metaspace, None),
              "no-pre-tokenizer": (_no_pre_tokenizer, None)}


@pytest.fixture(scope="module")
def tricky_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tricky") / "requests.jsonl"
    rows = _lines(random.Random(7), 2_000)
    path.write_text("\n".join(json.dumps(r, ensure_ascii=bool(i % 2)) for i, r in enumerate(rows)) + "\n")
    return path


@pytest.fixture(scope="module", params=sorted(TOKENIZERS))
def tricky_tokenizer(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    build, pattern = TOKENIZERS[request.param]
    tok = build([_text(random.Random(i), 40) for i in range(300)], pattern)
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False)])
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def reference(tricky_log: Path, tricky_tokenizer: Path) -> tuple[list[list[int]], list[list[int]]]:
    """Each line's prompt and completion tokenized whole by the tokenizer itself."""
    tok = Tokenizer.from_file(str(tricky_tokenizer))
    records, _, _ = read_log(tricky_log)
    prompts = [e.ids for e in tok.encode_batch(["".join(r.prompt_pieces) for r in records])]
    outputs = [e.ids for e in tok.encode_batch([r.completion for r in records], add_special_tokens=False)]
    return prompts, outputs


def _lcp(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


def _trie_replay(prompts: list[list[int]], outputs: list[list[int]]) -> int:
    """Tokens a never-evicting radix cache serves, walking and filling a trie in log order."""
    root: dict[int, dict] = {}
    served = 0
    for prompt, output in zip(prompts, outputs, strict=True):
        node, matched = root, 0
        for token in prompt:
            if token not in node:
                break
            node, matched = node[token], matched + 1
        served += min(matched, len(prompt) - 1) if prompt else 0
        node = root
        for token in prompt + output:
            node = node.setdefault(token, {})
    return served


def test_token_ids_equal_whole_text_tokenization(tricky_log, tricky_tokenizer, reference):
    prompts, outputs = reference
    records, _, _ = read_log(tricky_log)
    segmenter = SegmentTokenizer.from_path(tricky_tokenizer)
    fast_prompts = segmenter.encode_prompts([r.prompt_pieces for r in records])
    fast_outputs = segmenter.encode_texts([r.completion for r in records])
    assert [p.tolist() for p in fast_prompts] == prompts
    assert [o.tolist() for o in fast_outputs] == outputs


def test_profile_equals_the_straightforward_computation(tricky_log, tricky_tokenizer, reference):
    prompts, outputs = reference
    measured = profile_log(tricky_log, tricky_tokenizer)
    ins, outs = [len(p) for p in prompts], [len(o) for o in outputs]
    total = sum(ins)
    ordered = sorted(prompts)
    assert measured.requests == len(prompts) == 2_000
    assert (measured.input_median, measured.input_p95) == (statistics.median(ins), sorted(ins)[int(len(ins) * 0.95)])
    assert (measured.output_median, measured.output_p95) == (statistics.median(outs),
                                                             sorted(outs)[int(len(outs) * 0.95)])
    shared = sum(_lcp(a, b) for a, b in zip(ordered, ordered[1:], strict=False))
    assert measured.prefix_sharing_rate == shared / total
    assert measured.radix_reuse_rate == _trie_replay(prompts, outputs) / total


def test_word_cut_is_refused_without_a_pre_tokenizer(tmp_path):
    tok = _no_pre_tokenizer([_text(random.Random(i), 40) for i in range(100)], None)
    assert not word_cut_is_exact(tok, ["<|im_start|>", "<|im_end|>"])
    assert word_cut_is_exact(_byte_level([_text(random.Random(i), 40) for i in range(100)], None), [])
