"""Flags that moved between SGLang versions, and what to write instead.

Curated from the argparse dumps of five released wheels (SGLang 0.5.2, 0.5.9, 0.5.15, 0.5.20, 0.5.23;
see docs/flags.md for the table). Each entry says from which version the old spelling is refused: a flag
is refused where it no longer exists, or where it is deprecated and a working replacement exists in that
same version. Flags the table does not name fall back to the replacement SGLang's own help text names.
"""

from __future__ import annotations

import msgspec

from service.sglang.flags import FlagCatalogue, load_catalogue, version_key, versions_with


class Replacement(msgspec.Struct, frozen=True, kw_only=True):
    """What to write instead of `flag`, from version `refused_from` on.

    Attributes:
        flag: The old spelling.
        use: What to write instead, as a user would type it.
        refused_from: First version where `flag` is an error (removed, or deprecated with `requires` present).
        requires: Flags the replacement needs; each exists in every version from `refused_from`.
    """

    flag: str
    use: str
    refused_from: str
    requires: tuple[str, ...] = ()


class Backport(msgspec.Struct, frozen=True, kw_only=True):
    """How to spell a newer flag on a version from before it existed."""

    flag: str
    use: str
    available_from: str


REPLACEMENTS: dict[str, Replacement] = {r.flag: r for r in (
    # MoE: the boolean switches became --ep-size plus backend choices (0.5.9). `--enable-ep-moe` only set
    # ep_size = tp_size (0.5.2 server_args.py __post_init__); it never chose an all-to-all backend.
    Replacement(flag="--enable-ep-moe", use="--ep-size equal to --tp-size (an all-to-all also needs "
                "--moe-a2a-backend)", refused_from="0.5.9", requires=("--ep-size",)),
    Replacement(flag="--enable-deepep-moe", use="--moe-a2a-backend deepep", refused_from="0.5.9",
                requires=("--moe-a2a-backend",)),
    Replacement(flag="--enable-flashinfer-cutlass-moe", use="--moe-runner-backend flashinfer_cutlass",
                refused_from="0.5.9", requires=("--moe-runner-backend",)),
    Replacement(flag="--enable-flashinfer-trtllm-moe", use="--moe-runner-backend flashinfer_trtllm",
                refused_from="0.5.9", requires=("--moe-runner-backend",)),
    Replacement(flag="--enable-flashinfer-mxfp4-moe", use="--moe-runner-backend flashinfer_mxfp4",
                refused_from="0.5.9", requires=("--moe-runner-backend",)),
    Replacement(flag="--enable-triton-kernel-moe", use="--moe-runner-backend triton_kernel",
                refused_from="0.5.9", requires=("--moe-runner-backend",)),
    # CUDA graphs split into decode and prefill settings (0.5.15: deprecated aliases; 0.5.20: gone).
    Replacement(flag="--cuda-graph-max-bs", use="--cuda-graph-max-bs-decode", refused_from="0.5.15",
                requires=("--cuda-graph-max-bs-decode",)),
    Replacement(flag="--cuda-graph-bs", use="--cuda-graph-bs-decode", refused_from="0.5.15",
                requires=("--cuda-graph-bs-decode",)),
    Replacement(flag="--disable-cuda-graph",
                use="--cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled",
                refused_from="0.5.15", requires=("--cuda-graph-backend-decode", "--cuda-graph-backend-prefill")),
    # DP attention became its own size (0.5.23, arg_groups/parallel_hook.py rewrites the old pair).
    Replacement(flag="--enable-dp-attention", use="--attn-dp-size N instead of --enable-dp-attention --dp-size N",
                refused_from="0.5.23", requires=("--attn-dp-size",)),
    Replacement(flag="--stream-output", use="--incremental-streaming-output", refused_from="0.5.15",
                requires=("--incremental-streaming-output",)),
    Replacement(flag="--collect-tokens-histogram",
                use="nothing: token histograms are collected automatically with --enable-metrics",
                refused_from="0.5.15", requires=("--enable-metrics",)),
    # PD: each role's server now takes its own parallel sizes (0.5.15).
    Replacement(flag="--disaggregation-decode-tp", use="--tp-size on the decode group's own servers",
                refused_from="0.5.15", requires=("--tp-size",)),
    Replacement(flag="--disaggregation-decode-dp", use="--dp-size on the decode group's own servers",
                refused_from="0.5.15", requires=("--dp-size",)),
    Replacement(flag="--disaggregation-prefill-pp", use="--pp-size on the prefill group's own servers",
                refused_from="0.5.15", requires=("--pp-size",)),
    Replacement(flag="--hybrid-kvcache-ratio", use="--swa-full-tokens-ratio", refused_from="0.5.9",
                requires=("--swa-full-tokens-ratio",)),
)}

BACKPORTS: dict[str, Backport] = {b.flag: b for b in (
    Backport(flag="--attn-dp-size", use="--enable-dp-attention --dp-size N", available_from="0.5.23"),
    Backport(flag="--attention-data-parallel-size", use="--enable-dp-attention --dp-size N", available_from="0.5.23"),
    Backport(flag="--cuda-graph-max-bs-decode", use="--cuda-graph-max-bs", available_from="0.5.15"),
    Backport(flag="--cuda-graph-bs-decode", use="--cuda-graph-bs", available_from="0.5.15"),
    Backport(flag="--incremental-streaming-output", use="--stream-output", available_from="0.5.15"),
    Backport(flag="--enable-hicache", use="--enable-hierarchical-cache", available_from="0.5.23"),
)}


class FlagStatus(msgspec.Struct, frozen=True, kw_only=True):
    """Whether an old spelling is refused in a version, and the message and fix that say so."""

    refused: bool
    message: str
    hint: str


def replacement_status(flag: str, catalogue: FlagCatalogue) -> FlagStatus | None:
    """Status of a removed, deprecated or too-new spelling in `catalogue`'s version; None when it is current.

    Refused: flags absent from the version, flags SGLang retired (they exit or do nothing), and
    deprecated flags whose replacement works in the same version. Other deprecated flags only warn.
    """
    version = catalogue.version
    spec = catalogue.get(flag)
    curated = REPLACEMENTS.get(flag)
    if spec is None:
        return _absent_status(flag, version, curated)
    if curated is not None and version_key(version) >= version_key(curated.refused_from):
        return FlagStatus(refused=True, message=f"{flag} is deprecated in sglang {version}",
                          hint=f"use {curated.use}")
    if spec.action == "retired":
        fix = f"use {curated.use}" if curated else (f"use {spec.replacement}" if spec.replacement else "drop it")
        return FlagStatus(refused=True, message=f"{flag} is retired in sglang {version}: {spec.help}", hint=fix)
    if not spec.deprecated:
        return None
    if spec.replacement and spec.replacement in catalogue:
        return FlagStatus(refused=True, message=f"{flag} is deprecated in sglang {version}",
                          hint=f"use {spec.replacement} ({spec.help})")
    fix = f"prefer {curated.use}" if curated else "drop it when you can"
    return FlagStatus(refused=False, message=f"{flag} is deprecated in sglang {version}", hint=fix)


def _absent_status(flag: str, version: str, curated: Replacement | None) -> FlagStatus | None:
    present = versions_with(flag)
    if not present:
        return None
    last, first = present[-1], present[0]
    if version_key(last) < version_key(version):
        fix = f"use {curated.use}" if curated else _named_replacement(flag, last)
        return FlagStatus(refused=True, message=f"{flag} was removed after {last}", hint=fix)
    backport = BACKPORTS.get(flag)
    fix = f"use {backport.use}" if backport else f"target sglang {first} or later"
    return FlagStatus(refused=True, message=f"{flag} does not exist before sglang {first}", hint=fix)


def _named_replacement(flag: str, last_version: str) -> str:
    spec = load_catalogue(last_version).get(flag)
    if spec is not None and spec.replacement:
        return f"use {spec.replacement}"
    return "drop it; it has no replacement"
