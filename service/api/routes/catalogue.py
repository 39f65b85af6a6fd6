"""Read-only catalogue of what the loaded plugins provide: playbooks, techniques, runners, policies."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

import msgspec
from litestar import Router, get

from service.api.auth import SECURITY
from service.api.problems import problem_responses
from service.api.routes.deps import Runtime
from service.api.wire import ComponentView
from service.plugin_host import PluginHost

_READ = {"scope": "read"}
_ERRORS = problem_responses(400, 401, 403)


def _views(plugins: PluginHost, kind: str) -> list[ComponentView]:
    origin = {(info.kind, info.name): info for info in plugins.listing()}
    views = []
    for name, component in sorted(plugins.components(kind).items()):
        info = origin.get((kind, name))
        views.append(ComponentView(
            name=name, plugin=info.plugin if info else "unknown", version=info.version if info else "unknown",
            description=str(getattr(component, "description", "") or ""), details=_details(kind, component)))
    return views


def _details(kind: str, component: Any) -> dict[str, Any]:
    if kind == "technique":
        return {"rank": component.rank, "conflicts": list(component.conflicts),
                "prerequisites": list(component.prerequisites)}
    if kind == "runner":
        return {"capabilities": msgspec.to_builtins(component.capabilities)}
    if kind == "playbook":
        return {"techniques": list(component.techniques), "max_rounds": component.max_rounds,
                "repeats": component.repeats, "beam_width": component.beam_width,
                "scenario": _file_name(component.scenario)}
    return {}


def _file_name(path: str | None) -> str | None:
    # The scenario file's name only: where the service keeps its files is none of a client's business.
    return None if path is None else PurePath(path).name


@get("/playbooks", operation_id="listPlaybooks", opt=_READ, security=SECURITY, responses=_ERRORS,
     sync_to_thread=False)
def list_playbooks(runtime: Runtime) -> list[ComponentView]:
    """Playbooks: ordered technique lists with their budgets."""
    return _views(runtime.plugins, "playbook")


@get("/techniques", operation_id="listTechniques", opt=_READ, security=SECURITY, responses=_ERRORS,
     sync_to_thread=False)
def list_techniques(runtime: Runtime) -> list[ComponentView]:
    """Techniques, with their casebook tuning-order rank, conflicts and prerequisites."""
    return _views(runtime.plugins, "technique")


@get("/runners", operation_id="listRunners", opt=_READ, security=SECURITY, responses=_ERRORS,
     sync_to_thread=False)
def list_runners(runtime: Runtime) -> list[ComponentView]:
    """Runners and their capabilities (restarts servers, measures real GPUs, needs a GPU)."""
    return _views(runtime.plugins, "runner")


@get("/policies", operation_id="listPolicies", opt=_READ, security=SECURITY, responses=_ERRORS,
     sync_to_thread=False)
def list_policies(runtime: Runtime) -> list[ComponentView]:
    """Decision policies that accept or roll back each round."""
    return _views(runtime.plugins, "policy")


catalogue_router = Router(path="/v1", route_handlers=[list_playbooks, list_techniques, list_runners, list_policies],
                          tags=["catalogue"])
