"""A scenario bundles model, hardware, deployment, workload, SLO and bench spec: the one input format."""

from __future__ import annotations

import msgspec

from service.domain.bench import BenchSpec
from service.domain.deployment import Deployment
from service.domain.hardware import Hardware
from service.domain.slo import SLO, Objective
from service.domain.workload import WorkloadProfile

DEFAULT_SGLANG_VERSION = "0.5.23"


class QualityResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A user-supplied quality evaluation of a model or configuration (casebook case 3 table)."""

    subject: str
    metrics: dict[str, float]
    acceptable: bool | None = None
    note: str = ""


class Scenario(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Everything a benchmark round or a tuning job needs to know about one deployment target."""

    name: str
    model: str
    deployment: Deployment
    hardware: Hardware = Hardware()
    workload: WorkloadProfile = WorkloadProfile()
    slo: SLO = SLO()
    objective: Objective = Objective()
    bench: BenchSpec = BenchSpec()
    sglang_version: str = DEFAULT_SGLANG_VERSION
    description: str = ""
    quality: list[QualityResult] = msgspec.field(default_factory=list)
