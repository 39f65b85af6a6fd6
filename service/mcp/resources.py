"""Read-only resources: playbooks, technique descriptions with their casebook rules, flag catalogues."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import msgspec

from service.diagnosis import casebook as cb
from service.sglang import catalogue_versions, load_catalogue

SCHEME = "sglang-tuner://"


@dataclass(frozen=True)
class ResourceEntry:
    """One readable resource."""

    uri: str
    name: str
    description: str
    mime_type: str


# The casebook's tuning order ("Let's follow the order of effect size") and the rules each technique answers.
TECHNIQUES: dict[str, tuple[int, str, list[cb.Rule]]] = {
    cb.MODEL_SELECTION: (1, "Minimum model suitable for task difficulty; up to several times.", [cb.DEADLINE]),
    cb.PARALLELISM: (2, "TP size and replica count splitting; 2-3x.", [cb.COMPUTE_BOUND, cb.PEAK]),
    cb.MOE_PARALLELISM: (2, "EP, DP attention and EPLB for MoE models.", [cb.COMPUTE_BOUND]),
    cb.CHUNKED_PREFILL: (3, "Stabilises P99 TTFT.", [cb.TTFT_RATIO, cb.ITL_STALL, cb.TTFT_SLO]),
    cb.ROUTER_POLICY: (4, "Cache-aware routing; depends on sharing rate.", [cb.CACHE_EVICTIONS]),
    cb.HICACHE: (4, "Hierarchical cache when transfer beats recompute.", [cb.CACHE_EVICTIONS]),
    cb.PROMPT_STRUCTURE: (4, "Fixed parts first, variable parts last.", [cb.CACHE_BELOW_SHARING]),
    cb.QUANTIZATION: (5, "FP8 weights + FP8 KV; 1.3-1.5x.", [cb.KV_SHORTAGE, cb.ITL_SLO]),
    cb.BATCH_PARAMETERS: (6, "Select the point on the SLO curve; 10-30%.", [cb.SCHEDULING, cb.RETRACTIONS]),
    cb.SPECULATIVE_DECODING: (7, "Only for low concurrency; 1.5-2x.", [cb.SPEC_ACCEPT]),
    cb.GRAMMAR: (7, "Constrained decoding, cache warming.", [cb.FAILURE_RATE]),
    cb.PD_DISAGGREGATION: (8, "Only for tens of GPUs or more; up to 5x.", [cb.COMPUTE_BOUND]),
}


def playbook_names() -> list[str]:
    """Playbook files shipped in the `playbooks` data package."""
    return sorted(p.name.removesuffix(".toml") for p in resources.files("playbooks").iterdir()
                  if p.name.endswith(".toml"))


def resource_entries() -> list[ResourceEntry]:
    """Every resource, playbooks first."""
    entries = [ResourceEntry(f"{SCHEME}playbooks/{name}", f"playbook {name}", f"The {name} playbook (TOML).",
                             "application/toml") for name in playbook_names()]
    entries.append(ResourceEntry(f"{SCHEME}techniques", "techniques",
                                 "Techniques in the casebook's tuning order, with the rules they answer and sources.",
                                 "application/json"))
    entries += [ResourceEntry(f"{SCHEME}flags/{version}", f"SGLang {version} flags",
                              f"Every sglang.launch_server flag of SGLang {version}: type, default, choices.",
                              "application/json") for version in catalogue_versions()]
    return entries


def read_resource(uri: str) -> str:
    """The text of a resource.

    Raises:
        KeyError: the URI names no resource; the message lists what exists.
    """
    path = uri.removeprefix(SCHEME)
    if path.startswith("playbooks/") and path.removeprefix("playbooks/") in playbook_names():
        return resources.files("playbooks").joinpath(f"{path.removeprefix('playbooks/')}.toml").read_text()
    if path == "techniques":
        return techniques_json()
    if path.startswith("flags/") and path.removeprefix("flags/") in catalogue_versions():
        return msgspec.json.encode(load_catalogue(path.removeprefix("flags/"))).decode()
    known = ", ".join(e.uri for e in resource_entries())
    raise KeyError(f"no resource {uri!r}; known: {known}")


def techniques_json() -> str:
    """The technique descriptions as JSON."""
    body = [{"name": name, "tuning_order": rank, "effect": effect,
             "rules": [{"text": rule.text, "source": f"casebook: {rule.source}"} for rule in rules]}
            for name, (rank, effect, rules) in sorted(TECHNIQUES.items(), key=lambda item: item[1][0])]
    return msgspec.json.encode(body).decode()
