"""Everything one diagnosis reads, in one place, with "was this figure given?" built in."""

from __future__ import annotations

from dataclasses import dataclass

from service.diagnosis.bench_output import BenchReading
from service.diagnosis.findings import DiagnosisContext
from service.diagnosis.metrics_scrape import MetricsReading
from service.diagnosis.server_log import LogReading
from service.domain import SLO, WorkloadProfile


@dataclass(frozen=True)
class Observed:
    """The inputs of one diagnosis: bench figures, server metrics, logs, profile and context."""

    bench: BenchReading
    metrics: MetricsReading | None
    log: LogReading
    profile: WorkloadProfile | None
    context: DiagnosisContext

    def figure(self, key: str) -> float | None:
        """A bench_serving figure, or None when the input did not carry it."""
        if key not in self.bench.fields:
            return None
        value = getattr(self.bench.figures, key)
        return float(value) if value is not None else None

    def metric(self, name: str) -> float | None:
        """A server metric (name without `sglang:`), or None without a scrape or that metric."""
        if self.metrics is None or not self.metrics.has(name):
            return None
        return self.metrics.values[name]

    @property
    def slo(self) -> SLO:
        """The SLO to check, empty when none was given."""
        return self.context.slo or SLO()

    def queue(self) -> float | None:
        """Waiting requests (`num_queue_reqs`)."""
        return self.metric("num_queue_reqs")

    def accept_length(self) -> float | None:
        """Speculative accept length: bench figure, then server metric, then log."""
        for value in (self.figure("accept_length"), self.metric("spec_accept_length"), self.log.accept_length):
            if value:
                return value
        return None

    def accept_rate(self) -> float | None:
        """Speculative accept rate: server metric, then log."""
        return self.metric("spec_accept_rate") or self.log.accept_rate
