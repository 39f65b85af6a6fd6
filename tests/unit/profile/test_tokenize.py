"""Segment-cached tokenization gives exactly the tokenizer's own ids."""

import pytest
from tokenizers import Tokenizer

from service.profile import SegmentTokenizer, TokenizerNotFound, load_tokenizer
from service.profile.records import GENERATION_PROMPT, render_message

SYSTEM = "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 " * 5


def test_chat_prompts_match_whole_prompt_tokenization(bpe_tokenizer_file):
    whole = Tokenizer.from_file(str(bpe_tokenizer_file))
    segmenter = SegmentTokenizer.from_path(bpe_tokenizer_file)
    prompts = [
        [render_message("system", SYSTEM), render_message("user", "w3 w9, w12!\n  w40"), GENERATION_PROMPT],
        [render_message("system", SYSTEM), render_message("user", "w3"), render_message("assistant", "w5 w6"),
         render_message("user", "  w7\tw8 "), GENERATION_PROMPT],
        ["plain text <|im_start|>with w3<|im_end|> markers inside"],
    ]
    encoded = segmenter.encode_prompts(prompts)
    for pieces, ids in zip(prompts, encoded, strict=True):
        assert ids.tolist() == whole.encode("".join(pieces)).ids
    assert encoded[0][0] == whole.token_to_id("<s>")


def test_completions_carry_no_special_tokens(bpe_tokenizer_file):
    whole = Tokenizer.from_file(str(bpe_tokenizer_file))
    [ids] = SegmentTokenizer.from_path(bpe_tokenizer_file).encode_texts(["w1 w2 w3"])
    assert ids.tolist() == whole.encode("w1 w2 w3", add_special_tokens=False).ids


def test_missing_tokenizer_is_named(tmp_path):
    with pytest.raises(TokenizerNotFound, match="no tokenizer.json"):
        load_tokenizer(tmp_path)


def test_tokenizers_that_glue_newlines_to_words_stay_exact(tmp_path):
    # Metaspace (SentencePiece style) prepends a word marker to a text's first word, so cutting a message's
    # content from its header would change ids; the probe must refuse the cut.
    from tokenizers import models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator([f"w{i} w{i + 1} hello world\nw{i}" for i in range(300)],
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "<|im_start|>", "<|im_end|>"]))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    pieces = [render_message("user", "hello w3"), render_message("assistant", "world w4"), GENERATION_PROMPT]
    [ids] = SegmentTokenizer.from_path(path).encode_prompts([pieces])
    assert ids.tolist() == Tokenizer.from_file(str(path)).encode("".join(pieces)).ids
