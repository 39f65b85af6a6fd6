"""GPU count: fewer GPUs under a cost objective while the SLO holds; more while a target is missed.

The casebook sizes a deployment before the first round (model, GPUs, capacity) and then tunes it; every
other technique re-cuts the same GPUs, so a job that starts on the wrong number of them would end there.

- `right_sizing`: under the `cost` objective, and only once the last kept round meets every SLO target, halve
  the GPUs one step at a time: half the replicas, or, with one replica, half the TP size, while each smaller
  instance's KV pool (as SGLang sizes it at start) holds its share of the load at the p95 context, the
  casebook's capacity calculation. The cost objective keeps the smaller deployment only if it still meets the SLO (a
  cheaper configuration that holds the SLO is accepted even at lower throughput); each step is judged against
  the last kept one, so the first that breaks a target ends the walk.
- `scale_out`: while the last kept round misses a target and the machine has GPUs the deployment leaves idle,
  double the replicas behind a router: the same load spread over more instances queues less. The SLO gate
  keeps it when it meets the missed target.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from plugins.techniques._rules import (
    clients_of,
    fit_balance,
    kv_need,
    kv_shortfall,
    router_note,
    tried_deltas,
    without_router,
)
from plugins.techniques.parallelism import preferred_policy
from service import (
    Applicability,
    ConfigDelta,
    Deployment,
    RouterConfig,
    ServerConfig,
    ServerStartError,
    Technique,
    TuningContext,
    resolve_server,
    slo_checks,
)

# Casebook "Server Metrics": token_usage's normal range is 0.5-0.85; beyond it the KV cache saturates.
NORMAL_USAGE = 0.85


def _kv_short(ctx: TuningContext, smaller: Deployment) -> str:
    """Why an instance of `smaller` could not hold its share of the load ("" when it can).

    Casebook "Capacity Calculation": every request in flight at the p95 context ("p95 scenario (28,000 tokens
    x 25 requests)"), against the KV pool SGLang sizes at start from the GPU's memory less the weights. The
    calculation is a bound: where the deployment being halved fails it too while its last round met the SLO,
    the KV it measured occupied (token_usage) decides instead, scaled to the smaller instance's share and held
    within the casebook's normal usage (at most 0.85 of the pool).
    """
    group = smaller.groups[0]
    short = kv_shortfall(ctx.model, ctx.scenario, group.server, group.replicas)
    if short is None:
        return ""
    if short.startswith("it would not start"):
        return short
    pool = _pool(ctx, group.server)
    current = ctx.scenario.deployment.groups[0]
    usage = ctx.baseline.server.token_usage if ctx.baseline is not None else 0.0
    try:
        held = _pool(ctx, current.server)
    except ServerStartError:
        return short
    if usage <= 0 or held >= kv_need(ctx.scenario, current.replicas)[2]:
        return short
    occupied = usage * held * current.replicas / group.replicas
    if occupied <= NORMAL_USAGE * pool:
        return ""
    return (f"{short}, and the {occupied:,.0f} tokens the last round occupied per instance (token_usage "
            f"{usage:.2f} of {held:,}, scaled to its share) would fill more than {NORMAL_USAGE:.0%} of it")


def _pool(ctx: TuningContext, server: ServerConfig) -> int:
    return resolve_server(ctx.model, ctx.scenario.hardware, server).pool_tokens


def _halved(ctx: TuningContext) -> tuple[ConfigDelta | None, str]:
    """The deployment on half its GPUs that still holds the load's KV, or None with the reason there is none."""
    delta, why = _half(ctx)
    if delta is None or delta.deployment is None:
        return None, why
    short = _kv_short(ctx, delta.deployment)
    if short:
        return None, f"{delta.summary}: {short}"
    return delta, ""


def _half(ctx: TuningContext) -> tuple[ConfigDelta | None, str]:
    """The deployment on half its GPUs, or None with the reason there is none."""
    deployment = ctx.scenario.deployment
    group = deployment.groups[0]
    server = group.server
    if group.replicas > 1:
        # A smaller count this job already measured and left (it missed a target): the walk goes halfway back
        # towards the current count instead (8 replicas: 4 missed the ITL target, so 6), never below it.
        failed = max((d.deployment.groups[0].replicas for d in tried_deltas(ctx, RightSizing.name)
                      if d.deployment is not None and len(d.deployment.groups) == 1
                      and d.deployment.groups[0].replicas < group.replicas), default=0)
        replicas = group.replicas // 2
        if replicas <= failed:
            replicas = (group.replicas + failed) // 2
            if replicas <= failed:
                return None, (f"{failed} replicas already missed a target, and no count lies between it and "
                              f"{group.replicas}")
        gpus = replicas * server.world_size
        summary = f"{replicas} of {group.replicas} replicas (TP{server.tp_size}): {gpus} GPU{'' if gpus == 1 else 's'}"
        if replicas == 1 and deployment.router is not None:
            return ConfigDelta(technique=RightSizing.name, summary=f"{summary}, no router",
                               deployment=without_router(deployment, msgspec.structs.replace(group, replicas=1))), ""
        smaller = msgspec.structs.replace(group, replicas=replicas)
        router = fit_balance(deployment.router, ctx.scenario, replicas) if deployment.router else None
        note = router_note(router, deployment.router) if router else ""
        return ConfigDelta(technique=RightSizing.name, summary=summary + note,
                           deployment=msgspec.structs.replace(deployment, groups=[smaller], router=router)), ""
    tp = server.tp_size // 2
    if tp < 1 or server.dp_size > 1 or server.ep_size > 1 or server.attention_dp_size > 1 or server.pp_size > 1:
        return None, f"one TP{server.tp_size} instance with nothing left to halve"
    smaller = msgspec.structs.replace(group, server=msgspec.structs.replace(server, tp_size=tp))
    return ConfigDelta(technique=RightSizing.name, summary=f"TP{tp} on {tp} GPU{'' if tp == 1 else 's'} (from TP{server.tp_size})",
                       deployment=msgspec.structs.replace(deployment, groups=[smaller])), ""


class RightSizing(Technique):
    """Fewer GPUs for the same load, under the cost objective, while every SLO target holds."""

    name: ClassVar[str] = "right_sizing"
    # Last in the casebook's order (listed after PD and large-scale EP, which share rank 8): the GPUs are
    # counted once every other technique has made each GPU as efficient as it gets.
    rank: ClassVar[int] = 8
    stepwise: ClassVar[bool] = True
    description: ClassVar[str] = ("Under the cost objective, halve the GPUs (replicas, then TP) while the last "
                                  "kept round meets every SLO target; the SLO gate ends the walk.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        scenario = ctx.scenario
        if scenario.objective.kind != "cost":
            return Applicability(False, f"The objective is {scenario.objective.kind}, not cost: fewer GPUs are "
                                        "judged only by what they cost.")
        if len(scenario.deployment.groups) != 1 or scenario.deployment.is_pd:
            return Applicability(False, "The deployment has separate roles or groups; its split is sized by "
                                        "pd_disaggregation.")
        if ctx.baseline is not None:
            missed = [c.name for c in slo_checks(ctx.baseline, scenario.slo) if not c.met]
            if missed:
                return Applicability(False, f"The last kept round misses {', '.join(missed)}: fewer GPUs would "
                                            "not meet it.")
        delta, why = _halved(ctx)
        if delta is None:
            return Applicability(False, f"Nothing smaller to try: {why}.")
        gpus = scenario.deployment.total_gpus()
        return Applicability(True, f"The cost objective with every SLO target met on {gpus} GPUs: the same "
                                   f"load on {delta.deployment.total_gpus() if delta.deployment else gpus} may "
                                   "meet it for less.")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        delta, _ = _halved(ctx)
        return [] if delta is None else [delta]


class ScaleOut(Technique):
    """More replicas of the same server on the machine's idle GPUs, while an SLO target is missed."""

    name: ClassVar[str] = "scale_out"
    rank: ClassVar[int] = 2
    stepwise: ClassVar[bool] = True
    description: ClassVar[str] = ("While the last kept round misses an SLO target and the hardware has GPUs the "
                                  "deployment leaves idle, double the replicas behind a router: the same load "
                                  "spread over more instances queues less.")

    def applicable(self, ctx: TuningContext) -> Applicability:
        scenario = ctx.scenario
        if len(scenario.deployment.groups) != 1 or scenario.deployment.is_pd:
            return Applicability(False, "The deployment has separate roles or groups; its split is sized by "
                                        "pd_disaggregation.")
        if ctx.baseline is None:
            return Applicability(False, "Nothing is measured yet: the first round shows whether the SLO is missed.")
        missed = [c.name for c in slo_checks(ctx.baseline, scenario.slo) if not c.met]
        if not missed:
            return Applicability(False, "The last kept round meets every SLO target: more GPUs would only cost more.")
        clients, replicas = clients_of(scenario), scenario.deployment.groups[0].replicas
        if 0 < clients <= replicas:
            return Applicability(False, f"{clients} client stream{'s' if clients > 1 else ''} on {replicas} "
                                        f"replica{'s' if replicas > 1 else ''}: no replica runs more than one "
                                        "request at a time, so another would sit idle and cannot shorten a request "
                                        f"that runs alone ({', '.join(missed)} missed).")
        delta = _doubled(ctx)
        if delta is None or delta.deployment is None:
            return Applicability(False, f"No idle GPUs for another {_replica_gpus(ctx)}-GPU replica: the deployment "
                                        f"uses {scenario.deployment.total_gpus()} of {_machine_gpus(ctx)}.")
        return Applicability(True, f"The last kept round misses {', '.join(missed)} on "
                                   f"{scenario.deployment.total_gpus()} of {_machine_gpus(ctx)} GPUs: more "
                                   "replicas share the same load.")

    def propose(self, ctx: TuningContext) -> list[ConfigDelta]:
        delta = _doubled(ctx)
        return [] if delta is None else [delta]


def _machine_gpus(ctx: TuningContext) -> int:
    return ctx.scenario.hardware.gpus_per_node * ctx.scenario.hardware.nodes


def _replica_gpus(ctx: TuningContext) -> int:
    return ctx.scenario.deployment.groups[0].server.world_size


def _doubled(ctx: TuningContext) -> ConfigDelta | None:
    """Twice the replicas (or as many as the idle GPUs hold), behind the deployment's router or a new one."""
    deployment = ctx.scenario.deployment
    group = deployment.groups[0]
    per = _replica_gpus(ctx)
    replicas = min(2 * group.replicas, _machine_gpus(ctx) // per)
    if replicas <= group.replicas or per > ctx.scenario.hardware.gpus_per_node:
        return None
    policy = preferred_policy(ctx)
    if deployment.router is None:
        router = fit_balance(RouterConfig(port=group.base_port, policy=policy), ctx.scenario, replicas)
        worker = msgspec.structs.replace(group, replicas=replicas, base_port=group.base_port + 1)
        how = f"behind a {policy} router{router_note(router)}"
    else:
        router = fit_balance(deployment.router, ctx.scenario, replicas)
        worker = msgspec.structs.replace(group, replicas=replicas)
        how = f"behind the {router.policy} router{router_note(router, deployment.router)}"
    return ConfigDelta(technique=ScaleOut.name,
                       summary=f"{replicas} replicas (TP{group.server.tp_size}) {how}: {replicas * per} GPUs",
                       deployment=Deployment(groups=[worker], router=router))

