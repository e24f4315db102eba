"""Refreshing views: bootstrap, incremental batches over the inputs' change feeds, and full recomputation.

A refresh runs one Structured Streaming query over the version ranges of every source the views read
(runtime/pipeline.py); each micro-batch brings every view, in DAG order, to the batch's cut of the sources
(DESIGN.md §4). What a view does in a batch is decided as a step (runtime/steps.py): a new view, a view whose
SQL changed, or `--full` is computed from its inputs (a new *generation*, runtime/recompute.py); an incremental
view applies its delta rule to its inputs' changes since the versions it reflects (runtime/apply_changes.py; a
view over a view takes its upstream's changes of this batch from memory); a full-refresh view is recomputed
when an input moved. Every batch writes the view's state, snapshot and changelog (runtime/commit.py), each with
the application transaction (view generation, batch id), so a batch replayed after a crash skips what it already
committed and recomputes the rest from the pre-batch versions (time travel).

This module holds the refresh as a whole: the lock, the sources, finishing interrupted batches, the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from mvengine.config import Config
from mvengine.errors import MvError
from mvengine.incremental.driver_expressions import set_session_time_zone
from mvengine.project.catalog import Catalog
from mvengine.project.drift import source_drifts
from mvengine.project.layout import view_tables
from mvengine.runtime.batch_report import BatchReport
from mvengine.runtime.changes import BatchChanges
from mvengine.runtime.context import RefreshContext
from mvengine.runtime.lock import refresh_lock
from mvengine.runtime.pipeline import Pipeline
from mvengine.runtime.pipeline_files import pipeline_folder
from mvengine.runtime.refresh_plan import DRIFT_HINT, blocked_by_drift, interrupted, prepare_sources
from mvengine.runtime.view_runner import ViewRunner

__all__ = ["BatchReport", "Refresher", "view_tables"]


@dataclass
class Refresher:
    spark: SparkSession  # or a SparkOnDemand standing in for one (started by the first batch needing Spark)
    config: Config
    catalog: Catalog
    report: Callable[[BatchReport], None] = lambda r: None
    stopping: Callable[[], bool] = lambda: False
    notice: Callable[[str], None] = lambda line: None  # what is not a view's batch (the query's start)
    wait: bool = False  # for another process's refresh of the warehouse to end, instead of failing (lock.py)
    _sources_ready: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        # The driver computes as the Spark session this project's config makes would (session.py).
        set_session_time_zone(self.config.spark_conf.get("spark.sql.session.timeZone", "UTC"))
        self.views = ViewRunner(
            RefreshContext(self.spark, self.config, self.catalog, report=self.report, notice=self.notice)
        )

    def refresh(
        self, names: list[str] | None = None, *, full: bool = False, interval_s: float | None = None
    ) -> None:
        """Bring the views to one consistent cut: the sources' versions when the refresh starts. Every view
        then reflects the same version of every source it depends on, however many paths lead there. With
        `interval_s`, then keep them fresh (one query, a batch per interval when a source moved) until
        `stopping()`; a stop always lets the batch under way finish, so every view is left at one cut."""
        plans = self.catalog.views_to_refresh(names)
        self.prepare_sources(create=False)  # a source's mistake is reported before anything is written
        self._refuse_all_blocked(plans)
        lost: list[str] = []  # why the lock was taken over while held (lock.Lease): stop after the batch
        with refresh_lock(
            pipeline_folder(self.config.warehouse),
            [p.name for p in plans],
            wait=self.wait,
            waiting=self.notice,
            lost=lost.append,
            storage_options=self.config.storage_options,
        ):
            self.prepare_sources()
            for plan in plans:
                step = interrupted(plan, self.config.storage_options)
                if step is not None:
                    changes = BatchChanges(self.spark, self.config.policy)
                    try:
                        self.views.guarded(plan, self.views.run, plan, step, changes)
                    finally:
                        changes.release()
            stopping = lambda: self.stopping() or bool(lost)  # noqa: E731
            pipeline = Pipeline(
                self.views, plans, rebuild={p.name for p in plans} if full else set(), stopping=stopping
            )
            pipeline.run_once(self.source_cut(plans))
            if interval_s is not None and not stopping():
                pipeline.run_continuous(interval_s, stopping)
        if lost:
            raise MvError(
                lost[0],
                hint="this refresh stopped after its last batch; a refresh whose lease runs "
                "out was cut off from the object store, or paused, for over a minute",
            )

    def _refuse_all_blocked(self, plans) -> None:
        """When a source's dropped or retyped column stops every view asked for (directly, or through the views
        it reads), say so before anything is written; when some can go on, the pipeline refreshes those and
        reports the others after its batch."""
        ctx = self.views.ctx
        drifts = source_drifts(self.catalog, ctx.sources_of(plans), self.config.storage_options)
        problems: dict[str, str] = {}
        stopped: set[str] = set()
        for plan in plans:
            problem = blocked_by_drift(plan, self.catalog, drifts)
            if problem is not None:
                problems[plan.name] = problem
            if problem is not None or stopped & set(plan.inputs):
                stopped.add(plan.name)
        if plans and stopped == {p.name for p in plans}:
            raise MvError("\n".join(problems.values()), hint=DRIFT_HINT)

    def source_cut(self, plans) -> dict[str, int]:
        """The current version of every source the views read."""
        ctx = self.views.ctx
        return {n: ctx.source_ref(n).open().version() for n in ctx.sources_of(plans)}

    def prepare_sources(self, *, create: bool = True) -> None:
        """Check every source table, and create those missing (with `create`)."""
        if not self._sources_ready:
            prepare_sources(self.config, self.catalog, create=create)
            self._sources_ready = create
