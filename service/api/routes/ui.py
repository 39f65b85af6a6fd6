"""The web UI: `/ui` (jobs) and `/ui/jobs/{id}` (one job), pages that read the API from the browser.

The pages carry no data: their script asks the API for it with the key kept in the browser tab's session
storage (or none, in `--dev` on loopback), so the API's authentication covers everything they show. Every
script and style is served from the package (`service/api/static`); the Content-Security-Policy lets the
pages load nothing from anywhere else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from litestar import Response, get
from litestar.params import PathParameter
from litestar.static_files import create_static_files_router
from litestar.types import ControllerRouterHandler

STATIC = Path(__file__).resolve().parent.parent / "static"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache",
            "Referrer-Policy": "no-referrer"}


def _page() -> Response[bytes]:
    return Response((STATIC / "ui.html").read_bytes(), media_type="text/html", headers=_HEADERS)


@get(["/ui", "/ui/"], include_in_schema=False, sync_to_thread=False)
def ui_jobs() -> Response[bytes]:
    """The jobs list, and a form to start a job."""
    return _page()


@get("/ui/jobs/{job_id:str}", include_in_schema=False, sync_to_thread=False)
def ui_job(job_id: Annotated[str, PathParameter(max_length=64)]) -> Response[bytes]:
    """One job: its rounds, charts, SLO verdict and final configuration; live while it runs."""
    return _page()


ui_static = create_static_files_router(path="/ui/static", directories=[STATIC], include_in_schema=False,
                                       name="ui-static")
ui_handlers: list[ControllerRouterHandler] = [ui_jobs, ui_job, ui_static]
