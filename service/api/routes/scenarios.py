"""`POST /v1/scenarios/decode`: a scenario file's TOML as the JSON object `POST /v1/jobs` takes as `scenario`."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import msgspec
from litestar import post
from litestar.params import JSONBody

from service.api.auth import SECURITY
from service.api.problems import Problem, problem_responses
from service.domain import Scenario
from service.scenario import InputFileError, flag_hint
from service.strict_toml import decode_text

_SOURCE = "the scenario file"


class ScenarioText(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A scenario file's text (the TOML `sglang-tuner round` reads)."""

    toml: Annotated[str, msgspec.Meta(min_length=1, max_length=1_000_000)]


class DecodedScenario(msgspec.Struct, kw_only=True):
    """The scenario, every setting spelled out, ready to send as `scenario` in `POST /v1/jobs`."""

    scenario: dict[str, Any]


def _decode(text: str) -> dict[str, Any]:
    scenario: dict[str, Any] = msgspec.to_builtins(decode_text(text, Scenario, source=_SOURCE,
                                                               known_flag=flag_hint))
    return scenario


@post("/v1/scenarios/decode", operation_id="decodeScenario", opt={"scope": "read"}, security=SECURITY,
      status_code=200, tags=["jobs"], responses=problem_responses(400, 401, 403, 413, 415, 422))
async def decode_scenario(data: JSONBody[ScenarioText]) -> DecodedScenario:
    """Decode a scenario file strictly, as the CLI does: a syntax error, an unknown key (with the nearest valid
    one) or a wrong type is a 422 whose `field` is the scenario's key at fault (`toml` for a syntax error) and whose
    detail names the line. Nothing is stored, and no file is read: a trace
    the scenario names by file must be sent inline (`bench.trace.records`) when the job is started."""
    try:
        return DecodedScenario(scenario=await asyncio.to_thread(_decode, data.toml))
    except InputFileError as exc:
        where = f"line {exc.line}: " if exc.line else ""
        raise Problem(422, "invalid-scenario", "Invalid scenario file", where + exc.message,
                      field=exc.field or "toml",
                      hint=exc.hint or "the format is the one `sglang-tuner round` reads") from exc
