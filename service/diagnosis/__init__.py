"""The casebook's diagnosis: read a bench_serving result (and a /metrics scrape) in the casebook's order."""

from service.diagnosis.bench_output import BenchReading, parse_bench_output
from service.diagnosis.diagnose import READING_ORDER, context_from_scenario, diagnose
from service.diagnosis.findings import Diagnosis, DiagnosisContext, DiagnosisInputError, Finding
from service.diagnosis.metrics_scrape import MetricsReading, parse_metrics_scrape
from service.diagnosis.server_log import LogReading, read_server_log

__all__ = [
    "READING_ORDER",
    "BenchReading",
    "Diagnosis",
    "DiagnosisContext",
    "DiagnosisInputError",
    "Finding",
    "LogReading",
    "MetricsReading",
    "context_from_scenario",
    "diagnose",
    "parse_bench_output",
    "parse_metrics_scrape",
    "read_server_log",
]
