"""What a calibration is: a few named corrections of the simulator's step costs, fitted on measured rounds.

A cost model prices one forward step from kernels measured on someone else's rig (aiconfigurator-core) or
from physics (roofline). A user's deployment adds its own kernels, driver, interconnect, host overheads and
SGLang version. A calibration keeps five corrections of one (model, GPU, SGLang version, parallel layout):

| parameter | applies to | bounds |
|---|---|---|
| `prefill` | every extend (prefill) step's time, as a factor | 0.2 to 10 |
| `decode` | every decode and speculative step's time, as a factor | 0.2 to 10 |
| `step_ms` | a fixed overhead added to every forward step | 0 to 20 ms |
| `request_ms` | scheduler work per request in an extend batch | 0 to 20 ms |
| `frontend_ms` | host time before a request reaches the scheduler (HTTP, tokenization): TTFT only | 0 to 50 ms |

Each comes with its standard error from the fit, and the fit's residuals say how well the corrected
simulator reproduces the rounds it was fitted on.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from service.domain.deployment import Deployment
from service.domain.scenario import Scenario

# (name, lower bound, upper bound, value with no correction, unit)
PARAMETERS: tuple[tuple[str, float, float, float, str], ...] = (
    ("prefill", 0.2, 10.0, 1.0, "x"),
    ("decode", 0.2, 10.0, 1.0, "x"),
    ("step_ms", 0.0, 20.0, 0.0, "ms"),
    ("request_ms", 0.0, 20.0, 0.0, "ms"),
    ("frontend_ms", 0.0, 50.0, 0.0, "ms"),
)
NAMES = tuple(p[0] for p in PARAMETERS)


class Factors(msgspec.Struct, frozen=True, kw_only=True):
    """The corrections the simulator applies (identity: no correction)."""

    prefill: float = 1.0
    decode: float = 1.0
    step_ms: float = 0.0
    request_ms: float = 0.0
    frontend_ms: float = 0.0

    def vector(self) -> list[float]:
        return [self.prefill, self.decode, self.step_ms, self.request_ms, self.frontend_ms]

    @classmethod
    def of(cls, values: list[float] | tuple[float, ...]) -> Factors:
        return cls(**{name: float(v) for name, v in zip(NAMES, values, strict=True)})


class Parameter(msgspec.Struct, frozen=True, kw_only=True):
    """One fitted correction with its standard error and bounds; `at_bound` when the fit pressed on one."""

    name: str
    value: float
    stderr: float
    lower: float
    upper: float
    unit: str
    at_bound: bool = False


class Residual(msgspec.Struct, frozen=True, kw_only=True):
    """One figure of one fitted round: measured, predicted by the calibrated simulator, and the error."""

    round: int
    figure: str
    measured: float
    predicted: float
    uncalibrated: float
    error: float  # predicted / measured - 1


class CalibrationKey(msgspec.Struct, frozen=True, kw_only=True):
    """What a calibration is valid for."""

    model: str
    gpu: str
    sglang_version: str
    layout: str

    def line(self) -> str:
        return f"{self.model} on {self.gpu}, SGLang {self.sglang_version}, {self.layout}"


class Calibration(msgspec.Struct, frozen=True, kw_only=True):
    """A fitted calibration: its key, parameters, the rounds it came from and how well it fits them."""

    key: CalibrationKey
    parameters: list[Parameter]
    cost_model: str
    rounds: int
    sources: list[str] = msgspec.field(default_factory=list)
    residuals: list[Residual] = msgspec.field(default_factory=list)
    # Root mean square of the fitted figures' relative errors, before and after the corrections.
    rms_error: float = 0.0
    rms_error_uncalibrated: float = 0.0
    evaluations: int = 0
    id: str = ""
    created_at: float = 0.0

    @property
    def factors(self) -> Factors:
        """The corrections to apply (a parameter the calibration does not hold stays at no correction)."""
        known = Factors.__struct_fields__
        return Factors(**{p.name: float(p.value) for p in self.parameters if p.name in known})

    def describe(self) -> str:
        """`calibrated on 2 rounds of qwen3-8b on H100-SXM, SGLang 0.5.23, 1x tp1: prefill x1.80±0.04, ...`."""
        shown = ", ".join(parameter_text(p) for p in self.parameters)
        ident = f" [{self.id}]" if self.id else ""
        plural = "round" if self.rounds == 1 else "rounds"
        return f"calibrated{ident} on {self.rounds} {plural} of {self.key.line()}: {shown}"


def parameter_text(p: Parameter) -> str:
    """`decode x1.40±0.10` or `step_ms +2.00±0.50 ms`."""
    if p.unit == "x":
        return f"{p.name} x{p.value:.2f}±{p.stderr:.2f}"
    return f"{p.name} +{p.value:.2f}±{p.stderr:.2f} ms"


def layout_of(deployment: Deployment) -> str:
    """The parallel layout of a deployment: `2x tp2`, `1x tp8-dp8-ep8`, `1x tp2 prefill + 1x tp2 decode`."""
    parts = []
    for group in deployment.groups:
        server = group.server
        bits = [f"tp{server.tp_size}"]
        if server.attention_dp_size > 1 or server.dp_size > 1:
            bits.append(f"dp{max(server.attention_dp_size, server.dp_size)}")
        if server.ep_size > 1:
            bits.append(f"ep{server.ep_size}")
        role = "" if group.role == "unified" else f" {group.role}"
        parts.append(f"{group.replicas}x {'-'.join(bits)}{role}")
    return " + ".join(parts)


def key_of(scenario: Scenario) -> CalibrationKey:
    """The calibration key of a scenario's deployment."""
    return CalibrationKey(model=scenario.model, gpu=scenario.hardware.gpu, sglang_version=scenario.sglang_version,
                          layout=layout_of(scenario.deployment))



def calibration_for(calibrations: Sequence[Calibration], scenario: Scenario,
                    cost_model: str) -> tuple[Calibration, str] | None:
    """The calibration a simulation of `scenario` on `cost_model` applies, and a note when it was fitted on
    another deployment (else ""), or None when none was fitted on this GPU and SGLang version.

    The scenario's own model and layout first, then its model on another layout, then another model on the
    same GPU and version (what a deployment's kernels and host add is largely the GPU's and the version's,
    and a job that compares a calibrated round with an uncalibrated one compares two clocks); the newest
    among equals.
    """
    key = key_of(scenario)
    matching = [c for c in calibrations if c.cost_model == cost_model and c.key.gpu == key.gpu
                and c.key.sglang_version == key.sglang_version]
    if not matching:
        return None
    best = max(matching, key=lambda c: (c.key.model == key.model, c.key.layout == key.layout, c.created_at))
    if best.key.model != key.model:
        return best, f" (fitted on {best.key.model} {best.key.layout}, applied to {key.model} {key.layout})"
    if best.key.layout != key.layout:
        return best, f" (fitted on {best.key.layout}, applied to {key.layout})"
    return best, ""
