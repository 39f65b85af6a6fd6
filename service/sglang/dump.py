"""Turn an argparse parser (or its JSON dump) into a flag catalogue.

The dump format is a list of actions, each `{flags, dest, action, type, default, choices, nargs, help}`
with `action` and `type` given by class or function name; it is what `dump_parser` writes and what the
reference dumps of released wheels hold. `catalogue_from_dump` normalises it: canonical spelling,
aliases, a small type vocabulary, deprecation from the action class or the help text, trimmed help.
"""

from __future__ import annotations

import argparse
import re
from typing import Any, cast

import msgspec

from service.sglang.flags import FlagAction, FlagCatalogue, FlagSpec, FlagType, Package

SUPPRESS = "==SUPPRESS=="
HELP_LIMIT = 240

# Action class names of sglang's `arg_groups/argparse_actions.py` and of argparse itself.
_ACTIONS: dict[str, FlagAction] = {
    "_StoreAction": "store",
    "DeprecatedAliasStoreAction": "store",
    "LoRAPathAction": "store",
    "_StoreTrueAction": "store_true",
    "DeprecatedStoreTrueAction": "store_true",
    "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const",
    "DeprecatedStoreConstAction": "store_const",
    "BooleanOptionalAction": "boolean_optional",
    "_AppendAction": "append",
    "_ExtendAction": "append",
    "DeprecatedAction": "retired",
}
_SKIPPED_ACTIONS = frozenset({"_HelpAction", "_VersionAction"})

# Value parsers by name: sglang passes `json.loads` and its own JSON helpers as argparse `type=`.
_TYPES: dict[str, FlagType] = {
    "int": "int",
    "float": "float",
    "str": "str",
    "nullable_str": "str",
    "human_readable_int": "human_readable_int",
    "loads": "json",
    "json_list_type": "json",
    "parse_cuda_graph_config_arg": "json",
    "parse_cuda_graph_backend_arg": "str",
    "_non_negative_int": "int",  # smg's unsigned settings
}

_DEPRECATED_HELP = re.compile(r"^\W*(note:\s*\S+\s+is\s+)?deprecated", re.IGNORECASE)
_REPLACEMENT_HELP = re.compile(r"(?:\buse|alias for|replaced by)\s+['\"`]?(--[a-z0-9]+(?:-[a-z0-9]+)*)(?![-{\w])",
                               re.IGNORECASE)


def dump_parser(parser: argparse.ArgumentParser) -> list[dict[str, Any]]:
    """Dump every option of an argparse parser as plain JSON-able dicts (the reference dump format).

    Sglang's deprecated actions carry `new_flag` or `error_message`; both are kept when present.
    """
    entries: list[dict[str, Any]] = []
    for action in parser._actions:  # argparse has no public accessor for its actions
        if not action.option_strings:
            continue
        entry: dict[str, Any] = {
            "flags": list(action.option_strings),
            "dest": action.dest,
            "action": type(action).__name__,
            "type": getattr(action.type, "__name__", None) if action.type is not None else None,
            "default": _jsonable(action.default),
            "choices": [_jsonable(c) for c in action.choices] if action.choices is not None else None,
            "nargs": action.nargs,
            "help": action.help,
        }
        for extra in ("new_flag", "error_message"):
            if getattr(action, extra, None):
                entry[extra] = getattr(action, extra)
        entries.append(entry)
    return entries


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


def catalogue_from_dump(entries: list[dict[str, Any]], package: Package, version: str, source: str,
                        metrics: list[str] | None = None) -> FlagCatalogue:
    """Build the catalogue of one version from its argparse dump (help and version actions are skipped).

    `metrics` are the Prometheus metric names the version exports, when they are known (routers).
    """
    flags = [spec for entry in entries if (spec := flag_from_entry(entry)) is not None]
    return FlagCatalogue(package=package, version=version, source=source, flags=flags,
                         metrics=sorted(set(metrics or [])))


def flag_from_entry(entry: dict[str, Any]) -> FlagSpec | None:
    """Normalise one dumped argparse action; None for help/version actions and short-only options."""
    action_name = str(entry["action"])
    if action_name in _SKIPPED_ACTIONS:
        return None
    spellings = [s for s in entry["flags"] if s.startswith("--")]
    if not spellings:
        return None
    # Canonical: the spelling of the dest itself when it has one, else argparse's first.
    named = "--" + str(entry["dest"]).replace("_", "-")
    if named in spellings:
        spellings.remove(named)
        spellings.insert(0, named)
    action = _ACTIONS.get(action_name, "store")
    negation = next((s for s in spellings[1:] if s.startswith("--no-")), None) if action == "boolean_optional" else None
    help_text = _trim_help(entry.get("help"))
    default = entry.get("default")
    return FlagSpec(
        flag=spellings[0],
        dest=str(entry["dest"]),
        type=_flag_type(entry, action),
        action=action,
        aliases=[s for s in spellings[1:] if s != negation],
        negation=negation,
        nargs=None if action in ("store_true", "store_false", "boolean_optional") else _nargs(entry.get("nargs")),
        default=None if default == SUPPRESS else default,
        choices=entry.get("choices") or None,
        deprecated=action_name.startswith("Deprecated") or bool(_DEPRECATED_HELP.match(help_text)),
        replacement=_replacement(entry, help_text, spellings[0]),
        help=help_text,
    )


def _flag_type(entry: dict[str, Any], action: FlagAction) -> FlagType:
    if action in ("store_true", "store_false", "boolean_optional", "retired") or (
            action == "store_const" and entry.get("nargs") in (0, None) and not entry.get("choices")):
        return "bool"
    return _TYPES.get(str(entry.get("type")), "str")


def _nargs(nargs: Any) -> str | int | None:
    return None if nargs in (None, 0) else cast("str | int", nargs)


def _replacement(entry: dict[str, Any], help_text: str, flag: str) -> str | None:
    named = entry.get("new_flag") or entry.get("error_message") or ""
    for text in (str(named), help_text if _DEPRECATED_HELP.match(help_text) or "deprecat" in help_text.lower()
                 else ""):
        match = _REPLACEMENT_HELP.search(text) or re.fullmatch(r"(--[a-z0-9-]+)", text)
        if match and match.group(1) != flag:
            return match.group(1)
    return None


def _trim_help(text: Any) -> str:
    if not text or text == SUPPRESS:
        return ""
    flat = " ".join(str(text).split())
    if len(flat) <= HELP_LIMIT:
        return flat
    return flat[:HELP_LIMIT].rsplit(" ", 1)[0] + " ..."


def encode_catalogue(catalogue: FlagCatalogue) -> bytes:
    """Compact JSON with one flag (and one metric name) per line, so a regenerated catalogue diffs readably."""
    head = msgspec.json.encode({"package": catalogue.package, "version": catalogue.version,
                                "source": catalogue.source})
    lines = [msgspec.json.encode(spec) for spec in catalogue.flags]
    body = head[:-1] + b',"flags":[\n' + b",\n".join(lines) + b"\n]"
    if catalogue.metrics:
        body += b',"metrics":[\n' + b",\n".join(msgspec.json.encode(name) for name in catalogue.metrics) + b"\n]"
    return body + b"}\n"
