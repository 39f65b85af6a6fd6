"""Logging: JSON lines off a terminal, and secrets never reach a line."""

import json

import structlog

from service.logs import configure_logging, redact_secrets


def test_credentials_are_masked_but_token_counts_are_kept():
    event = {"event": "job_created", "api_key": "sk-123", "Authorization": "Bearer x", "total_tokens": 5}
    out = redact_secrets(None, "info", dict(event))
    assert out["api_key"] == "***" and out["Authorization"] == "***"
    assert out["total_tokens"] == 5 and out["event"] == "job_created"


def test_json_lines_when_not_a_terminal(capsys):
    structlog.reset_defaults()
    import service.logs as logs

    logs._configured = False
    configure_logging("info", json=True)
    structlog.get_logger("t").info("round_finished", verdict="accept", password="hunter2")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    record = json.loads(line)
    assert record["event"] == "round_finished" and record["verdict"] == "accept"
    assert record["password"] == "***"
    logs._configured = False
    structlog.reset_defaults()
