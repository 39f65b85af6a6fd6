"""Scenarios of the casebook's rounds for the direction tests and the fidelity report.

Each builder starts from a shipped example (`examples/casebook/`) and changes what a round changes.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from service.domain import Deployment, RouterConfig, Scenario, WorkerGroup

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "casebook"
SPEC = {"speculative_algorithm": "EAGLE3", "speculative_num_steps": 5, "speculative_eagle_topk": 8,
        "speculative_num_draft_tokens": 6}
NO_SPEC = dict.fromkeys(("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps",
                         "speculative_eagle_topk", "speculative_num_draft_tokens"))
FP8 = {"quantization": "fp8", "kv_cache_dtype": "fp8_e5m2"}


def load(name: str) -> Scenario:
    return msgspec.toml.decode((EXAMPLES / f"{name}.toml").read_bytes(), type=Scenario)


def server(scenario: Scenario, **flags: object) -> Scenario:
    groups = [msgspec.structs.replace(g, server=msgspec.structs.replace(g.server, **flags))
              for g in scenario.deployment.groups]
    return msgspec.structs.replace(scenario, deployment=msgspec.structs.replace(scenario.deployment, groups=groups))


def bench(scenario: Scenario, **fields: object) -> Scenario:
    return msgspec.structs.replace(scenario, bench=msgspec.structs.replace(scenario.bench, **fields))


def prefix(scenario: Scenario, **fields: object) -> Scenario:
    changed = msgspec.structs.replace(scenario.workload.prefix, **fields)
    return msgspec.structs.replace(scenario, workload=msgspec.structs.replace(scenario.workload, prefix=changed))


def replicas(scenario: Scenario, tp: int, replicas: int, policy: str = "cache_aware") -> Scenario:
    group = scenario.deployment.groups[0]
    group = msgspec.structs.replace(group, replicas=replicas, server=msgspec.structs.replace(group.server, tp_size=tp))
    return msgspec.structs.replace(scenario, deployment=Deployment(groups=[group], router=RouterConfig(
        policy=policy)))  # type: ignore[arg-type]


# The casebook's four smaller cases ("PD disaggregation: Detrimental" in its five-case table): each round-0
# scenario as the table's deployment (TP2 x 4, TP2 x 2, TP2, TP2), against the same GPUs split into a prefill
# pool and a decode pool. Values: (unified TP, unified instances, PD TP, prompts).
SMALL_PD = {"coding-assistant-round0": (2, 4, 2, 500), "document-qa-rag-round0": (2, 2, 2, 1000),
            "nightly-batch-round0": (2, 1, 1, 1000), "structured-output-round0": (2, 1, 1, 1000)}


def small_pd_pair(name: str) -> tuple[Scenario, Scenario]:
    """The case's unified deployment and its prefill / decode split (also tabled by scripts/gen_fidelity.py)."""
    tp, instances, pd_tp, prompts = SMALL_PD[name]
    base = bench(load(name), num_prompts=prompts)
    pool = msgspec.structs.replace(base.deployment.groups[0].server, tp_size=pd_tp)
    pools = tp * instances // pd_tp
    router = RouterConfig(policy="cache_aware", prefill_policy="cache_aware", decode_policy="power_of_two")
    split = msgspec.structs.replace(base, deployment=Deployment(router=router, groups=[
        WorkerGroup(name="prefill", role="prefill", replicas=pools // 2, server=pool),
        WorkerGroup(name="decode", role="decode", replicas=pools - pools // 2, server=pool)]))
    return replicas(base, tp=tp, replicas=instances), split
