"""Bad scenarios every door must refuse, each a small edit of the casebook's case 1 round-0 scenario.

Each entry: the edit (text replacements in the TOML file), the field the refusal must name, words of the
message or hint that say what is wrong or how to fix it, and whether the scenario can travel as JSON. Shared by the CLI, API, schedule and MCP tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from service.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "playbooks" / "scenarios" / "coding-assistant-round0.toml"
SERVER = "deployment.groups[0].server"


@dataclass(frozen=True)
class BadInput:
    name: str
    edits: tuple[tuple[str, str], ...]
    field: str
    words: str
    in_json: bool = True  # JSON has no NaN: such a value reaches only the TOML doors

    def toml(self) -> str:
        text = BASE.read_text(encoding="utf-8")
        for old, new in self.edits:
            assert text.count(old) == 1, f"{self.name}: {old!r} is not once in {BASE.name}"
            text = text.replace(old, new)
        return text

    def data(self) -> dict[str, Any]:
        """The scenario as a JSON body (what the API and MCP receive); it decodes, so only the check refuses it."""
        return msgspec.to_builtins(parse_scenario(self.toml(), source=self.name))


def _server_lines(*lines: str) -> tuple[tuple[str, str], ...]:
    return (("enable-metrics = true", "\n".join(["enable-metrics = true", *lines])),)


BAD_INPUTS = [
    # Issue 15: TP 16 on an 8-GPU node ran seven rounds and "succeeded".
    BadInput("tp16-on-one-8-gpu-node", (("tp-size = 8", "tp-size = 16"),), f"{SERVER}.tp-size", "16 GPUs"),
    BadInput("unknown-flag", _server_lines('extra = { "--enable-turbo-mode" = true }'),
             f"{SERVER}.extra.--enable-turbo-mode", "unknown flag --enable-turbo-mode"),
    # Removed after 0.5.2: the refusal names the replacement.
    BadInput("removed-flag-on-0.5.23", _server_lines('extra = { "--enable-ep-moe" = true }'),
             f"{SERVER}.extra.--enable-ep-moe", "--ep-size"),
    # SGLang's parser (argparse.ArgumentParser(prog="sglang serve"), allow_abbrev left at True) would read
    # --trust-rem as --trust-remote-code: an abbreviation would smuggle in a flag that runs remote code.
    BadInput("argparse-abbreviation", _server_lines('extra = { "--trust-rem" = true }'),
             f"{SERVER}.extra.--trust-rem", "abbreviates --trust-remote-code"),
    # Casebook case 2, round 3: with one token per page the hierarchical cache does not operate.
    BadInput("hicache-with-page-size-1", _server_lines("enable-hierarchical-cache = true", "page-size = 1"),
             f"{SERVER}.page-size", "page-size = 64"),
    BadInput("shell-in-server-model-path", _server_lines('model-path = "x; rm -rf /"'),
             f"{SERVER}.model-path", "';' (a command separator)"),
    BadInput("negative-bench-concurrency", (("max_concurrency = 25", "max_concurrency = -5"),),
             "bench.max_concurrency", "max_concurrency is -5"),
    BadInput("negative-peak-concurrency", (("peak_concurrency = 25", "peak_concurrency = -3"),),
             "workload.peak_concurrency", "peak_concurrency is -3"),
    BadInput("shell-in-model", (('model = "Qwen/Qwen3.6-27B"', 'model = "x; rm -rf /"'),), "model",
             "';' (a command separator)"),
    BadInput("unknown-model", (('model = "Qwen/Qwen3.6-27B"', 'model = "Qwen/Qwen36-27B"'),), "model",
             "did you mean 'Qwen/Qwen3.6-27B'?"),
    BadInput("model-path-climbing", (('model = "Qwen/Qwen3.6-27B"', 'model = "../../etc/models/qwen"'),), "model",
             "'..'"),
    BadInput("unknown-gpu", (('gpu = "H200-SXM"', 'gpu = "H300-SXM"'),), "hardware.gpu", "did you mean"),
    BadInput("zero-prompts", (("num_prompts = 500", "num_prompts = 0"),), "bench.num_prompts", "at least 1"),
    BadInput("mem-fraction-above-one", _server_lines("mem-fraction-static = 1.2"), f"{SERVER}.mem-fraction-static",
             "above 0 and below 1"),
    # A node of no GPUs once crashed the placement check with a division by zero.
    BadInput("zero-gpus-per-node", (("gpus_per_node = 8", "gpus_per_node = 0"),), "hardware.gpus_per_node",
             "at least 1"),
    BadInput("nan-slo-target", (("ttft_p95_ms = 1000", "ttft_p95_ms = nan"),), "slo.ttft_p95_ms", "a finite number",
             in_json=False),
    BadInput("group-name-as-a-path", (('name = "worker"', 'name = "../../tmp/x"'),), "deployment.groups[0].name",
             "not a plain name"),
]

JSON_INPUTS = [bad for bad in BAD_INPUTS if bad.in_json]
