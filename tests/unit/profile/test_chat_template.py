"""Chat messages rendered with the model's own chat template, read from a small tokenizer folder."""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from tokenizers import Tokenizer

from service.cli import main
from service.profile import ChatTemplate, ChatTemplateError, ProfileError, parse_line, profile_log

# Mistral's template, shortened: no system role, [INST] markers, BOS written by the template itself.
INST = ("{{ bos_token }}{% for message in messages %}"
        "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if message['role'] == 'user' %}[INST] {{ message['content'] }} [/INST]"
        "{% else %} {{ message['content'] }}{{ eos_token }}{% endif %}{% endfor %}")
CONVERSATION = [("user", "w1 w2 w3"), ("assistant", "w4 w5"), ("user", "w6")]


def tokenizer_folder(tmp_path: Path, tokenizer_file: Path, **config: object) -> Path:
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    shutil.copy(tokenizer_file, folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<s>", "eos_token": "</s>", **config}))
    return folder


def write_log(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_template_is_read_from_tokenizer_config_and_rendered_as_transformers_does(tmp_path,
                                                                                   word_tokenizer_dir):
    template = ChatTemplate.from_folder(tokenizer_folder(tmp_path, word_tokenizer_dir / "tokenizer.json",
                                                         chat_template=INST))
    assert template is not None
    assert template.render(CONVERSATION) == "<s>[INST] w1 w2 w3 [/INST] w4 w5</s>[INST] w6 [/INST]"
    pieces = template.pieces(CONVERSATION)
    assert pieces == ["<s>[INST] ", "w1 w2 w3", " [/INST] ", "w4 w5", "</s>[INST] ", "w6", " [/INST]"]


def test_chat_template_jinja_and_named_templates(tmp_path, word_tokenizer_dir):
    folder = tokenizer_folder(tmp_path, word_tokenizer_dir / "tokenizer.json",
                              chat_template=[{"name": "tool_use", "template": "tools"},
                                             {"name": "default", "template": INST}])
    template = ChatTemplate.from_folder(folder)
    assert template is not None and template.render([("user", "w1")]) == "<s>[INST] w1 [/INST]"
    (folder / "chat_template.jinja").write_text("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}")
    template = ChatTemplate.from_folder(folder)
    assert template is not None and template.render([("user", "w1")]) == "<user>w1"


def test_a_folder_without_a_template_has_none(tmp_path, word_tokenizer_dir):
    assert ChatTemplate.from_folder(word_tokenizer_dir) is None
    assert ChatTemplate.from_folder(tokenizer_folder(tmp_path, word_tokenizer_dir / "tokenizer.json")) is None


def test_a_template_that_changes_a_content_gives_its_exact_text_in_one_piece():
    template = ChatTemplate("{% for m in messages %}[{{ m.role }}] {{ m.content | trim }}\n{% endfor %}")
    turns = [("user", "  w1 w2  "), ("assistant", "w3")]
    assert template.pieces(turns) == ["[user] w1 w2\n[assistant] w3\n"]
    assert template.pieces([("user", "w1"), ("assistant", "w3")]) == ["[user] ", "w1", "\n[assistant] ", "w3", "\n"]


def test_a_conversation_the_template_refuses_is_a_malformed_line():
    template = ChatTemplate(INST, {"bos_token": "<s>", "eos_token": "</s>"})
    raw = json.dumps({"messages": [{"role": "assistant", "content": "w1"}], "completion": "w2"}).encode()
    with pytest.raises(ValueError, match="line 7: the chat template refused the conversation: Conversation roles"):
        parse_line(7, raw, template.pieces)
    with pytest.raises(ChatTemplateError, match="not valid Jinja"):
        ChatTemplate("{% for m in messages %}")


def test_profiles_count_the_tokens_the_server_sees_through_the_template(tmp_path, bpe_tokenizer_file):
    # The BPE tokenizer adds a BOS itself; the template writes one too: the prompt must carry exactly one.
    folder = tokenizer_folder(tmp_path, bpe_tokenizer_file, chat_template=INST)
    rows = [{"messages": [{"role": r, "content": c} for r, c in CONVERSATION], "completion": "w7 w8"},
            {"messages": [{"role": "user", "content": "w9 w10 w11 w12"}], "completion": "w7"},
            {"prompt": "w1 w2 w3", "completion": "w7"}]
    log = write_log(tmp_path, rows)
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    template = ChatTemplate.from_folder(folder)
    assert template is not None
    expected = sorted([len(tokenizer.encode(template.render(CONVERSATION), add_special_tokens=False).ids),
                       len(tokenizer.encode(template.render([("user", "w9 w10 w11 w12")]),
                                            add_special_tokens=False).ids),
                       len(tokenizer.encode("w1 w2 w3").ids)])  # a plain prompt keeps the tokenizer's BOS
    assert tokenizer.encode(template.render(CONVERSATION), add_special_tokens=False).ids.count(
        tokenizer.token_to_id("<s>")) == 1
    measured = profile_log(log, folder)
    assert (measured.input_median, measured.input_p95) == (expected[1], expected[2])
    # The file itself names its folder too; ChatML when asked for, or when the folder has no template.
    assert profile_log(log, folder / "tokenizer.json") == measured
    chatml = profile_log(log, folder, chat_template=False)
    assert chatml.input_p95 != measured.input_p95


def test_a_refused_conversation_is_skipped_with_its_line(tmp_path, word_tokenizer_dir):
    folder = tokenizer_folder(tmp_path, word_tokenizer_dir / "tokenizer.json", chat_template=INST)
    log = write_log(tmp_path, [{"messages": [{"role": "user", "content": "w1"}], "completion": "w2"},
                               {"messages": [{"role": "system", "content": "w1"}], "completion": "w2"}])
    measured = profile_log(log, folder)
    assert measured.requests == 1 and measured.skipped_lines == 1
    assert measured.errors[0].startswith("line 2: the chat template refused the conversation")
    (folder / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(ProfileError, match="tokenizer_config.json is not readable JSON"):
        profile_log(log, folder)


def test_the_cli_renders_with_the_folders_template_unless_asked_for_chatml(tmp_path, word_tokenizer_dir):
    folder = tokenizer_folder(tmp_path, word_tokenizer_dir / "tokenizer.json", chat_template=INST)
    log = write_log(tmp_path, [{"messages": [{"role": "user", "content": "w1 w2"}], "completion": "w3"}])
    runner = CliRunner()
    templated = runner.invoke(main, ["profile", str(log), "--tokenizer", str(folder), "--json"])
    chatml = runner.invoke(main, ["profile", str(log), "--tokenizer", str(folder), "--json", "--chatml"])
    assert templated.exit_code == 0 and chatml.exit_code == 0
    # "<s>[INST] w1 w2 [/INST]" is four words to the word-level tokenizer: "<s>[INST]", w1, w2, "[/INST]".
    assert json.loads(templated.stdout)["input_median"] == 4
    assert json.loads(chatml.stdout)["input_median"] == profile_log(log, folder, chat_template=False).input_median
