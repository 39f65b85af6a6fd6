"""`sglang-tuner serve`: run the HTTP service."""

from __future__ import annotations

import gc
import os

import click
import uvicorn
from sqlalchemy.engine import make_url

from service.api.app import create_app
from service.api.runtime import DEFAULT_MAX_BODY_BYTES, DevModeRefusedError, ServiceSettings, check_dev_mode
from service.cli.database import db_option
from service.logs import get_logger
from service.workers.engine_process import SERVING_CPUS
from service.workers.pool import WorkerSettings

log = get_logger(__name__)

def register(main: click.Group) -> None:
    main.add_command(serve_command)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to bind.")
@db_option
@click.option("--dev", is_flag=True, help="Development mode: requests from loopback need no API key (loopback only).")
@click.option("--workers", "slots", default=4, show_default=True, type=click.IntRange(1, 256),
              help="Jobs this instance runs at once.")
@click.option("--lease-seconds", default=30.0, show_default=True, type=click.FloatRange(1, 3600),
              help="A job whose worker misses heartbeats this long is requeued by the next instance.")
@click.option("--serving-cpus", default=SERVING_CPUS, show_default=True, type=click.IntRange(0, 1024),
              help="CPUs kept free of simulated jobs for serving requests; jobs use the rest (all when there are "
                   "no more CPUs than this). 0: jobs may use every CPU.")
@click.option("--public-url", default=None, metavar="URL",
              help="The URL clients use when it is not the bind address (behind a proxy): /mcp accepts its host "
                   "and origin besides loopback.")
@click.option("--max-body-mib", default=DEFAULT_MAX_BODY_BYTES >> 20, show_default=True, type=click.IntRange(1, 1024),
              help="Largest JSON request body, in MiB; a scenario that replays a trace carries its records inline "
                   "(5,000 to 10,000 records a MiB, by their prompt lengths).")
def serve_command(host: str, port: int, db_url: str, dev: bool, slots: int, lease_seconds: float,
                  serving_cpus: int, public_url: str | None, max_body_mib: int) -> None:
    """Run the sglang-tuner service (jobs, schedules, reports) over HTTP."""
    workers = WorkerSettings(slots=slots, lease_seconds=lease_seconds, heartbeat_seconds=max(lease_seconds / 3, 0.2),
                             reap_every_seconds=max(lease_seconds / 2, 1.0))
    settings = ServiceSettings(db_url=db_url, host=host, dev=dev, workers=workers, serving_cpus=serving_cpus,
                               public_url=public_url, max_body_bytes=max_body_mib << 20)
    try:
        check_dev_mode(settings)
    except DevModeRefusedError as exc:
        raise click.UsageError(str(exc)) from exc
    if dev:
        click.secho(f"WARNING: development mode: unauthenticated requests from loopback are allowed on {host}:{port}",
                    fg="yellow", bold=True, err=True)
    log.info("serving", url=f"http://{host}:{port}", db=_safe(db_url), pid=os.getpid())
    app = create_app(settings)
    # The ~180,000 objects of the imported modules and the app live as long as the process; a full garbage
    # collection walked them all, pausing every request for 70-150 ms (BENCHMARKS.md, "API"). Frozen, the
    # collector only walks what requests and jobs allocate.
    gc.collect()
    gc.freeze()
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")


def _safe(url: str) -> str:
    # Never log a database password.
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a plain file path is not a URL
        return url
