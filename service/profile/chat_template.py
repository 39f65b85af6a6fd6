"""The model's own chat template, for request logs whose requests are chat messages.

A tokenizer folder (a model's Hugging Face folder) may carry the template the server renders chat requests
with: `chat_template.jinja`, or `chat_template` in `tokenizer_config.json` (a string, or a list of named
templates of which "default" is taken). It is rendered as transformers' `apply_chat_template` renders it: a
sandboxed Jinja environment with `trim_blocks` and `lstrip_blocks`, the `raise_exception`, `strftime_now`
and `tojson` helpers, `add_generation_prompt` set, and the special tokens the config names (`bos_token`,
`eos_token`, ...). The rendered text is then tokenized without the tokenizer's own added tokens, as
`apply_chat_template` does: the template writes a BOS token itself when the model wants one.

Prompts stay pieces. Each conversation shape (its roles in order) is rendered once with stand-ins for the
contents, which cuts the template's text into the markup around each message; a prompt is then markup and
contents alternately, so the tokenizer caches markup and contents as it does for ChatML. A prompt whose real
rendering differs from those pieces (a template that trims a content, or drops an earlier answer's
reasoning) is the whole rendered text, one piece: always exactly what the template renders.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATE_FILE = "chat_template.jinja"
CONFIG_FILE = "tokenizer_config.json"
_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")
_STAND_IN = re.compile("\ue000(\\d+)\ue001")  # private-use characters: no filter trims them


class ChatTemplateError(ValueError):
    """The template refused a conversation (`raise_exception`), or failed rendering it."""


def _raise(message: str) -> NoReturn:
    raise jinja2.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an added-token object."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


class ChatTemplate:
    """A compiled chat template and the special tokens it is rendered with."""

    def __init__(self, source: str, special_tokens: Mapping[str, str] | None = None) -> None:
        """Compile `source`.

        Raises:
            ChatTemplateError: When the template is not valid Jinja.
        """
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = _strftime_now
        try:
            self._template = env.from_string(source)
        except jinja2.TemplateError as err:
            raise ChatTemplateError(f"the chat template is not valid Jinja: {err}") from None
        self._special = dict(special_tokens or {})
        self._markup: dict[tuple[str, ...], list[str] | None] = {}

    @classmethod
    def from_folder(cls, folder: Path) -> ChatTemplate | None:
        """The template of a tokenizer folder, or None when it has none.

        Raises:
            ChatTemplateError: When the folder's template or tokenizer_config.json cannot be read.
        """
        config: dict[str, Any] = {}
        config_file = folder / CONFIG_FILE
        if config_file.is_file():
            try:
                loaded = json.loads(config_file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as err:
                raise ChatTemplateError(f"{config_file} is not readable JSON: {err}") from None
            config = loaded if isinstance(loaded, dict) else {}
        template_file = folder / TEMPLATE_FILE
        source = template_file.read_text(encoding="utf-8") if template_file.is_file() else _config_template(config)
        if source is None:
            return None
        special = {name: text for name in _SPECIAL_TOKENS if (text := _token_text(config.get(name))) is not None}
        return cls(source, special)

    def render(self, turns: Sequence[tuple[str, str]]) -> str:
        """The prompt the server renders for these (role, content) messages, with the generation prompt.

        Raises:
            ChatTemplateError: When the template refuses the conversation or fails on it.
        """
        messages = [{"role": role, "content": content} for role, content in turns]
        try:
            return self._template.render(messages=messages, add_generation_prompt=True, **self._special)
        except (jinja2.TemplateError, ArithmeticError, LookupError, TypeError, ValueError) as err:
            raise ChatTemplateError(f"the chat template refused the conversation: {err}") from None

    def pieces(self, turns: list[tuple[str, str]]) -> list[str]:
        """The rendered prompt as markup and contents alternately (one piece when the template changes a
        content); their concatenation is always `render(turns)`.

        Raises:
            ChatTemplateError: When the template refuses the conversation or fails on it.
        """
        text = self.render(turns)
        roles = tuple(role for role, _ in turns)
        if roles not in self._markup:
            self._markup[roles] = self._cut(roles)
        markup = self._markup[roles]
        if markup is not None:
            pieces = [markup[0]]
            for (_, content), after in zip(turns, markup[1:], strict=True):
                pieces += [content, after]
            if "".join(pieces) == text:
                return pieces
        return [text]

    def _cut(self, roles: tuple[str, ...]) -> list[str] | None:
        """The markup before, between and after the messages of this shape; None when the stand-ins do not
        come out once each and in order (the template drops or repeats a message)."""
        try:
            text = self.render([(role, f"\ue000{i}\ue001") for i, role in enumerate(roles)])
        except ChatTemplateError:
            return None
        parts = _STAND_IN.split(text)
        if [int(i) for i in parts[1::2]] != list(range(len(roles))):
            return None
        return parts[0::2]


def _config_template(config: Mapping[str, Any]) -> str | None:
    template = config.get("chat_template")
    if isinstance(template, str):
        return template
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        chosen = named.get("default", next(iter(named.values()), None))
        return chosen if isinstance(chosen, str) else None
    return None
