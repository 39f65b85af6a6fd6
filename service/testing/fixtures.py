"""Fixtures for plugin tests; registered as a pytest plugin through the `pytest11` entry point."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from service.plugin_host import PluginHost


def make_host(*plugins: tuple[str, ModuleType | object], builtins: bool = False) -> PluginHost:
    """A plugin host holding only `plugins` (and the built-ins when `builtins` is true).

    Installed third-party entry points are never loaded by accident: the built-ins are selected by name.
    """
    allow = {"builtin_cost_models", "builtin_runners", "builtin_techniques", "builtin_policies",
             "builtin_playbooks"} if builtins else set()
    return PluginHost(plugins, load_entry_points=builtins, allow=allow)


@pytest.fixture
def sglang_tuner_host() -> Callable[..., PluginHost]:
    """Factory fixture: `sglang_tuner_host(("name", module), builtins=False)` -> an isolated PluginHost."""
    return make_host
