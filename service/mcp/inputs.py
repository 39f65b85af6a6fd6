"""Tool inputs: strict msgspec Structs; each tool's JSON schema is derived from these.

Unknown fields are errors (`forbid_unknown_fields`), exactly as the HTTP API decodes its bodies.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from service.domain import GPU_CATALOGUE, SLO, Hardware, WorkloadProfile
from service.domain.deployment import RouterPolicy

Text = Annotated[str, msgspec.Meta(max_length=1_000_000)]
JobId = Annotated[str, msgspec.Meta(min_length=1, max_length=100, description="A job id from start_tuning_job.")]


class _Input(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    pass


class ProfileWorkloadInput(_Input, kw_only=True):
    """Measure a workload profile from a request log (JSON lines with prompt and completion)."""

    log_path: str | None = msgspec.field(default=None)
    log_text: Text | None = None
    tokenizer: Annotated[str, msgspec.Meta(description="Folder holding tokenizer.json, or the file itself.")]
    page_size: Annotated[int, msgspec.Meta(ge=1)] = 1


class PlanCapacityInput(_Input, kw_only=True):
    """The casebook's capacity calculation for a model on a GPU set."""

    model: Annotated[str, msgspec.Meta(description="A shipped model id such as Qwen/Qwen3.6-27B.")]
    gpu: Annotated[str, msgspec.Meta(description=f"GPU kind: {', '.join(GPU_CATALOGUE)}.")]
    gpus: Annotated[int, msgspec.Meta(ge=1)] = 1
    weight_dtype: Literal["bf16", "fp8"] = "bf16"
    kv_dtype: Literal["bf16", "fp8_e5m2", "fp8_e4m3"] = "bf16"
    headroom_gb: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    context_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    concurrency: Annotated[int, msgspec.Meta(ge=1)] | None = None
    document_tokens: Annotated[int, msgspec.Meta(ge=1)] | None = None
    hicache_ratio: Annotated[float, msgspec.Meta(gt=0)] | None = None
    batch_requests: Annotated[int, msgspec.Meta(ge=1)] | None = None
    batch_input_tokens: Annotated[float, msgspec.Meta(gt=0)] | None = None
    batch_output_tokens: Annotated[float, msgspec.Meta(gt=0)] | None = None
    deadline_hours: Annotated[float, msgspec.Meta(gt=0)] | None = None


class DiagnoseBenchmarkInput(_Input, kw_only=True):
    """A bench_serving result and what else is known about the deployment."""

    bench_output: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)]
    metrics: Text | None = None
    profile: WorkloadProfile | None = None
    slo: SLO | None = None
    failure_rate: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    model: str | None = None
    workers: Annotated[int, msgspec.Meta(ge=1)] | None = None
    tp_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    ep_size: Annotated[int, msgspec.Meta(ge=1)] | None = None
    router_policy: RouterPolicy | None = None
    server_log: Text | None = None


class RecommendPlaybookInput(_Input, kw_only=True):
    """What the workload and targets look like."""

    workload: WorkloadProfile = WorkloadProfile()
    slo: SLO = SLO()
    hardware: Hardware = Hardware()


class ScenarioInput(_Input, kw_only=True):
    """A scenario: inline as TOML text or a JSON object (the format of examples/casebook/*.toml), or a path."""

    scenario_toml: Text | None = None
    scenario: dict[str, Any] | None = None
    scenario_path: str | None = None
    sglang_version: str | None = None


class StartTuningJobInput(_Input, kw_only=True):
    """Start a tuning job: a playbook applied to a scenario on a runner (the body of POST /v1/jobs)."""

    playbook: str
    runner: Annotated[str | None, msgspec.Meta(
        description="Runner name (GET /v1/runners); left out, the playbook's runner, else the simulator.")] = None
    scenario: dict[str, Any] | None = None
    resource: str | None = None
    kind: Literal["tune", "round"] = "tune"


class JobInput(_Input, kw_only=True):
    """A job to read or act on."""

    job_id: JobId


class GetJobInput(_Input, kw_only=True):
    """A job to read, optionally waiting for its state to change."""

    job_id: JobId
    wait_seconds: Annotated[float, msgspec.Meta(
        ge=0, le=60, description="Long-poll: answer as soon as the job's state changes, or after this long.")] = 0.0


class JobRoundInput(_Input, kw_only=True):
    """One round of a job."""

    job_id: JobId
    round_index: Annotated[int, msgspec.Meta(ge=0)]


class CompareRoundsInput(_Input, kw_only=True):
    """Two rounds of a job to compare (the later one against the earlier one)."""

    job_id: JobId
    baseline_round: Annotated[int, msgspec.Meta(ge=0)]
    candidate_round: Annotated[int, msgspec.Meta(ge=0)]
