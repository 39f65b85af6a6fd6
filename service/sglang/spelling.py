"""Spell the typed, version-independent `ServerConfig` fields as the flags of one SGLang version.

Most fields are SGLang's own names (`chunked_prefill_size` -> `--chunked-prefill-size`). The exceptions
follow the version matrix in docs/flags.md: attention DP (`--enable-dp-attention --dp-size N` up to 0.5.20,
`--attn-dp-size N` from 0.5.23) and the decode CUDA-graph batch cap (`--cuda-graph-max-bs` up to 0.5.9,
`--cuda-graph-max-bs-decode` from 0.5.15). The choice follows the catalogue, not a version comparison, so
a regenerated catalogue needs no code change.
"""

from __future__ import annotations

import msgspec

from service.domain import FlagValue, ServerConfig
from service.sglang.flags import FlagCatalogue

# Flags the renderer derives from the deployment itself; `extra` may not set them.
RENDERER_FLAGS: dict[str, str] = {
    "model_path": "server.model-path, or the scenario's model",
    "host": "the hardware's node hosts",
    "port": "the group's base_port",
    "nnodes": "the replica's width over the hardware's GPUs per node",
    "node_rank": "the worker's placement",
    "dist_init_addr": "the replica's first node",
    "disaggregation_mode": "the group's role",
    "disaggregation_bootstrap_port": "the group's bootstrap_port",
}

# Typed fields not spelled by name: handled by `_spell_field` or by the renderer.
_SPECIAL_FIELDS = frozenset({"model_path", "extra", "attention_dp_size", "cuda_graph_max_bs"})

# argparse dests that a typed field owns under another name (so `extra` cannot set them twice).
_DEST_OWNERS: dict[str, str] = {
    "attn_dp_size": "attention_dp_size",
    "enable_dp_attention": "attention_dp_size",
    "cuda_graph_max_bs_decode": "cuda_graph_max_bs",
}


class TypedFlag(msgspec.Struct, frozen=True, kw_only=True):
    """One typed field rendered as one flag: where it came from, its spelling, its value."""

    field: str
    flag: str
    value: FlagValue


def field_key(name: str) -> str:
    """The spelling of a `ServerConfig` field in scenario files (`chunked-prefill-size`)."""
    return name.replace("_", "-")


def typed_field_names() -> tuple[str, ...]:
    """Every typed `ServerConfig` field except `extra`."""
    return tuple(name for name in ServerConfig.__struct_fields__ if name != "extra")


def owning_field(dest: str) -> str | None:
    """The typed field that owns an argparse dest, if any (`extra` must not set those)."""
    if dest in _DEST_OWNERS:
        return _DEST_OWNERS[dest]
    if dest in RENDERER_FLAGS:
        return None
    return dest if dest in ServerConfig.__struct_fields__ and dest != "extra" else None


def typed_flags(server: ServerConfig, catalogue: FlagCatalogue) -> list[TypedFlag]:
    """The typed fields that differ from SGLang's defaults, spelled for `catalogue`'s version, in field order.

    A field whose value is None or False is left out (SGLang picks its own default); so is a value equal
    to the flag's default in that version. A field whose flag the version lacks is still returned under
    its own name, so validation can name it.
    """
    rendered: list[TypedFlag] = []
    for name in typed_field_names():
        value = getattr(server, name)
        if name in ("attention_dp_size", "cuda_graph_max_bs"):
            rendered += _spell_special(name, value, catalogue)
            continue
        if name in _SPECIAL_FIELDS or value is None or value is False:
            continue
        flag = f"--{field_key(name)}"
        spec = catalogue.get(flag)
        if spec is not None and not isinstance(value, bool) and value == spec.default:
            continue
        rendered.append(TypedFlag(field=field_key(name), flag=flag, value=value))
    return rendered + _balancedness_report(server, catalogue)


def _balancedness_report(server: ServerConfig, catalogue: FlagCatalogue) -> list[TypedFlag]:
    """Under EP with metrics on, the flag that exports `sglang:eplb_balancedness` (the expert load balance
    EPLB decisions read): `--expert-balancedness-report-mode prometheus` from 0.5.20, before that
    `--enable-expert-distribution-metrics`; both start the recorder in its `stat` mode."""
    chosen = {"expert_balancedness_report_mode", "enable_expert_distribution_metrics",
              "expert_distribution_recorder_mode"} & {key.lstrip("-").replace("-", "_") for key in server.extra}
    if not server.enable_metrics or server.ep_size <= 1 or chosen:
        return []
    if "--expert-balancedness-report-mode" in catalogue:
        return [TypedFlag(field="enable-metrics", flag="--expert-balancedness-report-mode", value="prometheus")]
    if "--enable-expert-distribution-metrics" in catalogue:
        return [TypedFlag(field="enable-metrics", flag="--enable-expert-distribution-metrics", value=True)]
    return []


def _spell_special(name: str, value: int | None, catalogue: FlagCatalogue) -> list[TypedFlag]:
    key = field_key(name)
    if name == "attention_dp_size":
        if value is None or value <= 1:
            return []
        if "--attn-dp-size" in catalogue:
            return [TypedFlag(field=key, flag="--attn-dp-size", value=value)]
        # Up to 0.5.20 DP attention is the DP size inside one TP group (srt/server_args.py).
        return [TypedFlag(field=key, flag="--enable-dp-attention", value=True),
                TypedFlag(field=key, flag="--dp-size", value=value)]
    if value is None:
        return []
    flag = "--cuda-graph-max-bs-decode" if "--cuda-graph-max-bs-decode" in catalogue else "--cuda-graph-max-bs"
    return [TypedFlag(field=key, flag=flag, value=value)]
