"""`sglang-tuner serve`: run the HTTP service."""

from __future__ import annotations

import click
import uvicorn

from service.logs import get_logger

log = get_logger(__name__)


def register(main: click.Group) -> None:
    main.add_command(serve_command)


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", default=8000, show_default=True, type=int, help="Port to bind.")
@click.option("--dev", is_flag=True, help="Development mode: allows unauthenticated writes on loopback only.")
def serve_command(host: str, port: int, dev: bool) -> None:
    """Run the sglang-tuner service."""
    from service.api.app import create_app

    if dev:
        log.warning("dev_mode", detail="development mode: unauthenticated writes are allowed", host=host)
    uvicorn.run(create_app(), host=host, port=port, log_level="info")
