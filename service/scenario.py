"""Loading scenario files: the one input format of the CLI, the API and the playbooks."""

from __future__ import annotations

from pathlib import Path

from service.domain import ModelSpec, Scenario, resolve_model
from service.strict_toml import InputFileError, decode_data, decode_file, decode_text

__all__ = ["InputFileError", "load_scenario", "parse_scenario", "scenario_from_data", "scenario_model"]


def load_scenario(path: str | Path) -> Scenario:
    """Strictly decode a scenario TOML file; errors name the file, the line and the nearest valid key."""
    path = Path(path)
    if not path.exists():
        raise InputFileError("file not found", file=str(path), line=None, field=None,
                             hint="pass the path of a scenario .toml file (see examples/casebook/)")
    return decode_file(path, Scenario)


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Strictly decode scenario TOML text (an API upload or a playbook's embedded scenario)."""
    return decode_text(text, Scenario, source=source)


def scenario_from_data(data: object, source: str = "<request>") -> Scenario:
    """Strictly convert parsed JSON or TOML data into a Scenario."""
    return decode_data(data, Scenario, source=source)


def scenario_model(scenario: Scenario, base: Path | None = None) -> ModelSpec:
    """The scenario's model: a shipped Hugging Face id or a folder with config.json (relative to `base`)."""
    return resolve_model(scenario.model, base=base)
