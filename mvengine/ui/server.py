"""The web server of `mv ui`: Starlette routes over panel.py, run by uvicorn on 127.0.0.1 by default.

Starlette (with uvicorn) because the page needs four read-only routes and nothing else: no templates, forms,
ORM or validation, which FastAPI or Flask would bring; both are small, well kept and on PyPI. The routes are
plain functions, which Starlette runs in a thread pool, so a slow Delta log read never blocks another request."""

from __future__ import annotations

import html
from importlib import resources

from mvengine.api import Project
from mvengine.errors import MvError
from mvengine.ui.panel import graph, statuses, view_panel


def app(project: Project):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    from mvengine.ui.metrics import registry_for

    page = resources.files("mvengine.ui").joinpath("page.html").read_text(encoding="utf-8")
    registry = registry_for(project)

    def metrics(request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    def index(request: Request) -> HTMLResponse:
        return HTMLResponse(page.replace("{{project}}", html.escape(project.config.project_dir.name)))

    def dag(request: Request) -> JSONResponse:
        return JSONResponse(graph(project.catalog))

    def status(request: Request) -> JSONResponse:
        return JSONResponse(statuses(project.versions()))

    def view(request: Request) -> JSONResponse:
        try:
            return JSONResponse(view_panel(project.versions(), request.path_params["name"]))
        except MvError as e:
            return JSONResponse({"error": str(e)}, status_code=404)

    return Starlette(
        routes=[
            Route("/", index),
            Route("/api/graph", dag),
            Route("/api/status", status),
            Route("/api/view/{name}", view),
            Route("/metrics", metrics),
        ]
    )


def serve(project: Project, host: str, port: int, started=lambda url: None) -> None:
    import socket

    import uvicorn

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as e:
        raise MvError(
            f"cannot listen on {host}:{port}: {e.strerror}",
            hint="another program uses that port: give another with --port",
        ) from None
    config = uvicorn.Config(app(project), host=host, port=port, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    started(f"http://{host}:{port}/")
    server.run()
