"""Which casebook playbook fits a workload: the case whose dominant constraint matches."""

from __future__ import annotations

from service.domain import SLO, Hardware, WorkloadProfile

# The shipped playbooks, one per casebook case, plus `auto` (the tuning order from the profile).
PLAYBOOKS = ("coding-assistant", "document-qa-rag", "nightly-batch", "structured-output", "moe-at-scale", "auto")
# "GPU Scale: > 64 -> EP + PD disaggregation review zone" (casebook, Five Cases Comparison).
LARGE_SCALE_GPUS = 64
# "Prefix Sharing Rate > 0.6 -> Routing policy dominates performance."
HIGH_SHARING = 0.6
# A workload's structure-derived sharing rate is read over this many prompts when no bench is given.
SHARING_PROMPTS = 1000


def choose_playbook(workload: WorkloadProfile, slo: SLO, hardware: Hardware) -> tuple[str, str]:
    """Return (playbook, reason), checking constraints in the casebook's order of precedence."""
    structured = workload.structured_output
    if slo.failure_rate_max is not None or structured.mode != "none":
        return "structured-output", "a failure-rate target or structured output dominates (casebook case 4)."
    if slo.deadline_hours is not None:
        return "nightly-batch", "a completion deadline with no latency target is throughput-dominated (case 3)."
    if hardware.gpus_per_node * hardware.nodes > LARGE_SCALE_GPUS:
        return "moe-at-scale", f"{hardware.gpus_per_node * hardware.nodes} GPUs is the EP and PD review zone (case 5)."
    sharing = workload.sharing_rate(SHARING_PROMPTS)
    if sharing > HIGH_SHARING or workload.prefix.documents is not None:
        return "document-qa-rag", f"prefix sharing {sharing:.2f}: routing and caching dominate (case 2)."
    if slo.ttft_p95_ms is not None or slo.ttft_p99_ms is not None or slo.itl_median_ms is not None:
        return "coding-assistant", "a latency SLO at moderate concurrency (case 1)."
    return "auto", "no dominant constraint: the casebook's tuning order from the profile."
