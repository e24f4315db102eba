"""`mv load SOURCE FILE|-`: the file's rows into the source (mvengine/load.py), one line saying what was done."""

from __future__ import annotations

from mvengine.api import Project
from mvengine.cli.console import Console
from mvengine.load import load


def run_load(
    project: Project,
    console: Console,
    source: str,
    file: str | None,
    *,
    fmt: str | None,
    upsert: bool,
    delete_where: str | None,
) -> int:
    done = load(
        project.config, project.catalog, source, file, fmt=fmt, upsert=upsert, delete_where=delete_where
    )
    console.out(done.line())
    return 0
