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
from litestar.types import ControllerRouterHandler

from service.api.problems import Problem

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


# Only the files the package ships answer; any other name (however long or odd) is a 404.
_FILES = {path.relative_to(STATIC).as_posix(): path for path in STATIC.rglob("*") if path.is_file()}
_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".md": "text/markdown",
          ".txt": "text/plain"}


@get("/ui/static/{file_path:path}", include_in_schema=False, sync_to_thread=False)
def ui_static(file_path: str) -> Response[bytes]:
    """A script, style or licence file of the UI."""
    name = file_path.lstrip("/")
    found = _FILES.get(name)
    if found is None:
        raise Problem(404, "not-found", "File not found", f"the UI has no file {name[:200]!r}", field="file_path",
                      hint="the UI's scripts and styles are the ones /ui's page names")
    # The vendored libraries change only with their version (and file); the UI's own files with the service.
    cache = "public, max-age=86400" if name.startswith("vendor/") else "no-cache"
    return Response(found.read_bytes(), media_type=_TYPES.get(found.suffix, "application/octet-stream"),
                    headers={"X-Content-Type-Options": "nosniff", "Cache-Control": cache})


ui_handlers: list[ControllerRouterHandler] = [ui_jobs, ui_job, ui_static]
