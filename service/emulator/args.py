"""Read `python -m sglang.launch_server` argv the way that version's argparse parser would.

The parser is the shipped flag catalogue of the emulated version (`service.sglang`): unknown flags and
bad values fail with argparse's wording and exit code 2; unique abbreviations are accepted, as argparse's
`allow_abbrev` does (the runner refuses them before any launch, the emulator mirrors SGLang).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from service.domain import ServerConfig
from service.sglang import FlagCatalogue, FlagSpec, load_catalogue

PROG = "launch_server.py"
_HUMAN_SUFFIX = re.compile(r"^(\d+(?:\.\d+)?)([kKMGT]i?)?$")
_MULTIPLIERS = {"k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
                "ki": 2**10, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


class ArgvError(Exception):
    """What argparse would print before exiting with code 2."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def usage_text(self) -> str:
        """The two stderr lines argparse prints."""
        return f"usage: {PROG} [-h] [--model-path MODEL_PATH] ...\n{PROG}: error: {self.message}"


class ServerArgs(msgspec.Struct, kw_only=True):
    """Parsed launch arguments: every dest that was given, and the typed view the simulator needs."""

    version: str
    values: dict[str, Any]
    server: ServerConfig
    host: str = "127.0.0.1"
    port: int = 30000
    served_model_name: str = ""
    disaggregation_mode: str = "null"

    def get(self, dest: str, default: Any = None) -> Any:
        """A parsed value by argparse dest, or `default` when the flag was not given."""
        return self.values.get(dest, default)


def _resolve(token: str, catalogue: FlagCatalogue) -> tuple[FlagSpec, str]:
    spec = catalogue.get(token)
    if spec is not None:
        return spec, token
    candidates = catalogue.abbreviation_of(token) if token.startswith("--") else []
    # Keyed by the flag, so an abbreviation of two aliases of one flag is not ambiguous.
    owners = {found.flag: (found, c) for c in candidates if (found := catalogue.get(c)) is not None}
    if len(owners) == 1:
        return next(iter(owners.values()))
    if len(owners) > 1:
        raise ArgvError(f"ambiguous option: {token} could match {', '.join(sorted(owners))}")
    raise ArgvError(f"unrecognized arguments: {token}")


def _convert(spec: FlagSpec, spelling: str, text: str) -> Any:
    try:
        if spec.type == "int":
            value: Any = int(text)
        elif spec.type == "float":
            value = float(text)
        elif spec.type == "human_readable_int":
            value = _human_int(text)
        else:
            value = text
    except ValueError:
        raise ArgvError(f"argument {spelling}: invalid {spec.type} value: {text!r}") from None
    if spec.choices is not None and value not in spec.choices and str(value) not in map(str, spec.choices):
        options = ", ".join(repr(c) for c in spec.choices)
        raise ArgvError(f"argument {spelling}: invalid choice: {text!r} (choose from {options})")
    return value


def _human_int(text: str) -> int:
    match = _HUMAN_SUFFIX.match(text.strip())
    if match is None:
        return int(text)
    number, suffix = match.groups()
    return int(float(number) * _MULTIPLIERS.get(suffix or "", 1))


def parse_values(argv: list[str], catalogue: FlagCatalogue) -> dict[str, Any]:
    """`{dest: value}` for every flag in `argv`; raises `ArgvError` as argparse would exit."""
    values: dict[str, Any] = {}
    position = 0
    while position < len(argv):
        token = argv[position]
        if not token.startswith("-") or token == "--":
            raise ArgvError(f"unrecognized arguments: {token}")
        inline: str | None = None
        if "=" in token:
            token, inline = token.split("=", 1)
        spec, spelling = _resolve(token, catalogue)
        position += 1
        if spec.is_bare:
            if inline is not None:
                raise ArgvError(f"argument {spelling}: ignored explicit argument {inline!r}")
            values[spec.dest] = spelling != spec.negation and spec.action != "store_false"
            continue
        following = [inline] if inline is not None else []
        while inline is None and position < len(argv) and not argv[position].startswith("--"):
            following.append(argv[position])
            position += 1
            if not spec.is_list:
                break
        if not following:
            raise ArgvError(f"argument {spelling}: expected {'at least one argument' if spec.is_list else 'one argument'}")
        converted = [_convert(spec, spelling, item) for item in following]
        values[spec.dest] = converted if spec.is_list else converted[0]
    return values


_SERVER_FIELDS = frozenset(ServerConfig.__struct_fields__) - {"extra", "attention_dp_size", "cuda_graph_max_bs"}


def server_config(values: dict[str, Any]) -> ServerConfig:
    """The typed server settings the simulator's engine model reads, from parsed dests."""
    typed: dict[str, Any] = {name: values[name] for name in _SERVER_FIELDS if values.get(name) is not None}
    if values.get("attn_dp_size"):
        typed["attention_dp_size"] = values["attn_dp_size"]
    elif values.get("enable_dp_attention") and values.get("dp_size", 1) > 1:
        typed["attention_dp_size"], typed["dp_size"] = values["dp_size"], 1  # arg_groups/parallel_hook.py
    graph_bs = values.get("cuda_graph_max_bs_decode") or values.get("cuda_graph_max_bs")
    if graph_bs:
        typed["cuda_graph_max_bs"] = graph_bs
    return ServerConfig(**typed)


def parse_server_argv(argv: list[str], version: str) -> ServerArgs:
    """Parse launch argv for `version`; raises `ArgvError` (exit 2) exactly where SGLang's parser would."""
    catalogue = load_catalogue(version)
    values = parse_values(argv, catalogue)
    if not values.get("model_path"):
        raise ArgvError("the following arguments are required: --model-path")
    return ServerArgs(version=version, values=values, server=server_config(values),
                      host=values.get("host") or "127.0.0.1", port=int(values.get("port") or 30000),
                      served_model_name=values.get("served_model_name") or values["model_path"],
                      disaggregation_mode=values.get("disaggregation_mode") or "null")
