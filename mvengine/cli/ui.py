"""`mv ui`: serve the live page (mvengine/ui) until Ctrl-C; and, meanwhile, a Spark for `mv query` and `mv changes`
(runtime/connect.py), started in the background once the page is up."""

from __future__ import annotations

import threading

from mvengine.api import Project
from mvengine.cli.console import Console
from mvengine.runtime.connect import Endpoint, endpoint_path, stop_serving
from mvengine.runtime.connect import serve as serve_queries
from mvengine.storage.tables import first_line


def run_ui(project: Project, console: Console, *, host: str, port: int) -> int:
    from mvengine.ui.server import serve

    project.catalog  # a mistake in views/ is reported now, not on the page  # noqa: B018
    served: list[Endpoint] = []

    def warm() -> None:
        try:
            endpoint = serve_queries(project.spark, project.config)
        except Exception as e:  # (the page goes on: queries start their own Spark)
            console.out(f"mv ui: not serving queries: {first_line(str(e))}")
            return
        if endpoint is not None:
            served.append(endpoint)
            console.out(
                f"mv ui: serving a Spark to mv query and mv changes at {endpoint.url} (loopback only)"
            )

    if project.config.serve_queries and endpoint_path(project.config) is not None:
        threading.Thread(target=warm, name="serve-queries", daemon=True).start()
    try:
        serve(project, host, port, started=lambda url: console.out(f"mv ui: {url}  (Ctrl-C stops)"))
    except KeyboardInterrupt:  # Ctrl-C is how it is meant to stop: not an error (issue 35)
        pass
    finally:
        stop_serving(project.config, served[0] if served else None)
    console.out("mv ui stopped")
    return 0
