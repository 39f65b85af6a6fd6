"""The router a deployment targets: sglang-router or SMG (sgl-model-gateway), at a shipped catalogue's version.

`deployment.router.package` picks the package (default `sglang-router`) and `deployment.router.version`
one of its catalogues (default: the newest shipped). Its module, its policies and its flags come from that
catalogue; a policy or flag the chosen router lacks is refused with the router that has it.
"""

from __future__ import annotations

from typing import Final

from service.domain import RouterConfig
from service.sglang.flags import (
    ROUTER,
    ROUTER_PACKAGES,
    SMG,
    FlagCatalogue,
    Package,
    RouterPackage,
    UnknownVersionError,
    catalogue_versions,
    router_catalogue,
)
from service.sglang.values import ValidationIssue

# `python -m <module>` of each router package.
ROUTER_MODULES: Final[dict[RouterPackage, str]] = {ROUTER: "sglang_router.launch_router", SMG: "smg.launch_router"}

# Router flags the renderer derives from the deployment.
ROUTER_RENDERED = frozenset({"--host", "--port", "--worker-urls", "--policy", "--prefill-policy", "--decode-policy",
                             "--pd-disaggregation", "--prefill", "--decode", "--cache-threshold",
                             "--balance-abs-threshold", "--balance-rel-threshold", "--prometheus-port"})


def router_target(router: RouterConfig) -> tuple[FlagCatalogue | None, list[ValidationIssue]]:
    """The catalogue of the router a deployment names, or an issue naming the shipped versions."""
    try:
        return router_catalogue(router.package, router.version), []
    except UnknownVersionError:
        known = ", ".join(catalogue_versions(router.package)) or "none"
        return None, [ValidationIssue(
            field="deployment.router.version", message=f"no flag catalogue for {router.package} {router.version}",
            hint=f"set deployment.router.version to a shipped {router.package} version ({known}), or leave it unset "
                 "for the newest")]


def other_routers(package: Package) -> list[FlagCatalogue]:
    """The newest catalogue of every other router package (where a refused policy or flag may live)."""
    return [router_catalogue(other) for other in ROUTER_PACKAGES if other != package and catalogue_versions(other)]


def check_router_policies(router: RouterConfig, catalogue: FlagCatalogue) -> list[ValidationIssue]:
    """`policy`, `prefill_policy` and `decode_policy` are choices of the chosen router's flags."""
    issues: list[ValidationIssue] = []
    where = f"{catalogue.package} {catalogue.version}"
    for name, flag, value in (("policy", "--policy", router.policy),
                              ("prefill_policy", "--prefill-policy", router.prefill_policy),
                              ("decode_policy", "--decode-policy", router.decode_policy)):
        spec = catalogue.get(flag)
        if value is None or spec is None or spec.choices is None or value in spec.choices:
            continue
        offered = [other for other in other_routers(catalogue.package)
                   if (other_spec := other.get(flag)) is not None and value in (other_spec.choices or [])]
        choices = ", ".join(str(choice) for choice in spec.choices)
        if offered:
            hint = (f'set deployment.router.package = "{offered[0].package}" ({offered[0].package} '
                    f"{offered[0].version} offers {value}), or pick one of {where}'s: {choices}")
        else:
            hint = f"pick one of {where}'s: {choices}"
        issues.append(ValidationIssue(field=f"deployment.router.{name}", flag=flag,
                                      message=f"{where} has no {value} policy for {flag}", hint=hint))
    return issues


def hint_other_router(issues: list[ValidationIssue], catalogue: FlagCatalogue) -> list[ValidationIssue]:
    """Point an unknown router flag at the router package that has it."""
    out = []
    for issue in issues:
        if issue.flag and issue.message.startswith("unknown flag"):
            having = next((other for other in other_routers(catalogue.package) if issue.flag in other), None)
            if having is not None:
                issue = ValidationIssue(field=issue.field, flag=issue.flag, severity=issue.severity,
                                        message=issue.message,
                                        hint=f'{issue.flag} is a flag of {having.package} {having.version}: set '
                                             f'deployment.router.package = "{having.package}", or remove it')
        out.append(issue)
    return out
