"""The service's own Prometheus metrics, one registry per app (never the process-global one)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from service.domain import JobState

# Rounds on the simulator take seconds; on GPUs a round restarts servers and benchmarks for minutes.
_ROUND_BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
# A GET of a job is a millisecond or two of work; the speed target is a P99 under 50 ms (BENCHMARKS.md, "API").
_REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5,
                    10, 60)


class ServiceMetrics:
    """Jobs by state, round durations, runner failures, lease reaps, schedule fires and request durations."""

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
        self.request_seconds = Histogram("sglang_tuner_http_request_duration_seconds",
                                         "Time from a request reaching the app to its last response byte, by "
                                         "operation (SSE streams and long-polls last as long as they are held).",
                                         ["operation"], buckets=_REQUEST_BUCKETS, registry=self.registry)

    def set_job_counts(self, counts: dict[JobState, int]) -> None:
        """Refresh the jobs-by-state gauge from the store's counts."""
        for state, count in counts.items():
            self.jobs.labels(state=state.value).set(count)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
