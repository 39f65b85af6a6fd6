"""The plugin host: one pluggy manager per app (never global), and the registries it fills.

Built-ins are loaded through the same `sglang_tuner` entry-point group as third-party plugins, so a
built-in is exactly as replaceable as any plugin. `SGLANG_TUNER_PLUGINS` limits which load: a comma list
of entry-point names (`builtin_techniques,my_plugin`); empty string loads none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import msgspec
import pluggy

from service import hookspecs
from service.components import CostModel, Playbook, Policy, Runner, Technique

PLUGINS_ENV = "SGLANG_TUNER_PLUGINS"

Component = Technique | Runner | Policy | CostModel | Playbook

KINDS: dict[str, type[Component]] = {
    "technique": Technique,
    "runner": Runner,
    "policy": Policy,
    "cost_model": CostModel,
    "playbook": Playbook,
}


class DuplicateComponentError(ValueError):
    """Two plugins registered components of the same kind under the same name."""


class ComponentInfo(msgspec.Struct, frozen=True):
    """One registered component, as `sglang-tuner plugins --json` lists it."""

    kind: str
    name: str
    plugin: str
    version: str


class PluginHost:
    """A plugin manager with its component registries."""

    def __init__(self, plugins: Iterable[tuple[str, ModuleType | object]] | None = None,
                 *, load_entry_points: bool = True, allow: set[str] | None = None) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        self._components: dict[str, dict[str, Any]] = {kind: {} for kind in KINDS}
        self._origin: dict[tuple[str, str], ComponentInfo] = {}
        self._versions: dict[str, str] = {}
        if load_entry_points:
            self._load_entry_points(allow if allow is not None else _allowed_from_env())
        for name, plugin in plugins or ():
            self.pm.register(plugin, name=name)
        self.pm.check_pending()
        self._collect()

    def _load_entry_points(self, allow: set[str] | None) -> None:
        for ep in entry_points(group=hookspecs.PROJECT_NAME):
            if allow is not None and ep.name not in allow:
                continue
            if self.pm.get_plugin(ep.name) is not None:
                continue
            self.pm.register(ep.load(), name=ep.name)
            self._versions[ep.name] = ep.dist.version if ep.dist else "unknown"

    def _collect(self) -> None:
        hooks = {
            "technique": self.pm.hook.register_techniques,
            "runner": self.pm.hook.register_runners,
            "policy": self.pm.hook.register_policies,
            "cost_model": self.pm.hook.register_cost_models,
            "playbook": self.pm.hook.register_playbooks,
        }
        for kind, hook in hooks.items():
            for impl in hook.get_hookimpls():
                plugin_name = self.pm.get_name(impl.plugin) or repr(impl.plugin)
                impl.function(register=lambda c, k=kind, p=plugin_name: self._register(k, c, p))

    def _register(self, kind: str, component: Any, plugin: str) -> None:
        expected = KINDS[kind]
        if not isinstance(component, expected):
            raise TypeError(f"plugin {plugin!r} registered {component!r} as a {kind}, "
                            f"but it is not a {expected.__name__}")
        name = component.name
        if name in self._components[kind]:
            first = self._origin[(kind, name)].plugin
            raise DuplicateComponentError(
                f"{kind} {name!r} registered by both {first!r} and {plugin!r}; "
                f"limit plugins with {PLUGINS_ENV} or rename one")
        self._components[kind][name] = component
        version = self._versions.get(plugin, _module_version(plugin))
        self._origin[(kind, name)] = ComponentInfo(kind=kind, name=name, plugin=plugin, version=version)

    def components(self, kind: str) -> dict[str, Any]:
        """Registered components of one kind, by name."""
        return dict(self._components[kind])

    def get(self, kind: str, name: str) -> Any:
        """One component; a KeyError names the known ones and the nearest match."""
        registry = self._components[kind]
        if name not in registry:
            from difflib import get_close_matches

            near = get_close_matches(name, list(registry), n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise KeyError(f"unknown {kind} {name!r}{hint} (known: {', '.join(sorted(registry)) or 'none'})")
        return registry[name]

    def listing(self) -> list[ComponentInfo]:
        """Every component: kind, name, plugin, version."""
        return sorted(self._origin.values(), key=lambda c: (c.kind, c.name))

    @property
    def hook(self) -> Any:
        return self.pm.hook


def _allowed_from_env() -> set[str] | None:
    raw = os.environ.get(PLUGINS_ENV)
    if raw is None:
        return None
    return {part.strip() for part in raw.split(",") if part.strip()}


def _module_version(plugin: str) -> str:
    return "unknown" if not plugin else "local"
