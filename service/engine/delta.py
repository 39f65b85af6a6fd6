"""Applying a technique's ConfigDelta to a scenario: the only way a candidate deployment is built."""

from __future__ import annotations

import msgspec

from service.domain import ConfigDelta, Deployment, FlagValue, Scenario, ServerConfig, WorkerGroup, draft_after_switch

_SERVER_FIELDS = {f.name: f for f in msgspec.structs.fields(ServerConfig)}


class DeltaError(ValueError):
    """A delta names a server setting that does not exist or gives it a value of the wrong type."""


def delta_key(delta: ConfigDelta) -> str:
    """A stable identity for a candidate, so the engine never runs the same candidate twice in a job."""
    fields = msgspec.to_builtins(msgspec.structs.replace(delta, summary="", artifacts={}))
    # What the candidate is, not how it is judged: `simplifies` stays out, so keys journaled before it existed
    # still name the same candidates.
    fields.pop("simplifies", None)
    return f"{delta.technique}:{msgspec.json.encode(fields, order='sorted').decode()}"


def apply_delta(scenario: Scenario, delta: ConfigDelta) -> Scenario:
    """The scenario as it would run with `delta` applied; the input is never modified.

    Order matters: a whole new deployment (or model) comes first, then flag changes on top of it, so a
    technique may reshape the topology and set flags in one candidate.
    """
    deployment = delta.deployment or scenario.deployment
    model = scenario.model
    workload = delta.workload or scenario.workload
    if delta.model is not None and delta.model != scenario.model:
        deployment = _switch_model(deployment, delta.model)
        model = delta.model
        # The scenario's draft was named for the old model; the new one's known draft (if any) takes over.
        workload = msgspec.structs.replace(
            workload, speculative=msgspec.structs.replace(workload.speculative, draft_model=None))
    if delta.set_server:
        deployment = _set_server(deployment, delta.set_server, delta.roles)
    if delta.router is not None:
        deployment = msgspec.structs.replace(deployment, router=delta.router)
    bench = scenario.bench
    if delta.client_concurrency is not None:
        bench = msgspec.structs.replace(bench, max_concurrency=delta.client_concurrency)
    return msgspec.structs.replace(scenario, model=model, deployment=deployment, bench=bench, workload=workload)


# The server settings of a draft-model speculative decoding, all unset together when no draft fits the model.
SPECULATIVE_OFF: dict[str, FlagValue | None] = {
    "speculative_algorithm": None, "speculative_draft_model_path": None, "speculative_num_steps": None,
    "speculative_eagle_topk": None, "speculative_num_draft_tokens": None}


def _switch_model(deployment: Deployment, new: str) -> Deployment:
    """Point every worker at `new`. A draft is trained for one target (its hidden states and vocabulary), so a
    worker that speculates takes the new model's own draft (casebook case 3: 27B-eagle3 -> 9B-eagle3; with
    NEXTN, the new model's MTP layer), and stops speculating when it has none rather than launch with a draft
    that does not exist or does not fit."""
    groups = []
    for group in deployment.groups:
        server = msgspec.structs.replace(group.server, model_path=new)
        if server.speculative_draft_model_path:
            draft = draft_after_switch(new, server.speculative_algorithm)
            server = (msgspec.structs.replace(server, speculative_draft_model_path=draft) if draft
                      else set_server_fields(server, SPECULATIVE_OFF))
        groups.append(msgspec.structs.replace(group, server=server))
    return msgspec.structs.replace(deployment, groups=groups)


def _set_server(deployment: Deployment, changes: dict[str, FlagValue | None], roles: list[str]) -> Deployment:
    groups: list[WorkerGroup] = []
    for group in deployment.groups:
        if group.role in roles:
            group = msgspec.structs.replace(group, server=set_server_fields(group.server, changes))
        groups.append(group)
    return msgspec.structs.replace(deployment, groups=groups)


def set_server_fields(server: ServerConfig, changes: dict[str, FlagValue | None]) -> ServerConfig:
    """Set typed fields by name (`None` restores SGLang's default); `--flag` keys go to `extra`."""
    typed: dict[str, object] = {}
    extra = dict(server.extra)
    for key, value in changes.items():
        if key.startswith("--"):
            if value is None:
                extra.pop(key, None)
            else:
                extra[key] = value
            continue
        field = _SERVER_FIELDS.get(key.replace("-", "_"))
        if field is None or field.name == "extra":
            raise DeltaError(f"unknown server setting {key!r}")
        typed[field.name] = _default_of(field) if value is None else value
    try:
        changed = msgspec.structs.replace(server, **typed, extra=extra)
        # Round-trip so a wrong type ("4096" for an int) fails here, naming the field, not in a runner.
        return msgspec.convert(msgspec.to_builtins(changed), ServerConfig)
    except (TypeError, msgspec.ValidationError) as exc:
        raise DeltaError(f"invalid server setting: {exc}") from exc


def _default_of(field: msgspec.structs.FieldInfo) -> object:
    if field.default is not msgspec.NODEFAULT:
        return field.default
    if field.default_factory is not msgspec.NODEFAULT:
        return field.default_factory()
    raise DeltaError(f"server setting {field.name!r} has no default to restore")
