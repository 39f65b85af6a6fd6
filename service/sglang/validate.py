"""Validate scenarios, deployments, flag maps and launch argv against one SGLang version.

Every function returns a list of `ValidationIssue`s (errors and warnings) and never raises for a user's
mistake; an unknown version is itself reported as an issue.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from service.domain import Deployment, FlagValue, Hardware, RouterConfig, Scenario, ServerConfig, place_workers
from service.sglang.flags import (
    ROUTER_PACKAGES,
    SGLANG,
    FlagCatalogue,
    FlagSpec,
    Package,
    UnknownVersionError,
    load_catalogue,
    router_catalogue,
)
from service.sglang.router import (
    ROUTER_MODULES,
    ROUTER_RENDERED,
    check_router_policies,
    hint_other_router,
    router_target,
)
from service.sglang.spelling import RENDERER_FLAGS, field_key, owning_field, typed_flags
from service.sglang.topology import (
    check_groups,
    check_hardware_fit,
    check_placement,
    check_roles,
    group_field,
)
from service.sglang.values import ValidationIssue, check_flag, check_value, errors, resolve_flag


def catalogue_or_issue(version: str, package: Package = SGLANG) -> tuple[FlagCatalogue | None, list[ValidationIssue]]:
    """The catalogue of a version, or an issue naming the known versions."""
    try:
        return load_catalogue(version, package), []
    except UnknownVersionError as exc:
        return None, [ValidationIssue(field="sglang_version", message=str(exc),
                                      hint="pick a known version, or regenerate catalogues with "
                                           "scripts/gen_flag_catalogue.py")]


def validate_scenario(scenario: Scenario, *, sglang_version: str | None = None,
                      allow: Collection[str] = ()) -> list[ValidationIssue]:
    """Validate a scenario's deployment on its hardware, for `sglang_version` (default: the scenario's)."""
    return validate_deployment(scenario.deployment, scenario.hardware, model=scenario.model,
                               sglang_version=sglang_version or scenario.sglang_version, allow=allow)


def validate_deployment(deployment: Deployment, hardware: Hardware, *, sglang_version: str, model: str = "",
                        allow: Collection[str] = ()) -> list[ValidationIssue]:
    """Every check: flags of each group (typed and extra), router flags, and deployment consistency.

    Args:
        deployment: The worker groups and router.
        hardware: The cluster they must fit.
        sglang_version: Target SGLang version (a shipped catalogue).
        model: The scenario's model, used when a group sets no server.model-path.
        allow: Dangerous flags (or "--flag=value" pairs) the operator has enabled.
    """
    catalogue, issues = catalogue_or_issue(sglang_version)
    issues += check_groups(deployment) + check_roles(deployment) + check_hardware_fit(deployment, hardware)
    if catalogue is not None:
        for index, group in enumerate(deployment.groups):
            issues += check_server_flags(index, group.server, catalogue, model=model, allow=allow)
    if deployment.router is not None:
        issues += check_router(deployment.router, allow)
    if not errors(issues):
        issues += check_placement(place_workers(deployment, hardware), deployment, hardware)
    return issues


def check_router(router: RouterConfig, allow: Collection[str]) -> list[ValidationIssue]:
    """The router's version, policies and `extra` flags, against the catalogue of the router it names."""
    catalogue, issues = router_target(router)
    if catalogue is None:
        return issues
    issues += check_router_policies(router, catalogue)
    extra = validate_flags(router.extra, package=catalogue.package, router_version=catalogue.version,
                           field="deployment.router.extra", allow=allow, reserved=ROUTER_RENDERED)
    return issues + hint_other_router(extra, catalogue)


def check_server_flags(index: int, server: ServerConfig, catalogue: FlagCatalogue, *,
                       model: str, allow: Collection[str]) -> list[ValidationIssue]:
    """One group's typed fields (spelled for the version) and `extra` flags."""
    issues: list[ValidationIssue] = []
    if not (server.model_path or model):
        issues.append(ValidationIssue(field=group_field(index, "server.model-path"), flag="--model-path",
                                      message="no model: the scenario has no model and server.model-path is empty",
                                      hint="set the scenario's model or server.model-path"))
    model_spec = catalogue.get("--model-path")
    if server.model_path and model_spec is not None:
        issues += check_value(model_spec, "--model-path", server.model_path,
                              field=group_field(index, "server.model-path"))
    for typed in typed_flags(server, catalogue):
        field = group_field(index, f"server.{typed.field}")
        spec, found = resolve_flag(typed.flag, catalogue, field=field)
        if spec is None:
            issues += [ValidationIssue(field=field, flag=typed.flag, hint=issue.hint,
                                       message=f"server.{typed.field} needs {typed.flag}: {issue.message}")
                       for issue in found]
            continue
        issues += found + check_value(spec, typed.flag, typed.value, field=field)
    issues += _check_extra(index, server.extra, catalogue, allow)
    return issues


def _check_extra(index: int, extra: Mapping[str, FlagValue], catalogue: FlagCatalogue,
                 allow: Collection[str]) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    dests: dict[str, str] = {}
    for spelling, value in extra.items():
        field = group_field(index, f"server.extra.{spelling}")
        found = check_flag(spelling, value, catalogue, field=field, allow=allow)
        issues += found
        spec = catalogue.get(spelling)
        if spec is None:
            continue
        if spec.dest in RENDERER_FLAGS:
            issues.append(ValidationIssue(field=field, flag=spelling, message=f"{spelling} is set by the renderer",
                                          hint=f"it comes from {RENDERER_FLAGS[spec.dest]}; remove it from extra"))
        elif (owner := owning_field(spec.dest)) is not None:
            issues.append(ValidationIssue(field=field, flag=spelling,
                                          message=f"{spelling} duplicates the typed field server.{field_key(owner)}",
                                          hint=f"set {field_key(owner)} = ... under server instead"))
        if spec.dest in dests:
            issues.append(ValidationIssue(field=field, flag=spelling,
                                          message=f"{spelling} and {dests[spec.dest]} set the same option",
                                          hint="keep one of them"))
        dests.setdefault(spec.dest, spelling)
    return issues


def validate_flags(flags: Mapping[str, FlagValue], *, sglang_version: str | None = None, package: Package = SGLANG,
                   field: str = "flags", allow: Collection[str] = (), reserved: Collection[str] = (),
                   router_version: str | None = None) -> list[ValidationIssue]:
    """Check a `{--flag: value}` map (a scenario's `extra`, an API payload) for one version.

    Args:
        flags: Flag spellings and values (true/false for switches, lists for multi-value flags).
        sglang_version: Target SGLang version; ignored for a router.
        package: "sglang", "sglang-router" or "smg".
        field: Prefix for issue fields.
        allow: Dangerous flags (or "--flag=value" pairs) the operator has enabled.
        reserved: Flags the caller renders itself and the map may not set.
        router_version: The router package's version (default: its newest shipped catalogue).
    """
    catalogue, issues = _catalogue_for(package, sglang_version, router_version)
    if catalogue is None:
        return issues
    for spelling, value in flags.items():
        issues += check_flag(spelling, value, catalogue, field=f"{field}.{spelling}", allow=allow)
        spec = catalogue.get(spelling)
        if spec is not None and spec.flag in reserved:
            issues.append(ValidationIssue(field=f"{field}.{spelling}", flag=spelling,
                                          message=f"{spelling} is set by the renderer",
                                          hint="use the matching typed setting instead"))
    return issues


def validate_argv(argv: Sequence[str], *, sglang_version: str | None = None, package: Package = SGLANG,
                  allow: Collection[str] = (), router_version: str | None = None) -> list[ValidationIssue]:
    """Check a launch argv (`python -m sglang.launch_server --flag value ...`) the way argparse reads it.

    Only flags in the version's catalogue, spelled in full, with safe values pass; a runner calls this
    on every argv just before it starts a process. A router's argv (`package` "sglang-router" or "smg")
    is checked against `router_version` of that package (default: its newest shipped catalogue).
    """
    catalogue, issues = _catalogue_for(package, sglang_version, router_version)
    if catalogue is None:
        return issues
    tokens = list(argv)
    module = ROUTER_MODULES[package] if package in ROUTER_MODULES else "sglang.launch_server"
    if len(tokens) >= 3 and tokens[1] == "-m":
        if tokens[2] != module:
            issues.append(ValidationIssue(field="argv[2]", message=f"argv runs {tokens[2]!r}, not {module}",
                                          hint=f"launch with python -m {module}"))
        tokens = tokens[3:]
    return issues + _check_tokens(tokens, catalogue, allow)


def _check_tokens(tokens: list[str], catalogue: FlagCatalogue, allow: Collection[str]) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    seen: set[str] = set()
    position = 0
    while position < len(tokens):
        spelling = tokens[position]
        field = f"argv[{position}]"
        values, position = _take_values(tokens, position + 1, catalogue.get(spelling))
        value: FlagValue = True if values is None else values
        issues += check_flag(spelling, value, catalogue, field=field, allow=allow)
        spec = catalogue.get(spelling)
        if spec is not None and spec.action != "append":
            if spec.dest in seen:
                issues.append(ValidationIssue(field=field, flag=spelling, message=f"{spelling} is given twice",
                                              hint="give each flag once"))
            seen.add(spec.dest)
    return issues


def _take_values(tokens: list[str], start: int, spec: FlagSpec | None) -> tuple[str | list[str] | None, int]:
    """The values argparse would consume after a flag (a value never starts with '--')."""
    following = []
    for token in tokens[start:]:
        if token.startswith("--"):
            break
        following.append(token)
    if spec is None:
        return (following[0] if following else None), start + min(len(following), 1)
    if spec.is_bare:
        return None, start
    if spec.is_list or spec.nargs == "+" or (spec.action == "append" and spec.nargs == "+"):
        return following, start + len(following)
    if spec.nargs == "?" and not following:
        return None, start
    return (following[0] if following else ""), start + min(len(following), 1)


def _catalogue_for(package: Package, sglang_version: str | None,
                   router_version: str | None = None) -> tuple[FlagCatalogue | None, list[ValidationIssue]]:
    """A router's catalogue, or the SGLang version's (with an issue naming an unknown version)."""
    for router in ROUTER_PACKAGES:
        if package == router:
            try:
                return router_catalogue(router, router_version), []
            except UnknownVersionError as exc:
                return None, [ValidationIssue(field="deployment.router.version", message=str(exc),
                                              hint="pick a shipped router version, or leave it unset")]
    return catalogue_or_issue(sglang_version or "")
