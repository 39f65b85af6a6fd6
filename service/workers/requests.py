"""A job request (the body of POST /v1/jobs and of every schedule), checked against the loaded plugins."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from service.domain import Scenario
from service.engine import DEFAULT_RUNNER
from service.plugin_host import PluginHost
from service.scenario import InputFileError, load_scenario, require_inline_trace
from service.scenario_check import ScenarioRefused, require_valid_scenario
from service.sglang import errors
from service.store import NewJob


class JobRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Start a tuning job: a playbook applied to a scenario on a runner.

    `runner` defaults to the playbook's runner, else the simulator. `resource` names the runner resource (a GPU host) the job holds while it runs; jobs naming the same
    resource run one at a time. Left out, a runner that needs a GPU is itself the resource.
    """

    playbook: str
    runner: str | None = None
    scenario: dict[str, Any] | None = None
    resource: str | None = None
    kind: Literal["tune", "round"] = "tune"
    # Base traffic seed; repeats use seed, seed + 1, ... (`sglang-tuner tune --seed` gives the same job).
    seed: Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)] = 0
    # Repeats per round; left out, the playbook's (`sglang-tuner tune --repeats`).
    repeats: Annotated[int, msgspec.Meta(ge=1, le=20)] | None = None


class JobRequestError(ValueError):
    """A job request that names an unknown component or carries an invalid scenario."""

    def __init__(self, field: str, detail: str, hint: str) -> None:
        super().__init__(detail)
        self.field, self.detail, self.hint = field, detail, hint


def runner_of(request: JobRequest, plugins: PluginHost) -> str:
    """The runner a request names, else its playbook's, else the engine's default."""
    if request.runner is not None:
        return request.runner
    playbook = plugins.components("playbook").get(request.playbook)
    return getattr(playbook, "runner", None) or DEFAULT_RUNNER


def check_job_request(request: JobRequest, plugins: PluginHost) -> str | None:
    """Validate a request against the loaded plugins; returns the runner resource the job will hold.

    Raises:
        JobRequestError: unknown playbook or runner, or a scenario that does not decode or does not pass
            `service.scenario_check` (the field is the first error's, under `scenario.`).
    """
    runner_name = runner_of(request, plugins)
    for kind, name, field in (("playbook", request.playbook, "playbook"), ("runner", runner_name, "runner")):
        try:
            plugins.get(kind, name)
        except KeyError as exc:
            raise JobRequestError(field, str(exc.args[0]), f"GET /v1/{kind}s lists the {kind}s this service has") from exc
    if request.scenario is not None:
        _check_scenario(_decode_scenario(request.scenario), "scenario")
    else:
        _check_playbook_scenario(plugins.components("playbook").get(request.playbook))
    if request.resource is not None:
        return request.resource
    runner = plugins.get("runner", runner_name)
    capabilities = getattr(runner, "capabilities", None)
    return f"runner:{runner_name}" if capabilities is not None and capabilities.needs_gpu else None


def _decode_scenario(data: dict[str, Any]) -> Scenario:
    try:
        scenario = msgspec.convert(data, Scenario)
    except msgspec.ValidationError as exc:
        message, _, path = str(exc).partition(" - at `$")
        field = "scenario" + ("." + path.rstrip("`").lstrip(".") if path else "")
        raise JobRequestError(field, message, "the scenario format is the one `sglang-tuner round` reads") from exc
    try:
        return require_inline_trace(scenario)
    except InputFileError as exc:
        raise JobRequestError(f"scenario.{exc.field}", exc.message, exc.hint or "") from exc


def _check_scenario(scenario: Scenario, field: str) -> None:
    """The door check of every job: a scenario with any error never reaches a worker (nothing is launched)."""
    try:
        require_valid_scenario(scenario)
    except ScenarioRefused as exc:
        first, others = exc.first, errors(exc.issues)[1:]
        also = f" (and {len(others)} more: " + ", ".join(f"{field}.{i.field}" for i in others[:3]) + ")" if others else ""
        raise JobRequestError(f"{field}.{first.field}", first.message + also,
                              first.hint or "`sglang-tuner validate` lists every problem of a scenario") from exc


def _check_playbook_scenario(playbook: object) -> None:
    """A request without a scenario tunes its playbook's own scenario file, which must pass the same check."""
    path = getattr(playbook, "scenario", None)
    if not path:
        return
    try:
        scenario = load_scenario(path)
    except (InputFileError, OSError) as exc:
        raise JobRequestError("playbook", f"the playbook's scenario {path} cannot be read: {exc}",
                              "send a scenario in the request, or fix the playbook's scenario file") from exc
    try:
        require_valid_scenario(scenario)
    except ScenarioRefused as exc:
        raise JobRequestError("playbook", f"the playbook's scenario {path} is refused: {exc}",
                              "send a valid scenario in the request, or fix the playbook's scenario file") from exc


def new_job(request: JobRequest, plugins: PluginHost, *, created_by: str | None = None,
            idempotency_key: str | None = None, schedule_id: str | None = None) -> NewJob:
    """The store's `NewJob` for a checked request."""
    resource = check_job_request(request, plugins)
    return NewJob(playbook=request.playbook, runner=runner_of(request, plugins), request=msgspec.to_builtins(request),
                  kind=request.kind, resource=resource, idempotency_key=idempotency_key,
                  schedule_id=schedule_id, created_by=created_by)
