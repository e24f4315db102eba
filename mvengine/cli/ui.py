"""`mv ui`: serve the live page (mvengine/ui) until Ctrl-C."""

from __future__ import annotations

from mvengine.api import Project
from mvengine.cli.console import Console


def run_ui(project: Project, console: Console, *, host: str, port: int) -> int:
    from mvengine.ui.server import serve

    project.catalog  # a mistake in views/ is reported now, not on the page  # noqa: B018
    try:
        serve(project, host, port, started=lambda url: console.out(f"mv ui: {url}  (Ctrl-C stops)"))
    except KeyboardInterrupt:  # Ctrl-C is how it is meant to stop: not an error (issue 35)
        pass
    console.out("mv ui stopped")
    return 0
