"""`mv refresh`: views brought up to date once, or kept fresh (`--continuous`) until Ctrl-C or SIGTERM."""

from __future__ import annotations

import contextlib
import os
import sys
import time

from mvengine.api import Project
from mvengine.cli.console import Console
from mvengine.cli.stop import stop_on_signal
from mvengine.errors import MvError
from mvengine.project.catalog import Catalog
from mvengine.project.config import Config, parse_duration


def run_refresh(project: Project, console: Console, views: list[str], *, full: bool, continuous: bool,
                interval: str | None, profile: bool = False) -> int:
    config = project.config
    if interval is not None and not continuous:
        raise MvError("--interval only applies with --continuous", hint="mv refresh --continuous --interval 5s")
    period = parse_duration(interval) if interval is not None else config.refresh_interval_s
    catalog = project.catalog  # SQL mistakes are reported before Spark starts
    for name in _orphans(config, catalog):
        console.out(f"warning: {name} has tables in the warehouse but is no longer in views/; they are left as "
                    "they are")
    status = _Status(console, profile)

    def refresh(full: bool = False) -> None:
        project.refresh(views or None, full=full, on_batch=status.batch, stopping=stopping)

    project.spark  # noqa: B018 (start Spark now, before Ctrl-C is taken over)
    stops = stop_on_signal(lambda: console.out("stopping after the current batch (Ctrl-C again to stop at once)")) \
        if continuous else contextlib.nullcontext(lambda: False)
    with stops as stopping:
        try:
            refresh(full)
            while continuous and not stopping():
                deadline = time.monotonic() + period
                while time.monotonic() < deadline and not stopping():
                    time.sleep(min(0.1, period))
                if not stopping():
                    refresh()
        finally:
            status.close()
    if status.batches == 0 and not continuous:
        console.out("every view is up to date")
    return 0


class _Status:
    """Batch lines as they commit; on a terminal, a spinner naming what is being worked on."""

    def __init__(self, console: Console, profile: bool) -> None:
        self.console = console
        self.profile = profile
        self.batches = 0
        self._live = None
        self._rich = None
        if sys.stdout.isatty() and os.environ.get("CI") != "true":
            with contextlib.suppress(Exception):
                from rich.console import Console as RichConsole

                self._rich = RichConsole(highlight=False)
                self._live = self._rich.status("refreshing views...")
                self._live.start()

    def batch(self, report) -> None:
        self.batches += 1
        lines = [report.line()] + ([report.profile()] if self.profile else [])
        for line in lines:
            if self._rich is not None:
                self._rich.print(line, markup=False)  # above the spinner, not through it
            else:
                self.console.out(line)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


def _orphans(config: Config, catalog: Catalog) -> list[str]:
    """Folders of the (local) warehouse that hold a view's snapshot but no longer match a view in views/."""
    root = config.warehouse.removeprefix("file:")
    if "://" in root or not os.path.isdir(root):
        return []
    known = {p.view.path.rstrip("/") for p in catalog.plans.values()}
    found = []
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if os.path.isdir(os.path.join(folder, "snapshot", "_delta_log")) and folder.rstrip("/") not in known:
            found.append(name)
    return found
