"""Dependencies every handler may ask for."""

from __future__ import annotations

from litestar.datastructures import State
from litestar.di import NamedDependency

from service.api.runtime import ServiceRuntime


def provide_runtime(state: State) -> ServiceRuntime:
    """The app's runtime (store, plugins, workers, metrics)."""
    runtime: ServiceRuntime = state.runtime
    return runtime


Runtime = NamedDependency[ServiceRuntime]
