"""Flag safety: values that could smuggle shell syntax or extra flags, and flags that widen what a server does.

Launches are argv lists, never shell strings, so quoting is never the defence: a value carrying shell
syntax or starting with `-` is refused outright. Flags that run code, read or write files the operator did
not choose, or reach out over the network are refused unless the operator allows each one by name.
Any catalogue flag whose help text hints at such powers and that nobody has reviewed is refused too, so a
regenerated catalogue fails closed.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from service.sglang.flags import ROUTER, SGLANG, SMG, FlagSpec, Package

DangerKind = Literal["runs_code", "reads_files", "writes_files", "network", "unreviewed"]

# Everything else is refused; `[` `]` stay allowed for IPv6 URLs and JSON lists of numbers.
_SAFE_VALUE = re.compile(r"[A-Za-z0-9_.:/@%+=,\[\]-]*")
_CHARACTER_NAMES = {
    ";": "a command separator", "|": "a pipe", "&": "a background/AND operator", "$": "a variable expansion",
    "`": "a command substitution", "<": "a redirection", ">": "a redirection", "\n": "a newline",
    "\r": "a carriage return", "'": "a quote", '"': "a quote", "\\": "a backslash", " ": "a space",
    "\t": "a tab", "(": "a subshell", ")": "a subshell", "*": "a glob", "?": "a glob", "~": "a home expansion",
    "#": "a comment", "!": "a history expansion", "{": "a brace expansion", "}": "a brace expansion",
    "\x00": "a NUL byte",
}


class Danger(msgspec.Struct, frozen=True, kw_only=True):
    """Why a flag (or one value of it) needs an operator's explicit permission."""

    kind: DangerKind
    reason: str


def unsafe_character(value: str) -> str | None:
    """Describe the first character of `value` that a launch refuses, or None when the value is clean."""
    if _SAFE_VALUE.fullmatch(value):
        return None
    bad = next(ch for ch in value if not _SAFE_VALUE.fullmatch(ch))
    return f"{bad!r} ({_CHARACTER_NAMES.get(bad, 'not a plain value character')})"


def looks_like_flag(value: str) -> bool:
    """True when a value would be read as an option (`--served-model-name --trust-remote-code`)."""
    if not value.startswith("-"):
        return False
    try:
        float(value)
    except ValueError:
        return True
    return False


def _danger(kind: DangerKind, reason: str) -> Danger:
    return Danger(kind=kind, reason=reason)


# Reviewed against the help texts of every shipped catalogue (tests/unit/sglang/test_safety.py keeps it so).
# The routers' shared flags (SMG grew out of sglang-router and keeps its options), then SMG's own.
ROUTER_DANGERS: dict[str, Danger] = {
    "--mcp-config-path": _danger("reads_files", "reads an MCP configuration and connects to its servers"),
    "--chat-template": _danger("reads_files", "reads a template file from any path"),
    "--tls-cert-path": _danger("reads_files", "reads a certificate from any path"),
    "--tls-key-path": _danger("reads_files", "reads a private key from any path"),
    "--client-cert-path": _danger("reads_files", "reads a certificate from any path"),
    "--client-key-path": _danger("reads_files", "reads a private key from any path"),
    "--ca-cert-paths": _danger("reads_files", "reads certificates from any path"),
    "--oracle-wallet-path": _danger("reads_files", "reads a wallet from any path"),
    "--log-dir": _danger("writes_files", "writes log files to any folder"),
    "--postgres-db-url": _danger("network", "connects to a database"),
    "--redis-url": _danger("network", "connects to a database"),
    "--oracle-connect-descriptor": _danger("network", "connects to a database"),
    "--oracle-tns-alias": _danger("network", "connects to a database"),
    "--otlp-traces-endpoint": _danger("network", "sends traces to any endpoint"),
    "--jwt-issuer": _danger("network", "fetches OIDC discovery documents"),
    "--jwt-jwks-uri": _danger("network", "fetches signing keys from any URL"),
    "--service-discovery": _danger("network", "watches the Kubernetes API for workers"),
}
SMG_DANGERS: dict[str, Danger] = {
    "--mesh-tls-ca-cert": _danger("reads_files", "reads a certificate from any path"),
    "--mesh-tls-cert": _danger("reads_files", "reads a certificate from any path"),
    "--mesh-tls-key": _danger("reads_files", "reads a private key from any path"),
    "--discovery-file": _danger("reads_files", "reads the worker list from a file at any path"),
    "--schema-config": _danger("reads_files", "reads a YAML file from any path and may migrate the database"),
    "--priority-scheduler-config": _danger("reads_files", "reads a YAML file from any path"),
    "--tenant-rate-limit-config": _danger("reads_files", "reads a YAML file from any path"),
    "--enable-wasm": _danger("runs_code", "loads WebAssembly modules"),
    "--storage-hook-wasm-path": _danger("runs_code", "runs a WebAssembly component from any path"),
    "--enable-rl": _danger("network", "lets clients fan engine control calls (weight updates) out to workers"),
    "--jemalloc-prof-dir": _danger("writes_files", "writes heap profiles to any folder"),
    "--enable-mesh": _danger("network", "listens for and joins other routers' mesh"),
    "--mesh-peer-urls": _danger("network", "connects to mesh peers at any address"),
    "--mm-allow-private-media-hosts": _danger("network", "fetches client-named media from private addresses"),
}
ROUTER_VALUE_DANGERS: dict[tuple[str, str], Danger] = {
    ("--backend", "openai"): _danger("network", "forwards requests to an external OpenAI endpoint"),
    ("--history-backend", "oracle"): _danger("network", "stores history in an external database"),
    ("--history-backend", "postgres"): _danger("network", "stores history in an external database"),
    ("--history-backend", "redis"): _danger("network", "stores history in an external database"),
}
SMG_VALUE_DANGERS: dict[tuple[str, str], Danger] = {
    ("--backend", "anthropic"): _danger("network", "forwards requests to an external Anthropic endpoint"),
    ("--discovery-provider", "kubernetes"): _danger("network", "watches the Kubernetes API for workers"),
    ("--discovery-provider", "file"): _danger("reads_files", "reads the worker list from a file"),
}

DANGEROUS_FLAGS: dict[Package, dict[str, Danger]] = {
    SGLANG: {
        "--trust-remote-code": _danger("runs_code", "runs Python shipped in the model repository"),
        "--forward-hooks": _danger("runs_code", "imports and attaches arbitrary forward hooks"),
        "--custom-weight-loader": _danger("runs_code", "imports a weight-loading function by import path"),
        "--enable-custom-logit-processor": _danger("runs_code", "lets requests ship logit-processor code"),
        "--trust-request-chat-template": _danger("runs_code", "lets requests supply chat templates"),
        "--sidecar": _danger("runs_code", "starts a Python module as a sidecar process"),
        "--sidecar-args": _danger("runs_code", "passes arguments to a sidecar module"),
        "--unified-cache-external-linker-config": _danger("runs_code", "can name a linker class to load"),
        "--config": _danger("reads_files", "reads launch options from a YAML file, bypassing validation"),
        "--chat-template": _danger("reads_files", "reads a template file from any path"),
        "--completion-template": _danger("reads_files", "reads a template file from any path"),
        "--quantization-param-path": _danger("reads_files", "reads a JSON file from any path"),
        "--lmcache-config-file": _danger("reads_files", "reads a configuration file from any path"),
        "--flexkv-config-file": _danger("reads_files", "reads a configuration file from any path"),
        "--dllm-algorithm-config": _danger("reads_files", "reads a YAML file from any path"),
        "--pdmux-config-path": _danger("reads_files", "reads a configuration file from any path"),
        "--decrypted-config-file": _danger("reads_files", "reads a configuration file from any path"),
        "--decrypted-draft-config-file": _danger("reads_files", "reads a configuration file from any path"),
        "--msprobe-dump-config": _danger("reads_files", "reads a configuration file from any path"),
        "--watermark-config": _danger("reads_files", "reads a JSON file from any path"),
        "--deepep-config": _danger("reads_files", "reads a JSON file from any path"),
        "--ds-channel-config-path": _danger("reads_files", "reads a configuration file from any path"),
        "--speculative-adaptive-config": _danger("reads_files", "reads a JSON file from any path"),
        "--speculative-token-map": _danger("reads_files", "reads a vocabulary file from any path"),
        "--uno-lora-path": _danger("reads_files", "loads a checkpoint from any path"),
        "--lora-paths": _danger("reads_files", "loads adapters from any path or hub repository"),
        "--debug-tensor-dump-input-file": _danger("reads_files", "reads a file from any path"),
        "--modelopt-checkpoint-restore-path": _danger("reads_files", "loads a checkpoint from any path"),
        "--rl-quant-profile": _danger("reads_files", "reads a profile from any path"),
        "--kt-weight-path": _danger("reads_files", "loads weights from any path"),
        "--model-checksum": _danger("reads_files", "reads a checksum file from any path or the hub"),
        "--hicache-storage-backend-extra-config": _danger("reads_files", "accepts '@file' to read any file"),
        "--ssl-keyfile": _danger("reads_files", "reads a private key from any path"),
        "--ssl-certfile": _danger("reads_files", "reads a certificate from any path"),
        "--ssl-ca-certs": _danger("reads_files", "reads certificates from any path"),
        "--delete-ckpt-after-loading": _danger("writes_files", "deletes the model checkpoint after loading"),
        "--modelopt-checkpoint-save-path": _danger("writes_files", "writes a checkpoint to any path"),
        "--modelopt-export-path": _danger("writes_files", "writes a model to any path"),
        "--crash-dump-folder": _danger("writes_files", "writes request dumps to any folder"),
        "--debug-tensor-dump-output-folder": _danger("writes_files", "writes tensors to any folder"),
        "--export-metrics-to-file-dir": _danger("writes_files", "writes metric files to any folder"),
        "--log-requests-target": _danger("writes_files", "writes request logs to any folder"),
        "--file-storage-path": _danger("writes_files", "stores files under any path"),
        "--ple-offload-dir": _danger("writes_files", "writes tables under any folder"),
        "--spec-trace-dir": _danger("writes_files", "writes trace files to any folder"),
        "--download-dir": _danger("writes_files", "downloads weights into any folder"),
        "--tool-server": _danger("network", "connects to tool servers at any URL"),
        "--otlp-traces-endpoint": _danger("network", "sends traces to any endpoint"),
        "--encoder-urls": _danger("network", "sends requests to encoder servers at any URL"),
        "--encoder-register-urls": _danger("network", "registers with servers at any URL"),
        "--remote-instance-weight-loader-seed-instance-ip": _danger("network", "loads weights from a remote host"),
        "--modelexpress-config": _danger("network", "loads weights from peers over the network"),
        "--kv-events-config": _danger("network", "publishes KV events to an endpoint"),
        "--decoupled-spec-connect-endpoints": _danger("network", "connects to peer endpoints"),
    },
    ROUTER: ROUTER_DANGERS,
    SMG: {**ROUTER_DANGERS, **SMG_DANGERS},
}

# Values that change what an otherwise harmless flag does (allow them as "--flag=value").
DANGEROUS_VALUES: dict[Package, dict[tuple[str, str], Danger]] = {
    SGLANG: {
        ("--load-format", "remote"): _danger("network", "loads weights from a remote store"),
        ("--load-format", "remote_instance"): _danger("network", "loads weights from another instance"),
        ("--load-format", "private"): _danger("runs_code", "loads weights with a private loader"),
        ("--hicache-storage-backend", "dynamic"): _danger("runs_code", "imports a storage backend class"),
    },
    ROUTER: ROUTER_VALUE_DANGERS,
    SMG: {**ROUTER_VALUE_DANGERS, **SMG_VALUE_DANGERS},
}

# Flags whose help text matches REVIEW_PATTERN but that were reviewed and do nothing beyond serving.
REVIEWED_SAFE: dict[Package, frozenset[str]] = {
    SGLANG: frozenset({
        "--model-path", "--tokenizer-path", "--speculative-draft-model-path", "--served-model-name",
        "--admin-api-key", "--allowed-media-domains", "--asr-max-buffer-seconds", "--asr-max-concurrent-sessions",
        "--media-url-max-file-size-mb", "--encoder-bootstrap-port", "--grpc-http-sidecar-port",
        "--smg-http-sidecar-port", "--enable-forward-pass-metrics", "--load-publish-endpoint",
        "--decoupled-spec-bind-endpoint", "--remote-instance-weight-loader-backend",
        "--remote-instance-weight-loader-seed-instance-service-port",
        "--remote-instance-weight-loader-send-weights-group-ports",
        "--remote-instance-weight-loader-start-seed-via-transfer-engine", "--hicache-storage-backend",
        "--weight-cache-socket",
    }),
    ROUTER: frozenset({
        "--worker-urls", "--prefill", "--decode", "--health-check-endpoint", "--model-path", "--tokenizer-path",
    }),
    SMG: frozenset({
        "--worker-urls", "--prefill", "--decode", "--encode", "--health-check-endpoint", "--model-path",
        "--tokenizer-path", "--sse-keepalive-secs", "--mm-allowed-media-domains", "--storage-context-headers",
        "--priority-scheduler-default-max-class", "--zmq-engine-count",
    }),
}

REVIEW_PATTERN = re.compile(
    r"import path|remote code|custom (?:weight|data)?\s*(?:loader|logit)|hook|file ?path|path (?:of|to) the"
    r"|config(?:uration)? file|\burls?\b|endpoint|download|delete|sidecar|python module|\bfolder\b"
    r"|director(?:y|ies)|yaml|@file|socket|remote instance|class name",
    re.IGNORECASE,
)


def flag_danger(spec: FlagSpec, package: Package) -> Danger | None:
    """Why `spec` needs permission: curated, or unreviewed with a help text that hints at such powers."""
    curated = DANGEROUS_FLAGS[package].get(spec.flag)
    if curated is not None:
        return curated
    if spec.flag in REVIEWED_SAFE[package]:
        return None
    hint = REVIEW_PATTERN.search(f"{spec.help} {spec.flag}")
    if hint is None:
        return None
    return Danger(kind="unreviewed", reason=f"its help mentions {hint.group(0)!r} and it has not been reviewed")


def value_danger(spec: FlagSpec, value: str, package: Package) -> Danger | None:
    """Why one value of an otherwise harmless flag needs permission, or None."""
    return DANGEROUS_VALUES[package].get((spec.flag, value))
