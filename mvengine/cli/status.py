"""`mv status [--json] [--watch]`: one line per source and view (reading/status.py), coloured on a terminal
(stale yellow, failing red), redrawn in place with --watch."""

from __future__ import annotations

import json
import sys
import time

from mvengine.api import Project
from mvengine.cli.console import Console
from mvengine.reading.status import Status, status

HEADER = [
    "name",
    "kind",
    "strategy",
    "version",
    "behind",
    "lag_s",
    "last",
    "in",
    "out",
    "ms",
    "rows",
    "state",
    "note",
]


def run_status(project: Project, console: Console, *, as_json: bool, watch: bool, interval: float) -> int:
    if as_json:
        console.out(json.dumps([s.to_json() for s in status(project.versions())], indent=2))
        return 0
    if not watch:
        rows = status(project.versions())
        if sys.stdout.isatty():
            from rich.console import Console as RichConsole

            RichConsole().print(_rich_table(rows))
        else:
            console.table(HEADER, [_cells(s) for s in rows])
        return 0
    return _watch(project, interval)


def _watch(project: Project, interval: float) -> int:
    """Redraw the table every `interval` seconds until Ctrl-C, like top."""
    from rich.live import Live

    with Live(_rich_table(status(project.versions())), auto_refresh=False, screen=False) as live:
        try:
            while True:
                time.sleep(interval)
                live.update(_rich_table(status(project.versions())), refresh=True)
        except KeyboardInterrupt:
            pass
    return 0


def _rich_table(rows: list[Status]):
    from rich.table import Table

    table = Table(
        box=None,
        header_style="bold",
        caption=f"mv status  {time.strftime('%H:%M:%S')}  (stale: yellow, failing: red)",
    )
    for name in HEADER:
        table.add_column(
            name,
            justify="right"
            if name in ("version", "behind", "lag_s", "in", "out", "ms", "rows", "state")
            else "left",
        )
    for s in rows:
        style = (
            "red"
            if s.problem and s.problem.startswith("last batch failed")
            else "yellow"
            if s.stale
            else ("green" if s.kind == "view" else "")
        )
        table.add_row(*_cells(s), style=style)
    return table


def _cells(s: Status) -> list[str]:
    def show(value) -> str:
        return "-" if value is None else str(value)

    # A recomputation reads its inputs whole: "all" rows in.
    last = "-" if s.last_time is None else s.last_time[11:19]  # the time of day, UTC
    return [
        s.name,
        s.kind,
        show(s.strategy),
        show(s.version),
        show(s.behind),
        show(s.lag_s),
        last,
        "all" if s.kind == "view" and s.version is not None and s.rows_in is None else show(s.rows_in),
        show(s.rows_out),
        show(s.batch_ms),
        show(s.rows),
        _size(s.state_bytes),
        "; ".join(
            ([s.problem] if s.problem else [])
            + ([f"ignores added column(s) {', '.join(s.ignored_columns)}"] if s.ignored_columns else [])
        ),
    ]


def _size(value: int | None) -> str:
    if value is None:
        return "-"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError(value)
