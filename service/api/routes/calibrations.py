"""Calibrations: fit the simulator's corrections on measured rounds, store them, list and delete them.

Every simulated round of a job applies the stored calibration that matches its GPU, SGLang version and cost
model (its own model and layout first) and names it in its provenance.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import msgspec
from litestar import Response, Router, delete, get, post
from litestar.params import JSONBody, PathParameter, QueryParameter

from service.api.auth import SECURITY
from service.api.problems import Problem, from_decode_error, invalid, not_found, problem_responses
from service.api.routes.deps import Runtime
from service.calibration import CalibrationError, Observation, cost_model_for, fit_calibration
from service.domain import Calibration, RoundResult, Scenario

_READ, _WRITE = {"scope": "read"}, {"scope": "write"}
_HINT = "GET /v1/calibrations lists the stored calibrations"
CalibrationId = Annotated[str, PathParameter(description="Calibration id.", max_length=64)]
MAX_ROUNDS = 16


class CalibrationCreate(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Rounds measured on one deployment, to fit a calibration on.

    Attributes:
        scenario: The scenario the rounds ran (the format of POST /v1/jobs): its model, GPU, SGLang version,
            deployment and load.
        rounds: The measured rounds: what `sglang-tuner round --json` printed, or a job's round results.
        cost_model: The cost model whose step times are corrected (default: the one the scenario's simulated
            rounds use, aiconfigurator where it has data, else roofline).
    """

    scenario: dict[str, Any]
    rounds: Annotated[list[dict[str, Any]], msgspec.Meta(min_length=1, max_length=MAX_ROUNDS)]
    cost_model: Annotated[str, msgspec.Meta(max_length=100)] | None = None


def _decode(data: CalibrationCreate) -> tuple[Scenario, list[RoundResult]]:
    try:
        scenario = msgspec.convert(data.scenario, Scenario)
    except msgspec.ValidationError as exc:
        raise from_decode_error(exc, prefix="scenario") from exc
    rounds = []
    for i, raw in enumerate(data.rounds):
        try:
            rounds.append(msgspec.convert(raw, RoundResult))
        except msgspec.ValidationError as exc:
            raise from_decode_error(exc, prefix=f"rounds[{i}]") from exc
    return scenario, rounds


@post("/", operation_id="createCalibration", opt=_WRITE, security=SECURITY,
      responses=problem_responses(400, 401, 403, 413, 415, 422))
async def create_calibration(data: JSONBody[CalibrationCreate], runtime: Runtime) -> Response[Calibration]:
    """Fit prefill and decode factors, per-step and per-request costs and the host delay of a cost model to
    measured rounds (bounded least squares, standard errors from the Jacobian) and store the calibration."""
    scenario, rounds = _decode(data)
    try:
        name, base = cost_model_for(runtime.plugins.components("cost_model"), data.cost_model, scenario)
    except ValueError as exc:
        raise invalid("cost_model", str(exc), "leave cost_model out for the one the scenario's rounds use") from exc
    observations = [Observation(scenario, r, r.provenance.seed, f"rounds[{i}]") for i, r in enumerate(rounds)]
    try:
        # Tens of simulations: CPU work kept off the loop that serves the API.
        fitted = await asyncio.to_thread(fit_calibration, observations, base, name)
    except CalibrationError as exc:
        raise Problem(422, "not-calibratable", "Rounds cannot be calibrated on", str(exc), field="rounds",
                      hint="pass rounds whose status is ok and whose requests completed") from exc
    stored = await runtime.store.save_calibration(fitted)
    return Response(stored, status_code=201, headers={"Location": f"/v1/calibrations/{stored.id}"})


@get("/", operation_id="listCalibrations", opt=_READ, security=SECURITY, responses=problem_responses(400, 401, 403))
async def list_calibrations(runtime: Runtime,
                            model: Annotated[str | None, QueryParameter(max_length=300)] = None,
                            gpu: Annotated[str | None, QueryParameter(max_length=100)] = None) -> list[Calibration]:
    """Stored calibrations, newest first, of one model or GPU when given."""
    return await runtime.store.list_calibrations(model=model, gpu=gpu)


@get("/{calibration_id:str}", operation_id="getCalibration", opt=_READ, security=SECURITY,
     responses=problem_responses(400, 401, 403, 404))
async def get_calibration(calibration_id: CalibrationId, runtime: Runtime) -> Calibration:
    """One calibration: its parameters with standard errors, the fitted figures and the fit's RMS error."""
    found = await runtime.store.get_calibration(calibration_id)
    if found is None:
        raise not_found("calibration", calibration_id, _HINT)
    return found


@delete("/{calibration_id:str}", operation_id="deleteCalibration", opt=_WRITE, security=SECURITY,
        responses=problem_responses(400, 401, 403, 404, 415))
async def delete_calibration(calibration_id: CalibrationId, runtime: Runtime) -> None:
    """Delete a calibration; jobs that start later no longer apply it."""
    if not await runtime.store.delete_calibration(calibration_id):
        raise not_found("calibration", calibration_id, _HINT)


calibrations_router = Router(path="/v1/calibrations", tags=["calibrations"], route_handlers=[
    create_calibration, list_calibrations, get_calibration, delete_calibration])

__all__ = ["calibrations_router"]
