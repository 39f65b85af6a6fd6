"""Loading scenario files: the one input format of the CLI, the API and the playbooks."""

from __future__ import annotations

from pathlib import Path

import msgspec

from service.domain import ModelSpec, Scenario, resolve_model
from service.sglang.flags import versions_with
from service.sglang.spelling import RENDERER_FLAGS, field_key, owning_field
from service.strict_toml import InputFileError, decode_data, decode_file, decode_text
from service.traces import read_trace, trace_sharing

__all__ = ["InputFileError", "flag_hint", "is_sglang_flag", "load_scenario", "parse_scenario", "require_inline_trace", "scenario_from_data",
           "scenario_model"]

INLINE_TRACE_HINT = ("a scenario sent as text or data has no folder to read a trace file from: send the records "
                     "inline as `bench.trace.records`, or run it from a scenario file with the CLI")


def load_scenario(path: str | Path) -> Scenario:
    """Strictly decode a scenario TOML file; errors name the file, the line and the nearest valid key."""
    path = Path(path)
    if not path.exists():
        raise InputFileError("file not found", file=str(path), line=None, field=None,
                             hint="pass the path of a scenario .toml file (see examples/casebook/)")
    return _with_trace_records(decode_file(path, Scenario, known_flag=flag_hint), path.parent)


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Strictly decode scenario TOML text (an API upload or a playbook's embedded scenario)."""
    return require_inline_trace(decode_text(text, Scenario, source=source, known_flag=flag_hint), source)


def scenario_from_data(data: object, source: str = "<request>") -> Scenario:
    """Strictly convert parsed JSON or TOML data into a Scenario."""
    return require_inline_trace(decode_data(data, Scenario, source=source, known_flag=flag_hint), source)


def is_sglang_flag(spelling: str) -> bool:
    """Whether `spelling` is a launch flag of any shipped SGLang version's catalogue."""
    return bool(versions_with(spelling))


def flag_hint(spelling: str) -> bool | str:
    """For a server-table key that is no field: the fix when a typed field sets that flag under another name
    (`enable-dp-attention`: attention DP is `attention-dp-size`), else whether it is an SGLang flag at all."""
    dest = spelling.lstrip("-").replace("-", "_")
    if dest == "disaggregation_mode":
        return ('the group\'s role sets --disaggregation-mode: role = "prefill" or role = "decode" on its '
                "[[deployment.groups]] entry, with a [deployment.router] in front")
    if dest in RENDERER_FLAGS:
        return f"--{field_key(dest)} comes from {RENDERER_FLAGS[dest]}: the launch command spells it"
    owner = owning_field(dest)
    if owner == "attention_dp_size":
        return ("attention DP is one key here: attention-dp-size = N for SGLang's --enable-dp-attention --dp-size N "
                "(leave dp-size unset; the launch command spells it for the scenario's SGLang version)")
    if owner is not None:
        return (f"{spelling} is set through `{field_key(owner)}` here; the launch command spells it for the "
                "scenario's SGLang version")
    return is_sglang_flag(spelling)


def _with_trace_records(scenario: Scenario, base: Path) -> Scenario:
    """Read `bench.trace.file` (relative to the scenario's folder) into the trace's records."""
    trace = scenario.bench.trace
    if trace is None or trace.records or trace.file is None:
        return scenario
    records = read_trace(base / trace.file)
    bench = msgspec.structs.replace(scenario.bench, trace=msgspec.structs.replace(trace, records=records))
    return msgspec.structs.replace(scenario, bench=bench)


def require_inline_trace(scenario: Scenario, source: str = "<request>") -> Scenario:
    """The scenario itself, when its trace (if any) carries its records.

    Raises:
        InputFileError: The trace names only a file, which a scenario sent as text or data cannot be read against.
    """
    trace = scenario.bench.trace
    if trace is not None and not trace.records:
        raise InputFileError(f"bench.trace.file `{trace.file}` cannot be read here", file=source, line=None,
                             field="bench.trace.file", hint=INLINE_TRACE_HINT)
    return scenario


def scenario_model(scenario: Scenario, base: Path | None = None) -> ModelSpec:
    """The scenario's model: a shipped Hugging Face id or a folder with config.json (relative to `base`)."""
    return resolve_model(scenario.model, base=base)


# The last trace whose sharing rate was read, and the rate (techniques ask for it again and again in one job).
_TRACE_SHARING: dict[str, tuple[object, tuple[int, int], float]] = {}


def scenario_sharing(scenario: Scenario) -> float:
    """The prefix sharing rate the techniques read for a scenario: the workload's stated
    `prefix_sharing_rate`; else nothing for bench_serving's random dataset; else, for a bench replaying a trace, the rate its measured records share (the
    casebook's sorted-adjacent rate over their block ids, as `sglang-tuner profile --trace` measures it);
    else what the workload's prefix structure shares over the bench's prompts."""
    workload, bench, trace = scenario.workload, scenario.bench, scenario.bench.trace
    if workload.prefix_sharing_rate is None and bench.dataset == "random":
        return 0.0  # bench_serving's random dataset: every prompt its own tokens
    if workload.prefix_sharing_rate is not None or bench.dataset != "trace" or trace is None or not trace.records:
        return workload.sharing_rate(bench.num_prompts)
    key = (bench.warm_prompts, bench.num_prompts)
    hit = _TRACE_SHARING.get("last")
    if hit is not None and hit[0] is trace and hit[1] == key:
        return hit[2]
    measured = trace.parts(*key)[1]
    rate = trace_sharing(measured, trace.block_tokens)
    _TRACE_SHARING["last"] = (trace, key, rate)
    return rate
