"""`mv refresh`: views brought up to date once, or kept fresh (`--continuous`) until Ctrl-C or SIGTERM."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from functools import partial

from mvengine.api import Project
from mvengine.cli.console import Console
from mvengine.cli.stop import stop_on_signal
from mvengine.config import Config, join_uri, parse_duration
from mvengine.errors import MvError
from mvengine.project.catalog import Catalog
from mvengine.runtime.connect import serve, stop_serving
from mvengine.storage.objects import list_folders
from mvengine.ui.metrics import BatchMetrics, registry_for, serve_metrics


def run_refresh(
    project: Project,
    console: Console,
    views: list[str],
    *,
    full: bool,
    continuous: bool,
    interval: str | None,
    metrics_port: int | None = None,
    profile: bool = False,
    wait: bool = False,
    dry_run: bool = False,
) -> int:
    config = project.config
    if metrics_port is not None and not continuous:
        raise MvError(
            "--metrics-port only applies with --continuous (a one-shot refresh ends before a scrape)",
            hint="mv refresh --continuous --metrics-port 9464, or read mv ui's /metrics",
        )
    if metrics_port is not None and not 0 <= metrics_port <= 65535:
        raise MvError(f"--metrics-port must be a port number from 0 to 65535, not {metrics_port}")
    if interval is not None and not continuous:
        raise MvError(
            "--interval only applies with --continuous", hint="mv refresh --continuous --interval 5s"
        )
    if dry_run:
        if continuous:
            raise MvError(
                "--dry-run says what one refresh would do; it cannot run --continuous",
                hint="mv refresh --dry-run (add --full to see a recomputation's steps)",
            )
        return _dry_run(project, console, views, full=full)
    period = parse_duration(interval) if interval is not None else config.refresh_interval_s
    if full:
        project.locate_anew()  # (tables a view reads by name: where the catalog has them now)
    catalog = project.catalog  # SQL mistakes are reported before Spark starts
    for name in _orphans(config, catalog):
        console.out(
            f"warning: {name} has tables in the warehouse but is no longer in views/; they are left as "
            "they are"
        )
    if not continuous and not full and not project.stale(views or None):  # answered without Spark
        for warning in project.register_views():  # (Spark starts only for a view not registered yet)
            console.out(f"warning: {warning}")
        console.out("every view is up to date")
        return 0
    if continuous:  # the query needs Spark: start it now, before Ctrl-C is taken over
        started = time.monotonic()
        project.spark  # noqa: B018
        ready = time.monotonic() - started
    # (Otherwise Spark starts when a batch first needs it, if one does: batches on the driver need none.)
    status = _Status(console, profile)
    stops = (
        stop_on_signal(lambda: console.out("stopping after the current batch (Ctrl-C again to stop at once)"))
        if continuous
        else contextlib.nullcontext(lambda: False)
    )
    endpoint = None
    with stops as stopping:  # (from Spark's start on: a SIGTERM while the server starts stops cleanly too)
        try:
            if continuous:
                console.out(f"Spark started in {ready:.1f} s")  # (said once a SIGTERM stops cleanly)
                endpoint = serve(project.spark, config)
                if endpoint is not None:
                    console.out(
                        f"serving this Spark to mv query and mv changes at {endpoint.url} (loopback only)"
                    )
            if metrics_port is not None:
                status.metrics = _metrics(project, console, metrics_port)
            while True:
                watch = _Watch(config, continuous)
                project.refresh(
                    views or None,
                    full=full,
                    on_batch=status.batch,
                    on_notice=status.notice,
                    stopping=partial(_stop_or_changed, stopping, watch),
                    interval_s=period if continuous else None,
                    wait=wait,
                )
                if not continuous or stopping():
                    break
                status.notice("views/ or conf/ changed: reloading the project")
                project = _reloaded(project, console)
                config, full = project.config, False
        finally:
            status.close()
            stop_serving(config, endpoint)
    if status.batches == 0 and not continuous:
        console.out("every view is up to date")
    return 0


def _stop_or_changed(stopping: Callable[[], bool], watch: _Watch) -> bool:
    """Stop when asked, or when the views or the config changed (the loop then plans the refresh anew)."""
    return stopping() or watch.changed()


class _Watch:
    """With `--continuous`, whether the project's files changed since the refresh started (to pick up added,
    changed and removed views); looked at most twice a second."""

    def __init__(self, config: Config, active: bool) -> None:
        self.config = config
        self.active = active
        self.signature = _project_files(config) if active else ()
        self._next = 0.0
        self._changed = False

    def changed(self) -> bool:
        if self.active and not self._changed and time.monotonic() >= self._next:
            self._next = time.monotonic() + 0.5
            self._changed = _project_files(self.config) != self.signature
        return self._changed


def _project_files(config: Config) -> tuple:
    """What `--continuous` watches to pick up added, changed and removed views: the SQL files and the config."""
    files = []
    for root in (config.views_dir, config.project_dir / "conf"):
        for folder, _, names in os.walk(root):
            for name in sorted(names):
                path = os.path.join(folder, name)
                with contextlib.suppress(OSError):
                    stat = os.stat(path)
                    files.append((path, stat.st_mtime_ns, stat.st_size))
    return tuple(sorted(files))


def _reloaded(project: Project, console: Console) -> Project:
    """The project read again (same Spark session); while its SQL or config has a mistake, the mistake is
    printed and the files are watched until they change again."""
    while True:
        signature = _project_files(project.config)
        try:
            fresh = Project.open(project.config.project_dir, spark=project.spark)
            fresh.catalog  # noqa: B018 (parse and plan now)
            return fresh
        except MvError as e:
            console.out(f"error: {e} (fix it and save: the refresh resumes)")
        while _project_files(project.config) == signature:
            time.sleep(0.5)


class _Status:
    """Batch lines as they commit; on a terminal, a spinner naming what is being worked on."""

    def __init__(self, console: Console, profile: bool) -> None:
        self.console = console
        self.profile = profile
        self.batches = 0
        self.metrics: BatchMetrics | None = None  # --metrics-port: this process's counts
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
        if self.metrics is not None:
            self.metrics.batch(report)
        for line in [report.line()] + ([report.profile()] if self.profile else []):
            self.notice(line)

    def notice(self, line: str) -> None:
        if self._rich is not None:
            self._rich.print(line, markup=False)  # above the spinner, not through it
        else:
            self.console.out(line)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()


def _metrics(project: Project, console: Console, port: int) -> BatchMetrics:
    """Serve /metrics on loopback: the warehouse's and this process's (ui/metrics.py)."""
    registry = registry_for(project)
    counts = BatchMetrics(registry)
    try:
        served = serve_metrics(registry, port)
    except OSError as e:
        raise MvError(
            f"cannot serve metrics on 127.0.0.1:{port}: {e.strerror}",
            hint="another program uses that port: give another with --metrics-port (0 picks a free one)",
        ) from None
    console.out(f"serving Prometheus metrics at http://127.0.0.1:{served}/metrics")
    return counts


def _dry_run(project: Project, console: Console, views: list[str], *, full: bool) -> int:
    pending, steps = project.refresh_steps(views or None, full=full)
    if pending is not None:
        cut = ", ".join(f"{n}@{v}" for n, v in sorted(pending.items()))
        console.out(f"first, the pipeline batch left half-done is run again to its cut: {cut}")
    for step in steps:
        console.out(step.line())
    console.out("nothing was written (--dry-run)")
    return 0


def _orphans(config: Config, catalog: Catalog) -> list[str]:
    """Folders of the warehouse that hold a view's snapshot but no longer match a view in views/."""
    options = config.storage_options
    known = {p.view.path.rstrip("/") for p in catalog.plans.values()}
    return [
        name
        for name in list_folders(config.warehouse, options)
        if join_uri(config.warehouse, name) not in known
        and "_delta_log" in list_folders(join_uri(config.warehouse, name, "snapshot"), options)
    ]
