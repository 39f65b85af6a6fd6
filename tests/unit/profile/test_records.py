"""Every line reads the same whether the typed decoder or the general one takes it, errors included."""

import json

import pytest

from service.profile.records import MalformedLine, _general_record, parse_line

SYSTEM = {"role": "system", "content": "be brief"}
LINES = [
    {"prompt": "hi", "completion": "yo"},
    {"input": "hi", "output": "yo", "prompt": "wins"},
    {"prompt": "hi", "input": 5, "completion": "yo"},
    {"messages": [SYSTEM, {"role": "user", "content": "q"}], "completion": "a"},
    {"messages": [SYSTEM, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]},
    {"messages": [{"role": "assistant", "content": "only"}]},
    {"messages": [{"role": "user", "content": None}, {"role": "user"}], "response": "r"},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}, 3]}],
     "completion": "x"},
    {"messages": [{"role": "user", "content": []}], "completion": "x"},
    {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "output": "o"},
    {"prompt": "p", "response": {"choices": [{"message": {"role": "assistant", "content": "m"}}]}},
    {"prompt": "p", "completion": {"choices": [{"text": "t"}]}, "extra": {"any": [1, 2]}},
    {"prompt": "p", "completion": "c", "timestamp": 1_700_000_000, "latency": 2},
    {"prompt": "p", "completion": "c", "timestamp": None, "ts": "2023-11-14T22:13:20.5", "end_time": "1700000009"},
    {"prompt": "p", "completion": "c", "start_time": "1700000000.25", "latency": None, "end_time": None},
    {"prompt": "p", "completion": "c", "end_time": 5},
    # Malformed: each must fail with the general path's message.
    {"prompt": None, "completion": "c"},
    {"prompt": "p", "completion": None},
    {"prompt": "p", "completion": {"choices": []}},
    {"messages": [], "completion": "c"},
    {"messages": [{"content": "no role"}], "completion": "c"},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}], "completion": "c"},
    {"prompt": "p", "completion": "c", "timestamp": True},
    {"prompt": "p", "completion": "c", "timestamp": 10, "latency": "2"},
    {"prompt": "p", "completion": "c", "timestamp": 10, "latency": False},
    {"prompt": "p", "completion": "c", "timestamp": 10, "end_time": 9},
    {"prompt": "p", "completion": "c", "ts": "soon"},
    {"completion": "c"},
    ["not", "an", "object"],
    "just a string",
]


def _outcome(read, raw: bytes) -> object:
    try:
        return read(1, raw)
    except MalformedLine as err:
        return str(err)


@pytest.mark.parametrize("row", LINES, ids=range(len(LINES)))
def test_typed_and_general_decoding_agree(row):
    raw = json.dumps(row).encode()
    typed, general = _outcome(parse_line, raw), _outcome(_general_record, raw)
    if isinstance(general, str):
        assert typed == general
    else:
        assert typed is not None and isinstance(typed, type(general))
        assert ("".join(typed.prompt_pieces), typed.completion, typed.start, typed.end) == \
            ("".join(general.prompt_pieces), general.completion, general.start, general.end)


def test_invalid_json_and_blank_lines():
    assert parse_line(3, b"  \n") is None
    with pytest.raises(MalformedLine, match="line 4: not valid JSON"):
        parse_line(4, b'{"prompt": "p",')
