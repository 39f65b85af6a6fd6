"""Domain types (msgspec Structs): hardware, models, workloads, SLOs, deployments, rounds and jobs."""

from service.domain.assessment import LATENCY_TARGETS, SLO_TARGETS, SLO_UNITS, completion_hours, mean_result, slo_checks
from service.domain.bench import (
    TRACE_BLOCK_TOKENS,
    BenchFigures,
    BenchSpec,
    MaxLoadSearch,
    PlacementRecord,
    ProcessRecord,
    Provenance,
    RequestSamples,
    RoundResult,
    RoundStatus,
    ServerMetrics,
    Source,
    TraceRecord,
    TraceSpec,
)
from service.domain.calibration import (
    PARAMETERS,
    Calibration,
    CalibrationKey,
    Factors,
    Parameter,
    Residual,
    calibration_for,
    key_of,
    layout_of,
)
from service.domain.deployment import (
    Deployment,
    FlagValue,
    PlacedWorker,
    RouterConfig,
    ServerConfig,
    WorkerGroup,
    place_workers,
)
from service.domain.hardware import GPU_CATALOGUE, GpuSpec, Hardware, gpu_spec
from service.domain.model import (
    Architecture,
    AttentionKind,
    ModelSpec,
    draft_after_switch,
    dtype_bytes,
    known_draft,
    resolve_model,
)
from service.domain.scenario import DEFAULT_SGLANG_VERSION, QualityResult, Scenario
from service.domain.slo import GOODPUT_METRICS, SLO, Objective, goodput, goodput_slos
from service.domain.tuning import (
    ConfigDelta,
    Decision,
    Job,
    JobState,
    Pattern,
    Round,
    RoundState,
    SkippedStep,
    SLOCheck,
    Verdict,
)
from service.domain.workload import (
    DocumentSet,
    LengthDist,
    MeasuredProfile,
    PrefixStructure,
    SpeculativeBehaviour,
    StructuredOutput,
    WorkloadProfile,
)

__all__ = [
    "PARAMETERS", "Calibration", "CalibrationKey", "Factors", "Parameter", "Residual", "calibration_for", "key_of",
    "layout_of",
    "LATENCY_TARGETS", "SLO_TARGETS", "SLO_UNITS", "completion_hours", "mean_result", "slo_checks",
    "GOODPUT_METRICS", "MaxLoadSearch", "goodput", "goodput_slos",
    "DEFAULT_SGLANG_VERSION", "GPU_CATALOGUE", "SLO", "QualityResult", "Scenario", "Architecture", "AttentionKind", "BenchFigures", "BenchSpec", "ConfigDelta",
    "TRACE_BLOCK_TOKENS", "TraceRecord", "TraceSpec",
    "Decision", "Deployment", "DocumentSet", "FlagValue", "GpuSpec", "Hardware", "Job", "JobState", "SkippedStep",
    "LengthDist", "MeasuredProfile", "ModelSpec", "Objective", "Pattern", "PlacedWorker", "PrefixStructure",
    "PlacementRecord", "ProcessRecord", "Provenance",
    "RequestSamples", "Round", "RoundResult", "RoundState", "RoundStatus",
    "RouterConfig", "ServerConfig", "ServerMetrics", "SLOCheck", "Source", "SpeculativeBehaviour", "StructuredOutput", "Verdict",
    "WorkerGroup", "WorkloadProfile", "draft_after_switch", "dtype_bytes", "gpu_spec", "known_draft", "place_workers", "resolve_model",
]
