"""Runner settings: file, environment and round-context layers; the attach allowlist."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from service.settings import load_runner_settings


def test_layers_override_in_order(tmp_path: Path) -> None:
    path = tmp_path / "runner.toml"
    path.write_text('[runner]\nallow_flags = ["--trust-remote-code"]\ntime_scale = 0.5\n'
                    '[runner.deadlines]\nhealth = 12.0\n')
    environ = {"SGLANG_TUNER_RUNNER_SETTINGS": str(path), "SGLANG_TUNER_RUNNER_TIME_SCALE": "0.25",
               "SGLANG_TUNER_RUNNER_DEADLINE_LOAD": "99", "SGLANG_TUNER_RUNNER_ENGINE_COMMAND": "my-sglang serve"}
    settings = load_runner_settings({"deadlines": {"stall": 5.0}}, environ=environ)
    assert settings.allow_flags == ["--trust-remote-code"]
    assert settings.time_scale == 0.25
    assert settings.engine_command == ["my-sglang", "serve"]
    assert (settings.deadlines.health, settings.deadlines.load, settings.deadlines.stall) == (12.0, 99.0, 5.0)


def test_unknown_setting_is_an_error() -> None:
    with pytest.raises(msgspec.ValidationError):
        load_runner_settings({"alow_flags": []}, environ={})


def test_attach_allowlist_needs_a_full_match() -> None:
    settings = load_runner_settings({"attach_allowlist": [r"http://10\.0\.0\.\d+:30000"]}, environ={})
    assert settings.url_allowed("http://10.0.0.7:30000")
    assert not settings.url_allowed("http://10.0.0.7:30000.evil.example")
    assert not load_runner_settings(environ={}).url_allowed("http://127.0.0.1:30000")
