"""Playbook files: strict TOML decoding, and checks of the techniques, runner and policy they name.

An unknown key, technique, runner or policy is an `InputFileError` naming the file, the line and the
nearest valid name, exactly like scenario files (both decode through `service.strict_toml`).
"""

from __future__ import annotations

from collections.abc import Iterable
from difflib import get_close_matches
from pathlib import Path

import msgspec

from service.components import Playbook
from service.domain import Scenario
from service.scenario import load_scenario
from service.strict_toml import InputFileError, decode_file, locate

__all__ = ["InputFileError", "check_playbook", "load_playbook", "load_playbook_dir", "playbook_scenario"]


def load_playbook(path: str | Path) -> Playbook:
    """Strictly decode one playbook file; its `scenario` path is resolved against the file's folder."""
    path = Path(path)
    if not path.exists():
        raise InputFileError("file not found", file=str(path), line=None, field=None,
                             hint="pass a playbook name (see `sglang-tuner tune --help`) or a .toml file")
    playbook = decode_file(path, Playbook)
    scenario = playbook.scenario
    if scenario is not None and not Path(scenario).is_absolute():
        scenario = str((path.parent / scenario).resolve())
    return msgspec.structs.replace(playbook, scenario=scenario, source=str(path))


def load_playbook_dir(folder: str | Path) -> list[Playbook]:
    """Every `*.toml` playbook in `folder`, sorted by file name."""
    return [load_playbook(p) for p in sorted(Path(folder).glob("*.toml"))]


def check_playbook(playbook: Playbook, *, techniques: Iterable[str], runners: Iterable[str],
                   policies: Iterable[str]) -> None:
    """Raise `InputFileError` for the first technique, runner or policy the plugin host does not know."""
    known_techniques = sorted(techniques)
    for index, name in enumerate(playbook.techniques):
        _known(playbook, name, known_techniques, "technique", ["techniques", index])
    for name in [*playbook.require_quality_for, *playbook.options]:
        field = "require_quality_for" if name in playbook.require_quality_for else "options"
        _known(playbook, name, known_techniques, "technique", [field, name])
    if playbook.runner is not None:
        _known(playbook, playbook.runner, sorted(runners), "runner", ["runner"])
    _known(playbook, playbook.policy, sorted(policies), "policy", ["policy"])


def _known(playbook: Playbook, name: str, known: list[str], kind: str, path: list[str | int]) -> None:
    if name in known:
        return
    near = get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"did you mean `{near[0]}`?" if near else f"known {kind}s: {', '.join(known) or 'none'}"
    text = Path(playbook.source).read_text(encoding="utf-8") if playbook.source else ""
    line = locate(text, path) or locate(text, path[:1])
    raise InputFileError(f"unknown {kind} `{name}`", file=playbook.source or f"<playbook {playbook.name}>",
                         line=line, field=".".join(map(str, path)), hint=hint)


def playbook_scenario(playbook: Playbook, override: str | Path | None = None) -> Scenario:
    """The scenario to tune: `override` when given, else the playbook's default scenario file."""
    path = override if override is not None else playbook.scenario
    if path is None:
        raise InputFileError("this playbook has no default scenario", file=playbook.source or playbook.name,
                             line=None, field="scenario", hint="pass --scenario FILE")
    return load_scenario(path)
