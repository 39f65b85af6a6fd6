"""SGLang knowledge: flag catalogues per version, validation, and launch-argv rendering.

- `load_catalogue(version)`: every `sglang.launch_server` flag of a released version (`router_catalogue()`
  for `sglang_router.launch_router`).
- `validate_scenario` / `validate_deployment` / `validate_flags` / `validate_argv`: lists of
  `ValidationIssue` (field at fault, message, hint), never an exception for a user's mistake.
- `render_scenario` / `render_launch`: exact argv lists per worker and for the router (`RenderedLaunch`),
  or `RenderRefused` listing the issues.
"""

from service.sglang.flags import (
    ROUTER,
    ROUTER_PACKAGES,
    SGLANG,
    FlagCatalogue,
    FlagSpec,
    Package,
    RouterPackage,
    UnknownVersionError,
    catalogue_versions,
    load_catalogue,
    router_catalogue,
    version_key,
    versions_with,
)
from service.sglang.render import (
    RenderedLaunch,
    RenderedRouter,
    RenderedWorker,
    RenderRefused,
    render_launch,
    render_scenario,
)
from service.sglang.replacements import BACKPORTS, REPLACEMENTS, Backport, Replacement, replacement_status
from service.sglang.safety import DANGEROUS_FLAGS, Danger, flag_danger
from service.sglang.validate import validate_argv, validate_deployment, validate_flags, validate_scenario
from service.sglang.values import ValidationIssue, errors

__all__ = [
    "BACKPORTS",
    "DANGEROUS_FLAGS",
    "REPLACEMENTS",
    "ROUTER",
    "SGLANG",
    "Backport",
    "Danger",
    "FlagCatalogue",
    "FlagSpec",
    "Package",
    "RenderRefused",
    "RenderedLaunch",
    "RenderedRouter",
    "RenderedWorker",
    "Replacement",
    "UnknownVersionError",
    "ValidationIssue",
    "catalogue_versions",
    "errors",
    "flag_danger",
    "load_catalogue",
    "render_launch",
    "render_scenario",
    "replacement_status",
    "router_catalogue",
    "ROUTER_PACKAGES",
    "RouterPackage",
    "validate_argv",
    "validate_deployment",
    "validate_flags",
    "validate_scenario",
    "version_key",
    "versions_with",
]
