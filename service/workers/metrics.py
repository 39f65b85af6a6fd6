"""The service's own Prometheus metrics, one registry per app (never the process-global one)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from service.domain import JobState

# Rounds on the simulator take seconds; on GPUs a round restarts servers and benchmarks for minutes.
_ROUND_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


class ServiceMetrics:
    """Jobs by state, round durations, runner failures, lease reaps and schedule fires."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.jobs = Gauge("sglang_tuner_jobs", "Jobs by state.", ["state"], registry=self.registry)
        self.round_seconds = Histogram("sglang_tuner_round_duration_seconds", "Wall time of finished rounds.",
                                       ["runner"], buckets=_ROUND_BUCKETS, registry=self.registry)
        self.runner_failures = Counter("sglang_tuner_runner_failures_total",
                                       "Rounds that failed and jobs whose executor raised.", ["runner"],
                                       registry=self.registry)
        self.reaped = Counter("sglang_tuner_reaped_jobs_total", "Jobs requeued after their worker's lease expired.",
                              registry=self.registry)
        self.schedule_fires = Counter("sglang_tuner_schedule_fires_total", "Schedule fires by outcome.",
                                      ["outcome"], registry=self.registry)

    def set_job_counts(self, counts: dict[JobState, int]) -> None:
        """Refresh the jobs-by-state gauge from the store's counts."""
        for state, count in counts.items():
            self.jobs.labels(state=state.value).set(count)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
