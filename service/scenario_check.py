"""The one check of a whole scenario, run at every door before any round and on every candidate deployment.

`check_scenario` gathers, as `ValidationIssue`s (field, message, fix):

- names and paths: the model is a shipped model or a folder with a config.json, spelled without shell
  syntax or `..`; the GPU is in the catalogue (both name the nearest known one); group names, hosts and
  model paths are plain words, since they end up in argv items and log file names;
- value ranges (`service.scenario_ranges`): counts, rates, fractions and sizes;
- SGLang (`service.sglang.validate_scenario`): every flag for the scenario's version (unknown, removed with
  its replacement, abbreviated, dangerous, wrong type), and the topology against the hardware.

The CLI (`tune`, `round`, `validate`), `POST /v1/jobs`, schedules and the MCP tools refuse a scenario with
any error; `check_candidate` is the same check for a deployment a technique proposes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from pathlib import Path

import msgspec

from service.domain import ModelSpec, Scenario, resolve_model
from service.domain.hardware import GPU_ALIASES, GPU_CATALOGUE
from service.domain.model import known_model_ids, plain_model_id, shipped_models, variant_base
from service.scenario_capacity import check_capacity
from service.scenario_ranges import check_ranges
from service.settings import load_runner_settings
from service.sglang.safety import looks_like_flag, unsafe_character
from service.sglang.topology import group_field
from service.sglang.validate import validate_scenario
from service.sglang.values import ValidationIssue, errors
from service.simulator.memory import server_starts

__all__ = ["ScenarioRefused", "check_candidate", "check_scenario", "refusal_line", "require_valid_scenario"]

# Group names become process and log file names (`<group>-<replica>.log`).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:]+")


class ScenarioRefused(ValueError):
    """A scenario with at least one error; `issues` holds every problem found (errors first)."""

    def __init__(self, issues: list[ValidationIssue]) -> None:
        self.issues = sorted(issues, key=lambda issue: issue.severity != "error")
        super().__init__(refusal_line(self.issues))

    @property
    def first(self) -> ValidationIssue:
        """The first error: the field a one-line refusal names."""
        return errors(self.issues)[0]


def check_scenario(scenario: Scenario, *, sglang_version: str | None = None,
                   allow: Collection[str] | None = None) -> list[ValidationIssue]:
    """Every problem of `scenario` (errors and warnings), names and ranges first, then SGLang's flags.

    Args:
        scenario: The scenario to check.
        sglang_version: Check the flags for this version instead of the scenario's own.
        allow: Dangerous flags (or "--flag=value" pairs) enabled; None reads the operator's runner
            settings (`allow_flags`), which are what the runners launch with.
    """
    issues = check_names(scenario) + check_ranges(scenario) + check_server_width(scenario)
    if not errors(issues):
        issues += (check_head_split(scenario) + check_expert_split(scenario) + check_self_draft(scenario)
                   + check_stored_quantization(scenario) + check_capacity(scenario))
    return issues + validate_scenario(_countable(scenario), sglang_version=sglang_version, allow=_allowed(allow))


def _countable(scenario: Scenario) -> Scenario:
    """The scenario with at least one node of one GPU, so the placement checks can count (the range check has
    already named a zero or negative size); every flag is still checked."""
    hardware = scenario.hardware
    if hardware.gpus_per_node >= 1 and hardware.nodes >= 1:
        return scenario
    counted = msgspec.structs.replace(hardware, gpus_per_node=max(1, hardware.gpus_per_node),
                                      nodes=max(1, hardware.nodes), node_hosts=[])
    return msgspec.structs.replace(scenario, hardware=counted)


def check_candidate(candidate: Scenario, *, allow: Collection[str] | None = None) -> list[ValidationIssue]:
    """The errors that keep a proposed candidate deployment from launching (warnings left out).

    The same check as at the doors, for the scenario a technique's delta produced; an empty list means the
    candidate may be measured.
    """
    return errors(check_scenario(candidate, allow=allow))


def require_valid_scenario(scenario: Scenario, *, sglang_version: str | None = None,
                           allow: Collection[str] | None = None) -> list[ValidationIssue]:
    """The scenario's warnings when it has no error.

    Raises:
        ScenarioRefused: at least one error; its message is the one-line refusal.
    """
    issues = check_scenario(scenario, sglang_version=sglang_version, allow=allow)
    if errors(issues):
        raise ScenarioRefused(issues)
    return issues


def refusal_line(issues: Collection[ValidationIssue], *, prefix: str = "") -> str:
    """One line: the first error's field, what is wrong and the fix, then how many more there are."""
    blocking = errors(issues)
    if not blocking:
        return ""
    first, others = blocking[0], blocking[1:]
    line = f"{prefix}{first.field}: {first.message}" + (f"; fix: {first.hint}" if first.hint else "")
    if not others:
        return line
    fields = ", ".join(f"{prefix}{issue.field}" for issue in others[:3]) + (", ..." if len(others) > 3 else "")
    return f"{line} (and {len(others)} more problem{'s' if len(others) > 1 else ''}: {fields})"


def _allowed(allow: Collection[str] | None) -> Collection[str]:
    if allow is not None:
        return allow
    try:
        return load_runner_settings().allow_flags
    except (OSError, ValueError, msgspec.MsgspecError):
        # Unreadable settings allow nothing; the runner reports the settings error itself when it starts.
        return ()


def check_names(scenario: Scenario) -> list[ValidationIssue]:
    """The model and GPU are known; names, hosts and paths carry no shell syntax and no `..`."""
    issues = check_model(scenario.model) + check_gpu(scenario.hardware.gpu)
    for index, group in enumerate(scenario.deployment.groups):
        if not _PLAIN_NAME.fullmatch(group.name) or ".." in group.name:
            issues.append(ValidationIssue(field=group_field(index, "name"),
                                          message=f"group name {group.name!r} is not a plain name",
                                          hint="use letters, digits, '-', '_' or '.' (it names processes and log "
                                               "files), e.g. \"worker\""))
        for name, value in (("server.model-path", group.server.model_path),
                            ("server.speculative-draft-model-path", group.server.speculative_draft_model_path)):
            if value and _climbs(value):
                issues.append(_climbing(group_field(index, name), value))
        draft = group.server.speculative_draft_model_path
        if draft and not _climbs(draft):
            issues += check_draft(group_field(index, "server.speculative-draft-model-path"), draft)
    draft = scenario.workload.speculative.draft_model
    if draft:
        issues += [_climbing("workload.speculative.draft_model", draft)] if _climbs(draft) else \
            check_draft("workload.speculative.draft_model", draft)
    issues += _hosts(scenario)
    return issues


def check_draft(field: str, draft: str) -> list[ValidationIssue]:
    """A draft model spelled as a folder path must be a folder holding a config.json, as the model must; a
    Hugging Face id (org/name) cannot be checked offline and passes."""
    bad = unsafe_character(draft)
    if bad is not None:
        return [ValidationIssue(field=field, message=f"{draft!r} contains {bad}",
                                hint="a draft model is a Hugging Face id (org/name) or a folder path")]
    if looks_like_flag(draft):
        return [ValidationIssue(field=field, message=f"draft model {draft!r} starts with '-' and would be read as a flag",
                                hint="give the Hugging Face id or the folder path itself")]
    if not draft.startswith(("/", "./", "~")) or (Path(draft).expanduser() / "config.json").is_file():
        return []
    return [ValidationIssue(field=field, message=f"draft model folder {draft!r} holds no config.json",
                            hint="point it at the folder of an EAGLE3 draft trained for this model, or give its "
                                 "Hugging Face id; without one, leave speculative decoding off")]


def check_model(model: str) -> list[ValidationIssue]:
    """A shipped Hugging Face id, or a folder holding a config.json, spelled as a plain path."""
    if not model:
        return [ValidationIssue(field="model", message="the scenario names no model",
                                hint=f"set model to a shipped model id such as {next(iter(shipped_models()), '')!r}")]
    bad = unsafe_character(model)
    if bad is not None:
        return [ValidationIssue(field="model", message=f"{model!r} contains {bad}",
                                hint="a model is a Hugging Face id (org/name) or a folder path; remove the character")]
    if looks_like_flag(model):
        return [ValidationIssue(field="model", message=f"model {model!r} starts with '-' and would be read as a flag",
                                hint="give the Hugging Face id or the folder path itself")]
    if _climbs(model):
        return [_climbing("model", model)]
    try:
        resolve_model(model)
    except KeyError:
        known = known_model_ids()
        # Matched without its release words, so an "-Instruct" does not pull the nearest id to another
        # model's instruct release.
        near = difflib.get_close_matches(plain_model_id(model), known, n=1, cutoff=0.5)
        hint = f"did you mean {near[0]!r}?" if near else f"use one of {', '.join(known)}"
        if base := variant_base(model):
            window = resolve_model(base).max_context
            hint = (f"{model!r} looks like {base!r} under another name, or a post-trained release of it: where it "
                    f"keeps that model's architecture and its context window of {window:,} tokens, name {base!r}.")
        return [ValidationIssue(field="model", message=f"unknown model {model!r}: not a shipped model, a model "
                                                       "whose config.json aiconfigurator-core bundles, nor a "
                                                       "folder with a config.json",
                                hint=f"{hint} Or point model at a folder holding the model's config.json")]
    except (OSError, ValueError) as exc:
        return [ValidationIssue(field="model", message=f"model folder {model!r} cannot be read: {exc}",
                                hint="the folder needs a readable config.json (and optionally model.toml)")]
    return []


def check_gpu(gpu: str) -> list[ValidationIssue]:
    """A GPU of the catalogue, by name or alias; otherwise the nearest known one."""
    if gpu in GPU_CATALOGUE or gpu.lower() in GPU_ALIASES:
        return []
    names = list(GPU_CATALOGUE)
    near = difflib.get_close_matches(gpu.upper(), names, n=1, cutoff=0.4)
    known = f"use one of {', '.join(names)} (the catalogue's GPUs)"
    hint = f"did you mean {near[0]!r}? Otherwise {known}" if near else known
    return [ValidationIssue(field="hardware.gpu", message=f"unknown GPU {gpu!r}", hint=hint)]


def check_server_width(scenario: Scenario) -> list[ValidationIssue]:
    """A single server wider than the whole cluster, named by the parallel size that makes it so."""
    hardware = scenario.hardware
    total = hardware.total_gpus
    issues = []
    for index, group in enumerate(scenario.deployment.groups):
        server = group.server
        if total < 1 or server.world_size <= total:
            continue
        # DP attention lives inside TP, so only plain DP widens the server (ServerConfig.world_size).
        sizes = {"tp-size": server.tp_size, "pp-size": server.pp_size,
                 "dp-size": server.world_size // (server.tp_size * server.pp_size)}
        widest = max(sizes, key=lambda name: sizes[name])
        others = server.world_size // sizes[widest]
        issues.append(ValidationIssue(
            field=group_field(index, f"server.{widest}"), flag=f"--{widest}",
            message=f"one server spans {server.world_size} GPUs (tp {sizes['tp-size']} x pp {sizes['pp-size']} x dp "
                    f"{sizes['dp-size']}); the hardware has {hardware.nodes} node(s) x {hardware.gpus_per_node} GPUs",
            hint=f"use {widest} {max(1, total // others)} or less, or raise hardware.nodes"))
    return issues


def check_head_split(scenario: Scenario) -> list[ValidationIssue]:
    """A TP size the model's attention heads do not split over, which SGLang asserts when it loads the model.

    `QKVParallelLinear` (`layers/linear.py`) divides the attention heads over the attention TP ranks (TP
    over DP attention) with `divide`, which asserts an even split, and the KV heads either the same way or,
    when there are fewer of them than ranks, by replicating each over a whole number of ranks: a tp-size of
    3 for 64 heads and 8 KV heads fails at load, every time.
    """
    try:
        model = resolve_model(scenario.model)
    except (KeyError, OSError, ValueError):
        return []  # check_model has named it
    issues = []
    for index, group in enumerate(scenario.deployment.groups):
        server = group.server
        attention_tp = max(server.tp_size // max(server.attention_dp_size, 1), 1)
        why = _head_split(model, attention_tp)
        if why is None:
            continue
        room = scenario.hardware.total_gpus // max(group.replicas * max(server.pp_size, 1), 1)
        split = [tp for tp in range(1, room + 1)
                 if _head_split(model, max(tp // max(server.attention_dp_size, 1), 1)) is None
                 and tp % max(server.attention_dp_size, 1) == 0]
        # Only sizes whose weights also fit: Llama-3.1-70B at tp-size 6 on H100s splits at 1, 2 or 4, starts at 4.
        fits = [tp for tp in split
                if server_starts(model, scenario.hardware, msgspec.structs.replace(server, tp_size=tp))]
        choices = ", ".join(str(tp) for tp in fits[:-1]) + (f" or {fits[-1]}" if len(fits) > 1 else str(fits[-1])) \
            if fits else ""
        if choices:
            hint = f"use tp-size {choices}"
        elif split:
            hint = (f"no tp-size up to {room} both splits the heads and holds the weights: use more or larger GPUs, "
                    "or a smaller model")
        else:
            hint = "use a tp-size that divides the attention heads"
        issues.append(ValidationIssue(
            field=group_field(index, "server.tp-size"), flag="--tp-size",
            message=f"the server cannot load {model.name} at tp-size {server.tp_size}: {why}, and SGLang asserts "
                    "an even split when it builds the attention layers", hint=hint))
    return issues


def check_expert_split(scenario: Scenario) -> list[ValidationIssue]:
    """An EP size the model's experts do not split over, which SGLang asserts when it builds the MoE layers.

    `FusedMoE` (`layers/moe/fused_moe_triton/layer.py`) asserts that the physical experts (routed plus
    `--ep-num-redundant-experts`) divide evenly over the EP ranks, and DeepEP's dispatcher asserts the same
    (`token_dispatcher/deepep.py`): ep-size 24 for DeepSeek-V3's 256 experts fails at load, every time.
    """
    try:
        model = resolve_model(scenario.model)
    except (KeyError, OSError, ValueError):
        return []  # check_model has named it
    if not model.is_moe or not model.num_experts:
        return []
    issues = []
    for index, group in enumerate(scenario.deployment.groups):
        server = group.server
        physical = model.num_experts + (server.ep_num_redundant_experts or 0)
        if server.ep_size <= 1 or physical % server.ep_size == 0:
            continue
        sizes = [ep for ep in range(2, server.tp_size + 1) if server.tp_size % ep == 0 and physical % ep == 0]
        redundant = (server.ep_num_redundant_experts or 0) + server.ep_size - physical % server.ep_size
        hint = (f"use ep-size {', '.join(str(ep) for ep in sizes)} (dividing both tp-size {server.tp_size} and the "
                f"{physical} experts), or " if sizes else "") + \
            f"set ep-num-redundant-experts to {redundant} (or more, in steps of {server.ep_size})"
        issues.append(ValidationIssue(
            field=group_field(index, "server.ep-size"), flag="--ep-size",
            message=f"the server cannot load {model.name} at ep-size {server.ep_size}: its {physical} experts "
                    f"({model.num_experts} routed + {server.ep_num_redundant_experts or 0} redundant) do not divide "
                    f"over {server.ep_size} EP ranks, and SGLang asserts an even split when it builds the MoE layers",
            hint=hint))
    return issues


def check_self_draft(scenario: Scenario) -> list[ValidationIssue]:
    """NEXTN on a model whose checkpoint carries no MTP layer and with no draft named: SGLang drafts with the
    target's own multi-token-prediction layer there, and with none to load the server fails at start."""
    try:
        model = resolve_model(scenario.model)
    except (KeyError, OSError, ValueError):
        return []
    issues = []
    for index, group in enumerate(scenario.deployment.groups):
        server = group.server
        # A draft path naming the model itself is the model's own MTP layer again (what SGLang sets by itself).
        draft = server.speculative_draft_model_path
        if (server.speculative_algorithm or "").upper() != "NEXTN" or model.mtp_layers \
                or (draft and draft not in (scenario.model, server.model_path)):
            continue
        eagle3 = model.eagle3_draft
        issues.append(ValidationIssue(
            field=group_field(index, "server.speculative-algorithm"), flag="--speculative-algorithm",
            message=f"NEXTN drafts with the model's own MTP layer, and {model.name}'s config.json declares none "
                    "(num_nextn_predict_layers, mtp_num_hidden_layers): the server would fail at start",
            hint=(f"use speculative-algorithm EAGLE3 with speculative-draft-model-path {eagle3}" if eagle3 else
                  "use EAGLE3 with a draft trained for this model (speculative-draft-model-path), or no "
                  "speculative decoding")))
    return issues


# `--quantization` methods that load weights stored in them (SGLang 0.5.23). Those with a config file to read
# stop at start when a 16-bit checkpoint has none ("Cannot find the config file for awq",
# `model_loader/weight_utils.py` get_quant_config); compressed-tensors builds its config with no arguments
# there and fails; gguf reads a GGUF file; w4afp8, w8a8_int8 and auto-round-int8 build layers for int8 or
# int4 weights with their scales, which a 16-bit checkpoint does not have. fp8, mxfp8, w8a8_fp8,
# modelopt_fp4 and nvfp4_online quantize a 16-bit checkpoint at load instead.
STORED_ONLY_METHODS = frozenset({"awq", "awq_marlin", "gptq", "gptq_marlin", "moe_wna16", "auto-round",
                                 "modelopt", "modelopt_fp8", "modelopt_mixed", "petit_nvfp4", "modelslim",
                                 "compressed-tensors", "gguf", "w4afp8", "w8a8_int8", "auto-round-int8"})
# The quantization config files SGLang's loader reads beside config.json (`get_config_filenames()`).
QUANT_CONFIG_FILES = ("quant_config.json", "quantize_config.json", "quantization_config.json",
                      "hf_quant_config.json", "quant_model_description.json")


def check_stored_quantization(scenario: Scenario) -> list[ValidationIssue]:
    """A quantization method that needs a checkpoint stored in it, on a model whose checkpoint is not."""
    try:
        model = resolve_model(scenario.model)
    except (KeyError, OSError, ValueError):
        return []
    folder = Path(scenario.model)
    if model.prequantized or (folder.is_dir() and any((folder / name).is_file() for name in QUANT_CONFIG_FILES)):
        return []  # stored quantized: config.json names it, or a config file beside it does
    issues = []
    for index, group in enumerate(scenario.deployment.groups):
        method = group.server.quantization
        if method not in STORED_ONLY_METHODS:
            continue
        issues.append(ValidationIssue(
            field=group_field(index, "server.quantization"), flag="--quantization",
            message=f"--quantization {method} loads weights stored in {method}, and {model.name}'s config.json "
                    "has no quantization_config: SGLang finds no quantization config file and the server fails "
                    "at start",
            hint=f"point model at a checkpoint stored in {method} (its config.json names it), or use "
                 'quantization = "fp8", which SGLang applies to 16-bit weights at load'))
    return issues


def _head_split(model: ModelSpec, tp: int) -> str | None:
    """Why the attention heads do not split over `tp` attention TP ranks (None when they do)."""
    heads, kv = model.num_attention_heads, model.num_kv_heads
    if heads % tp:
        return f"its {heads} attention heads do not divide over {tp} attention TP ranks"
    if kv and (tp % kv if tp >= kv else kv % tp):
        return f"its {kv} KV heads neither divide over {tp} attention TP ranks nor replicate evenly across them"
    return None


def _climbs(path: str) -> bool:
    return ".." in Path(path).parts or ".." in path.split("/")


def _climbing(field: str, value: str) -> ValidationIssue:
    return ValidationIssue(field=field, message=f"path {value!r} climbs out of its folder with '..'",
                           hint="give the folder as an absolute path, or as a Hugging Face id")


def _hosts(scenario: Scenario) -> list[ValidationIssue]:
    """Hosts become argv items (`--dist-init-addr HOST:PORT`, the router's `--host`)."""
    named = [(f"hardware.node_hosts[{i}]", host) for i, host in enumerate(scenario.hardware.node_hosts)]
    if scenario.deployment.router is not None:
        named.append(("deployment.router.host", scenario.deployment.router.host))
    return [ValidationIssue(field=field, message=f"{host!r} is not a host name or IP address",
                            hint="give a plain host name such as node01, or an IP address")
            for field, host in named if not _HOST.fullmatch(host)]
