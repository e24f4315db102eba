"""One pipeline batch for all the views of a refresh, and one Structured Streaming query that runs it
continuously (DESIGN.md §4, Execution).

A batch brings every view, in DAG order, to one cut of the sources (a version of each). A view over a view takes
its upstream's changes of the batch from memory (runtime/changes.py). A view moves only when every view it
reads reflects the batch's cut, so every view a batch commits reflects one version of each source, through
every path. A view's batch starts from the versions the view last recorded: a view that lags (new to this set
of views, or left behind by a stop) catches up in the next batch, and one that is ahead (rebuilt at a later
cut) waits for a later batch.

`mv refresh` runs one batch, to the sources' versions when it starts, directly: a streaming query would cost
more to start and stop (~0.6 s) than a small batch costs. `mv refresh --continuous` keeps one query alive over
the version ranges of every source the views read, taken together (storage/stream_reader.py); its
`foreachBatch` runs a batch to the end of each micro-batch's ranges. Either way a batch records its cut
(`_pipeline/cut.json` under the warehouse) before any view moves and marks it done after the last one: a
batch that a crash or a failing view left half-done is run again to exactly that cut by the next refresh,
before anything else, so the views it had not reached finish exactly that batch.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable

from mvengine.errors import MvError
from mvengine.incremental.clock import reads_clock
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.drift import source_drifts
from mvengine.project.layout import CommitRecord, last_commit, view_tables
from mvengine.runtime.background_commits import BackgroundCommits, CommitFailed
from mvengine.runtime.changes import BatchChanges
from mvengine.runtime.crash_points import boundary
from mvengine.runtime.diagnose import cause_of
from mvengine.runtime.event_time import has_timers, now_micros
from mvengine.runtime.expectations import ExpectationFailed
from mvengine.runtime.pipeline_files import CutRecord, pipeline_checkpoint, pipeline_folder
from mvengine.runtime.refresh_plan import (
    DRIFT_HINT,
    blocked_by_drift,
    decide_view,
    next_wakeup,
)
from mvengine.runtime.steps import APPLY, FIRE_TIMERS, RECOMPUTE, SKIP, WAIT, waiting_for
from mvengine.runtime.target_lag import becomes_due, due_views
from mvengine.runtime.view_runner import ViewRunner
from mvengine.storage.api import batch_ranges, stream_version_ranges
from mvengine.storage.tables import logs_read_once

QUERY_NAME = "mvengine_pipeline"


class Pipeline:
    def __init__(
        self,
        views: ViewRunner,
        plans: list[ViewPlan],
        *,
        rebuild: set[str] | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.views = views
        self.ctx = views.ctx
        self.plans = plans
        self.rebuild = set(rebuild or ())  # views to recompute once (--full)
        self.stopping = stopping
        self.sources = self.ctx.sources_of(plans)
        self.checkpoint = pipeline_checkpoint(self.ctx.config.warehouse)
        self.cuts = CutRecord(pipeline_folder(self.ctx.config.warehouse), self.ctx.config.storage_options)
        self._failures: list[BaseException] = []
        self.last_cut: dict[str, int] | None = None  # the cut of the last batch
        self.next_timer: int | None = None  # when rows are next due with no source moved (µs)
        self.interval_us = 0  # --continuous: a batch at most this often for rows due (µs)
        self._lock = threading.Lock()
        self._closing = False

    # -- running the query ----------------------------------------------------------------------------------

    def run_once(self, cut: dict[str, int]) -> None:
        """Finish a batch left half-done (to its own cut), then bring every view to `cut`. A batch that failed
        in a view before the view wrote anything is not run again as it was: `cut`, planned now, goes past the
        versions it failed on, so a fix committed to an input since is picked up."""
        pending = self.cuts.pending()
        if pending is not None:
            self.batch({n: v for n, v in pending.items() if n in self.sources})
        elif (failure := self.cuts.failure()) is not None:
            self.ctx.notice(
                f"the last batch failed in view {failure[0]} before it wrote anything: planned "
                "again, up to the inputs' newest versions"
            )
        if not self.stopping():
            self.batch(cut)

    def batch(self, cut: dict[str, int]) -> None:
        """One pipeline batch, recorded: every view brought to `cut`."""
        self.cuts.begin(cut)
        ctx = self.ctx
        ctx.writing.clear()
        ctx.blocked.clear()
        with logs_read_once():
            # (each batch: another writer may change a source's columns while --continuous runs)
            ctx.drifts = source_drifts(ctx.catalog, self.sources, ctx.config.storage_options)
            self.advance(cut)
        self.cuts.done(cut)
        self.last_cut = dict(cut)
        self.next_timer = self._next_timer()
        if ctx.blocked:  # the other views reflect the cut; these could not
            raise MvError("\n".join(ctx.blocked.values()), hint=DRIFT_HINT)

    def _next_timer(self) -> int | None:
        """The earliest time (µs) a view has rows due with no source moved: rows its EMIT policy holds, rows
        its temporal filters let in or out, or keys its state_ttl expires (refresh_plan.next_wakeup); no
        sooner than one interval from now (a stream's rows leave a temporal filter one after another: a batch
        per interval takes them)."""
        options = self.ctx.config.storage_options
        dues = [
            d
            for plan in self.plans
            if has_timers(plan) or reads_clock(plan.root) or plan.view.state_ttl is not None
            if (
                d := next_wakeup(
                    plan, self.ctx.catalog, last_commit(view_tables(plan, options).snapshot), options
                )
            )
            is not None
        ]
        dues += [  # a view a target_lag held back: when it must be refreshed, with no source moving again
            d * 1000
            for plan in self.plans
            if isinstance(plan.view.target_lag, int)
            if (d := becomes_due(plan, self.ctx.catalog, options, interval_ms=self.interval_us // 1000))
            is not None
        ]
        return max(min(dues), now_micros() + self.interval_us) if dues else None

    def run_continuous(self, interval_s: float, until: Callable[[], bool]) -> None:
        """Keep the query alive, a batch every `interval_s` when a source moved, until `until()` is true; the
        batch under way then finishes first."""
        if not self.sources:
            while not until():
                time.sleep(0.1)
            return
        self.interval_us = int(interval_s * 1_000_000)
        temporary = None
        if self.checkpoint is None:  # a warehouse on an object store (pipeline_files.pipeline_checkpoint)
            self.checkpoint = temporary = tempfile.mkdtemp(prefix="mvengine-query-")
        try:
            query = self._start(self._starting(), interval_s=interval_s)
            self._await(query, until)
        finally:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
                self.checkpoint = None

    def _starting(self) -> dict[str, int]:
        """For a new checkpoint, the versions the query starts after: the oldest any view reflects."""
        starting: dict[str, int] = {}
        for plan in self.plans:
            last = last_commit(view_tables(plan, self.ctx.config.storage_options).snapshot)
            for name in plan.inputs:
                if name in self.sources and last is not None and name in last.inputs:
                    starting[name] = min(starting.get(name, last.inputs[name]), last.inputs[name])
        for name in self.sources:
            if name not in starting:
                starting[name] = self.ctx.source_ref(name).open().version()
        return starting

    def _start(self, starting: dict[str, int], *, interval_s: float):
        spark = self.ctx.spark
        refs = {n: self.ctx.source_ref(n) for n in self.sources}
        stream = stream_version_ranges(spark, refs, starting_versions=starting)
        writer = (
            stream.writeStream.queryName(QUERY_NAME)
            .foreachBatch(self._run)
            .option("checkpointLocation", self.checkpoint)
            .trigger(processingTime=f"{int(interval_s * 1000)} milliseconds")
        )
        started = time.monotonic()
        query = writer.start()
        self.ctx.notice(
            f"pipeline query {query.id} started over {len(refs)} source"
            f"{'' if len(refs) == 1 else 's'} for {len(self.plans)} view"
            f"{'' if len(self.plans) == 1 else 's'} in {int((time.monotonic() - started) * 1000)} ms"
        )
        return query

    def _await(self, query, until: Callable[[], bool]) -> None:
        try:
            while query.isActive and not until():
                query.awaitTermination(0.1)
                if self.next_timer is not None and self.next_timer <= now_micros():
                    self._fire_timers()
        except Exception:
            if self._failures:
                raise self._failures[0] from None
            raise
        finally:
            with self._lock:  # a batch under way ends first; one that starts after this does nothing
                self._closing = True
            query.stop()
            self._closing = False
        if self._failures:
            raise self._failures[0]

    def _fire_timers(self) -> None:
        """A batch at the last cut, when no source moved but held rows are due: a watermark moves only with
        data, an AFTER delay must fire on processing time alone."""
        with self._lock:
            if self._closing or self.last_cut is None:
                return
            self.batch(self.last_cut)

    def _run(self, df, spark_batch: int) -> None:
        with self._lock:
            if self._closing:
                return
            try:
                assert self.checkpoint is not None  # set while the query runs
                ranges = batch_ranges(self.checkpoint, spark_batch)
                self.batch({n: hi for n, (lo, hi) in ranges.items() if n in self.sources})
                boundary("continuous", "batch", "after")
            except BaseException as e:  # kept to re-raise as itself: Spark wraps it in a Java exception
                self._failures.append(e)
                raise

    # -- one batch over the DAG -----------------------------------------------------------------------------

    def advance(self, cut: dict[str, int]) -> None:
        """Bring every view whose inputs allow it to `cut`, in DAG order: each view's step decided
        (steps.decide), then run; the commits of a view computed on the driver run on a thread while the views
        after it are computed, up to the first view that reads it (runtime/background_commits.py)."""
        ctx, views = self.ctx, self.views
        options = ctx.config.storage_options
        changes = BatchChanges(ctx.spark, ctx.policy)
        at_cut: dict[str, int] = {}  # view -> its snapshot version, once it reflects the cut
        # Under --continuous (not its first batch, which brings every view to the cut), the views their
        # target_lag lets wait (runtime/target_lag.py).
        due = (
            due_views(
                self.plans,
                ctx.catalog,
                options,
                now_ms=now_micros() // 1000,
                interval_ms=self.interval_us // 1000,
            )
            if self.interval_us and any(p.view.target_lag is not None for p in self.plans)
            else {}
        )
        commits = ctx.policy.background_commits
        ctx.commits = BackgroundCommits(commits) if commits > 0 else None
        attempts: dict[str, tuple[ViewPlan, CommitRecord | None, str]] = {}  # view -> (plan, last, during)
        try:
            try:
                views.expectations.before_batch(self.plans, cut, changes)
            except ExpectationFailed as e:
                self.cuts.fail(cut, e.view, str(e))  # nothing written: the next refresh plans its batch anew
                raise
            for plan in self.plans:
                self._committed(plan.inputs, cut, attempts)  # it reads them as they are once committed
                facts = views.facts(plan)
                if waiting_for(facts, cut, at_cut):
                    continue  # an input is not at this cut (yet)
                problem = blocked_by_drift(plan, ctx.catalog, ctx.drifts)
                if problem is not None:
                    ctx.blocked[plan.name] = problem  # (reported when the batch ends: the others go on)
                    continue
                tables = view_tables(plan, options)
                last = last_commit(tables.snapshot)
                targets = {n: cut[n] if n in cut else at_cut[n] for n in plan.inputs}
                during = (
                    f"batch {0 if last is None else last.batch_id + 1} (inputs "
                    + ", ".join(f"{n}@{v}" for n, v in targets.items())
                    + ")"
                )
                attempts[plan.name] = (plan, last, during)
                rebuild = plan.name in self.rebuild
                try:
                    if not rebuild:
                        views.check_same_sources(plan, last)
                    step = decide_view(
                        plan, ctx.catalog, facts, last, cut, at_cut, rebuild=rebuild, options=options
                    )
                    if step.action == WAIT:
                        continue  # rebuilt at a later cut: the query has not reached it yet
                    if step.action in (APPLY, RECOMPUTE, FIRE_TIMERS) and not due.get(plan.name, True):
                        continue  # within its target_lag: a later batch takes these changes with more
                    if step.action != SKIP:
                        views.guarded(plan, views.run, plan, step, changes, during=during)
                except Exception as e:
                    self._committed(None, cut, attempts)  # (a view before it whose commit failed: that first)
                    cause = self._failed(plan, last, cut, during, e)
                    if cause is not None:
                        raise cause from e
                    raise
                self.rebuild.discard(plan.name)
                output = changes.outputs.get(plan.name)
                at_cut[plan.name] = output.version if output is not None else tables.snapshot.open().version()
            self._committed(None, cut, attempts)
        finally:
            if ctx.commits is not None:
                ctx.commits.close()
                ctx.commits = None
            changes.release()

    def _committed(
        self,
        views: Iterable[str] | None,
        cut: dict[str, int],
        attempts: dict[str, tuple[ViewPlan, CommitRecord | None, str]],
    ) -> None:
        """Wait for the commits of `views` (None: every view's) that run on threads (background_commits.py);
        one that failed fails the batch as its view's failure."""
        if self.ctx.commits is None:
            return
        try:
            self.ctx.commits.wait(views)
        except CommitFailed as failed:
            if not isinstance(failed.error, Exception):
                raise failed.error from None
            plan, last, during = attempts[failed.view]
            error = self.views.attributed(plan, failed.error, during)
            raise self._failed(plan, last, cut, during, error) or error from failed.error

    def _failed(
        self, plan: ViewPlan, last: CommitRecord | None, cut: dict[str, int], during: str, error: Exception
    ) -> MvError | None:
        """What to raise instead of `error`, which stopped the view's batch (None: `error` itself). A view that
        wrote nothing is recorded as the batch's failure: the next refresh plans its batch anew."""
        cause = cause_of(self.ctx, plan, last, cut, during, error)
        if plan.name not in self.ctx.writing:
            self.cuts.fail(cut, plan.name, str(cause or error))
        return cause
