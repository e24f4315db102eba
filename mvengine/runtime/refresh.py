"""Refreshing views: bootstrap, incremental batches over the inputs' change feeds, and full recomputation.

A refresh runs one Structured Streaming query over the version ranges of every source the views read
(runtime/pipeline.py); each micro-batch brings every view, in DAG order, to the batch's cut of the sources
(DESIGN.md §4). Here is what one view does in a batch: a new view, a view whose SQL changed, or `--full` is
computed from its inputs (a new *generation*); an incremental view applies its delta rule to its inputs'
changes since the versions it reflects (a view over a view takes its upstream's changes of this batch from
memory); a full-refresh view is recomputed when an input moved. Every batch writes the view's state, snapshot
and changelog, each with the application transaction (view generation, batch id), so a batch replayed after a
crash skips what it already committed and recomputes the rest from the pre-batch versions (time travel).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import reduce

import pyarrow as pa
from deltalake.exceptions import DeltaError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mvengine.config import Config, join_uri
from mvengine.errors import MvError, StorageError
from mvengine.incremental.batch import Batch
from mvengine.incremental.compiler import supports, view_delta, view_delta_on_driver
from mvengine.incremental.driver import DriverBatch, conform, read_before
from mvengine.incremental.driver_expressions import NotOnDriver, set_session_time_zone
from mvengine.incremental.driver_support import not_on_driver
from mvengine.incremental.state import StateStore
from mvengine.incremental.zset import MTIME, WEIGHT, inserts
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.catalog import Catalog
from mvengine.project.layout import (
    Committed,
    ViewTables,
    app_id,
    last_commit,
    source_quarantine,
    source_table,
    view_tables,
)
from mvengine.runtime.changes import DRIVER_CHANGE_ROWS, BatchChanges, InputChanges, ViewOutput
from mvengine.runtime.crash_points import boundary
from mvengine.runtime.emit import EMIT_STATE, ViewChanges, changes_on_driver, view_changes
from mvengine.runtime.event_time import (
    WATERMARK,
    Watermarks,
    batch_watermarks,
    has_event_time,
    hold_back,
    late_cutoff,
    late_rows,
    next_due,
    now_micros,
    purge_conditions,
    watermark_passed,
    with_emit_timing,
)
from mvengine.runtime.expectations import EXPECTATIONS, Checks, ExpectationFailed, Outcome, inserted
from mvengine.runtime.freshness import sql_hash
from mvengine.runtime.lock import refresh_lock
from mvengine.runtime.pipeline import Pipeline
from mvengine.runtime.pipeline_files import pipeline_folder
from mvengine.runtime.profile import Phase, Profile
from mvengine.runtime.session import SparkOnDemand
from mvengine.sql.expectations import kept_rows
from mvengine.storage.api import (
    DELETE_MARK,
    arrow_schema,
    merge_into,
    read_table,
    remove_folder,
    replace_rows,
    write_table,
)
from mvengine.storage.objects import list_folders
from mvengine.storage.sources import ensure_source_table
from mvengine.storage.tables import (
    TableRef,
    commit_metadata,
    is_committed,
    table_rows,
    version_before,
)

# A batch of at most this many input changes (and changelog rows) writes its state, snapshot and changelog
# from the driver, collected as Arrow: Spark write jobs cost more than the work for small batches.
DRIVER_ROWS = 500_000


@dataclass
class BatchReport:
    view: str
    batch_id: int
    kind: str
    inputs: dict[str, int]
    rows_in: int | None  # None for a recomputation, which reads whole inputs
    rows_out: int
    millis: int
    note: str = ""
    phases: list[Phase] = field(default_factory=list)  # where the time went (runtime/profile.py)
    engine: str = "spark"  # "driver" when the batch was computed on the driver (incremental/driver.py)
    expectations: list[Outcome] = field(default_factory=list)  # of its sources' and its own (expectations.py)

    def line(self) -> str:
        versions = ", ".join(f"{n}@{v}" for n, v in self.inputs.items())
        failed = [
            f"{o.table}.{o.name} {o.failed} of {o.checked} failed ({o.on_violation})"
            for o in self.expectations
            if o.failed
        ]
        note = "; ".join(n for n in (self.note, "expectations: " + ", ".join(failed) if failed else "") if n)
        note = f"  ({note})" if note else ""
        work = "recomputed" if self.rows_in is None else f"{self.rows_in} changes in"
        where = " on the driver" if self.engine == "driver" else ""
        return (
            f"{self.view}: batch {self.batch_id} [{self.kind}] inputs {versions}: {work}, "
            f"{self.rows_out} changelog rows out, {self.millis} ms{where}{note}"
        )

    def profile(self) -> str:
        """The batch's phases, one line: `mv refresh --profile` prints it under the batch line."""
        return "  phases: " + ", ".join(p.text() for p in self.phases)


@dataclass
class Refresher:
    spark: SparkSession  # or a SparkOnDemand standing in for one (started by the first batch needing Spark)
    config: Config
    catalog: Catalog
    report: Callable[[BatchReport], None] = lambda r: None
    stopping: Callable[[], bool] = lambda: False
    notice: Callable[[str], None] = lambda line: None  # what is not a view's batch (the query's start)
    wait: bool = False  # for another process's refresh of the warehouse to end, instead of failing (lock.py)
    writing: set[str] = field(
        default_factory=set, init=False
    )  # views whose writes began in this pipeline batch
    _sources_ready: bool = field(default=False, init=False)
    _driver_reasons: dict[str, str | None] = field(default_factory=dict, init=False)  # see _driver_capable
    _checks: Checks | None = field(default=None, init=False)  # expectations: one GX context per refresher
    _batch_ms: dict[str, int] = field(default_factory=dict, init=False)  # as the snapshot commit records it

    def __post_init__(self) -> None:
        # The driver computes as the Spark session this project's config makes would (session.py).
        set_session_time_zone(self.config.spark_conf.get("spark.sql.session.timeZone", "UTC"))

    # -- what to refresh ------------------------------------------------------------------------------------

    def refresh(
        self, names: list[str] | None = None, *, full: bool = False, interval_s: float | None = None
    ) -> None:
        """Bring the views to one consistent cut: the sources' versions when the refresh starts. Every view
        then reflects the same version of every source it depends on, however many paths lead there. With
        `interval_s`, then keep them fresh (one query, a batch per interval when a source moved) until
        `stopping()`; a stop always lets the batch under way finish, so every view is left at one cut."""
        plans = self.catalog.views_to_refresh(names)
        self.prepare_sources(create=False)  # a source's mistake is reported before anything is written
        lost: list[str] = []  # why the lock was taken over while held (lock.Lease): stop after the batch
        asked_to_stop = self.stopping
        self.stopping = lambda: asked_to_stop() or bool(lost)
        try:
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
                    self.guarded(plan, self.finish_interrupted, plan)
                pipeline = Pipeline(self, plans, rebuild={p.name for p in plans} if full else set())
                pipeline.run_once(self.source_cut(plans))
                if interval_s is not None and not self.stopping():
                    pipeline.run_continuous(interval_s, self.stopping)
        finally:
            self.stopping = asked_to_stop
        if lost:
            raise MvError(
                lost[0],
                hint="this refresh stopped after its last batch; a refresh whose lease runs "
                "out was cut off from the object store, or paused, for over a minute",
            )

    def guarded(
        self, plan: ViewPlan, work: Callable[..., object], *args: object, during: str = "", **kwargs: object
    ) -> None:
        """Run a view's work, its failures attributed to it and to the batch it was `during` (_view_error)."""
        try:
            work(*args, **kwargs)
        except MvError:
            raise
        except Exception as e:
            error = _view_error(plan, e, during)
            if error is e:
                raise
            raise error from e

    def source_cut(self, plans: list[ViewPlan]) -> dict[str, int]:
        """The current version of every source the views read."""
        return {n: self.source_ref(n).open().version() for n in self.sources_of(plans)}

    def sources_of(self, plans: list[ViewPlan]) -> list[str]:
        return sorted({n for plan in plans for n in plan.inputs if n in self.catalog.sources})

    def source_ref(self, name: str) -> TableRef:
        return source_table(self.catalog.sources[name], self.config.storage_options)

    def prepare_sources(self, *, create: bool = True) -> None:
        """Check every source table, and create those missing (with `create`)."""
        if self._sources_ready:
            return
        for source in self.catalog.sources.values():
            ensure_source_table(
                source_table(source, self.config.storage_options),
                source.schema,
                declared_at=f"{source.file}:{source.line}",
                create=create,
                path_declared=source.path_declared,
            )
        self._sources_ready = create

    def input_refs(self, plan: ViewPlan) -> dict[str, TableRef]:
        refs = {}
        for name in plan.inputs:
            if name in self.catalog.sources:
                refs[name] = self.source_ref(name)
            else:
                refs[name] = view_tables(self.catalog.plans[name], self.config.storage_options).snapshot
                if not refs[name].exists():
                    raise MvError(
                        f"view {plan.name} reads view {name}, which has not been refreshed yet",
                        hint=f"run mv refresh {name} first (mv refresh refreshes in dependency order)",
                    )
        return refs

    # -- one view -------------------------------------------------------------------------------------------

    def finish_interrupted(self, plan: ViewPlan) -> None:
        """A process that stopped between a batch's snapshot and its changelog left the batch half-written:
        finish it, from the versions it started at to those it recorded."""
        tables = view_tables(plan, self.config.storage_options)
        last = last_commit(tables.snapshot)
        if last is None or is_committed(tables.changelog, app_id(plan.name, last.generation), last.batch_id):
            return
        incremental = plan.strategy == "incremental" and supports(plan.root)
        note = "finishing an interrupted batch"
        if last.kind != "stream":
            self._recompute(
                plan,
                tables,
                last.generation,
                last.batch_id,
                last.kind,
                incremental,
                last.inputs,
                resuming=True,
                note=note,
            )
            return
        dt = tables.snapshot.open()
        before = Committed.from_info(tables.snapshot, commit_metadata(dt, last.version - 1))
        changes = BatchChanges(self.spark)
        try:
            self.apply_changes(
                plan,
                tables,
                last.generation,
                last.batch_id,
                before.inputs,
                last.inputs,
                changes,
                note=note,
                finishing=True,
            )
        finally:
            changes.release()

    def advance(
        self,
        plan: ViewPlan,
        last: Committed | None,
        targets: dict[str, int],
        changes: BatchChanges,
        *,
        rebuild: bool = False,
    ) -> None:
        """Bring one view from its `last` commit to `targets` (its inputs' versions: sources at the batch's cut,
        upstream views where this batch left them)."""
        tables = view_tables(plan, self.config.storage_options)
        digest = sql_hash(plan)
        incremental = plan.strategy == "incremental" and supports(plan.root)
        upstream_rebuilt = last is not None and any(
            last.inputs.get(n, -1) > v for n, v in targets.items() if n in self.catalog.plans
        )
        if last is None or last.sql_hash != digest or rebuild or upstream_rebuilt:
            note = (
                "new view"
                if last is None
                else "SQL changed: rebuilt from the inputs"
                if last.sql_hash != digest
                else "--full: recomputed from the inputs"
                if rebuild
                else "an upstream view started over: rebuilt from the inputs"
            )
            if last is not None and self._columns_changed(plan, tables):
                note += "; its columns changed, so its snapshot and changelog start over"
                for ref in (tables.snapshot, tables.changelog):
                    if ref.exists():
                        remove_folder(ref)
                remove_folder(TableRef(tables.state, self.config.storage_options))
                last = None
            generation = 0 if last is None else last.generation + 1
            batch_id = 0 if last is None else last.batch_id + 1
            self._recompute(
                plan,
                tables,
                generation,
                batch_id,
                "bootstrap" if incremental else "full",
                incremental,
                targets,
                note=note,
            )
        elif any(last.inputs.get(n) != v for n, v in targets.items()):
            if incremental:
                self.apply_changes(
                    plan, tables, last.generation, last.batch_id + 1, last.inputs, targets, changes
                )
            else:
                checked = self._check_sources(
                    plan,
                    {n: (last.inputs.get(n, -1), v) for n, v in targets.items()},
                    last.batch_id + 1,
                    changes,
                )
                self._recompute(
                    plan, tables, last.generation, last.batch_id + 1, "full", False, targets, checked=checked
                )
        elif (
            incremental
            and (due := next_due(plan, tables.state, self.config.storage_options)) is not None
            and due <= now_micros()
        ):
            # No input moved, but rows the EMIT policy held are due (AFTER <interval>): a batch of no changes
            self.apply_changes(
                plan,
                tables,
                last.generation,
                last.batch_id + 1,
                last.inputs,
                targets,
                changes,
                note="rows held by its EMIT policy are due",
            )

    def check_same_sources(self, plan: ViewPlan, last: Committed | None) -> None:
        """A source deleted and created anew since the view last read it (another table id, or fewer versions
        than the view reflects) is another table: its versions cannot be diffed against the view's."""
        if last is None:
            return
        for name in plan.inputs:
            if name not in self.catalog.sources or name not in last.inputs:
                continue
            ref = self.source_ref(name)
            dt = ref.open()
            recorded, now = last.input_ids.get(name), dt.metadata().id
            if (recorded is not None and recorded != now) or last.inputs[name] > dt.version():
                raise MvError(
                    f"source {name} ({ref.uri}) was deleted and created again since view {plan.name} last read it "
                    f"at version {last.inputs[name]} (table id {recorded or 'not recorded'}, now {now}, at version "
                    f"{dt.version()}): the view describes the old table, so nothing was written",
                    hint=f"mv refresh --full {plan.name} recomputes the view (and the views over it) from the new "
                    "table; if the table was replaced by mistake, restore the old one at that path",
                )

    def _columns_changed(self, plan: ViewPlan, tables: ViewTables) -> bool:
        names = [f.name for f in tables.snapshot.open().schema().fields]
        return names != [c.name for c in plan.columns]

    # -- recomputation (bootstrap of incremental views, every batch of full-refresh views) -----------------

    def _recompute(
        self,
        plan: ViewPlan,
        tables: ViewTables,
        generation: int,
        batch_id: int,
        kind: str,
        incremental: bool,
        versions: dict[str, int],
        *,
        resuming: bool = False,
        note: str = "",
        checked: list[Outcome] | None = None,
    ) -> None:
        """Compute the view anew from its inputs at `versions`, and commit it as a batch. Its sources'
        expectations are checked on their whole tables, unless `checked` holds their outcomes over the batch's
        changes (a batch that recomputes instead of applying them)."""
        started = time.monotonic()
        self._start_spark()
        refs = self.input_refs(plan)
        application = app_id(plan.name, generation)
        mtime = F.lit(_latest_commit_time(refs, versions)).cast("timestamp")
        if kind == "bootstrap" and not resuming:
            # A new generation starts from no operator state (the emit revisions of the view's keys stay).
            for name in list_folders(tables.state, self.config.storage_options):
                if name != EMIT_STATE:
                    remove_folder(TableRef(join_uri(tables.state, name), self.config.storage_options))
        state = StateStore(
            self.spark,
            tables.state,
            self.config.storage_options,
            application,
            batch_id,
            fresh=(kind == "bootstrap"),
            persistent=frozenset({EMIT_STATE}),
            on_driver=_rows_within(refs, versions, DRIVER_ROWS),
        )
        batch = Batch(self.spark, {}, state)
        profile = Profile(self.spark)
        try:
            with profile.phase("plan inputs"):
                snapshot_before = _version_before(tables.snapshot, application, batch_id)
                marks = batch_watermarks(plan, self.catalog, refs, versions, tables.snapshot, snapshot_before)
                outcomes = (
                    list(checked)
                    if checked is not None
                    else self._check_sources(plan, {n: (-1, v) for n, v in versions.items()}, batch_id)
                )
                unfiltered: list[DataFrame] = []
                if incremental:
                    batch.changes = {
                        n: inserts(read_table(self.spark, r, version=versions[n]), mtime)
                        for n, r in refs.items()
                    }
                    new_rows = view_delta(
                        plan.root, batch, unfiltered=unfiltered.append if plan.drops_own else None
                    )
                else:
                    computed = self._compute(plan, refs, versions)
                    unfiltered.append(inserts(computed, mtime))
                    new_rows = inserts(self._kept(plan, computed), mtime)
                outcomes += self._check_view(
                    plan,
                    tables,
                    batch_id,
                    unfiltered[0] if unfiltered else new_rows,
                    recomputed=True,
                    after=lambda: inserted(new_rows),
                )
                if plan.view.emit is not None and incremental:  # (re)built: nothing of it is late yet
                    fresh = Watermarks(None, marks.after if marks else None)
                    new_rows = self.spark.createDataFrame(
                        hold_back(plan, new_rows.toArrow(), state, fresh), schema=new_rows.schema
                    )
                elif plan.view.emit is not None:
                    new_rows = new_rows.where(watermark_passed(plan, marks))
                changes = new_rows
                if snapshot_before is not None:
                    old = read_table(self.spark, tables.snapshot, version=snapshot_before)
                    changes = changes.unionByName(
                        old.select("*", F.lit(-1).cast("long").alias(WEIGHT), mtime.alias(MTIME))
                    )
            with profile.phase("compute changes"):
                out = view_changes(
                    plan,
                    changes,
                    batch,
                    snapshot=tables.snapshot,
                    snapshot_before=snapshot_before,
                    batch_id=batch_id,
                )
                out.changelog = with_emit_timing(out.changelog, plan, marks)
            self._commit(
                plan,
                tables,
                state,
                out,
                app_id=application,
                batch_id=batch_id,
                generation=generation,
                kind=kind,
                inputs=versions,
                profile=profile,
                marks=marks,
                outcomes=outcomes,
                started=started,
            )
            rows_out = out.rows
        finally:
            batch.release()
        self.report(
            BatchReport(
                plan.name,
                batch_id,
                kind,
                versions,
                None,
                rows_out,
                self._recorded_ms(plan, started),
                note,
                profile.phases,
                expectations=outcomes,
            )
        )

    def _compute(self, plan: ViewPlan, refs: dict[str, TableRef], versions: dict[str, int]) -> DataFrame:
        """The view's query run by Spark over its inputs at the given versions (a source without the rows its
        DROP ROW / QUARANTINE expectations fail, as the plan's filters over it say)."""
        for name, ref in refs.items():
            rows = read_table(self.spark, ref, version=versions[name])
            source = self.catalog.sources.get(name)
            kept = kept_rows(source.expectations) if source is not None else None
            (rows if kept is None else rows.where(kept.sql("spark"))).createOrReplaceTempView(name)
        return self.spark.sql(plan.spark_sql).toDF(*[c.name for c in plan.columns])

    def _kept(self, plan: ViewPlan, rows: DataFrame) -> DataFrame:
        """The view's rows its own DROP ROW / QUARANTINE expectations leave (as its plan's root filter does)."""
        kept = kept_rows(plan.view.expectations)
        return rows if kept is None else rows.where(kept.sql("spark"))

    # -- incremental batches --------------------------------------------------------------------------------

    def apply_changes(
        self,
        plan: ViewPlan,
        tables: ViewTables,
        generation: int,
        batch_id: int,
        versions_before: dict[str, int],
        targets: dict[str, int],
        changes: BatchChanges,
        *,
        note: str = "",
        finishing: bool = False,
    ) -> None:
        """One incremental batch of the view: its delta rule over its inputs' changes from `versions_before`
        to `targets` (`finishing`: a batch whose snapshot is committed, never recomputed instead), computed on
        the driver when it is small and the driver computes it exactly (incremental/driver.py), else by Spark.
        Its own changes join `changes.outputs`, for the views downstream; the batch's DataFrames live until
        the pipeline batch ends (`changes.release`)."""
        started = time.monotonic()
        refs = self.input_refs(plan)
        application = app_id(plan.name, generation)
        profile = Profile(self.spark)
        ranges = {n: (versions_before[n], targets[n]) for n in plan.inputs}
        most = self.config.driver_max_changes
        capable = self._driver_capable(plan)
        with profile.phase("read changes"):
            inputs = changes.read(
                {n: (refs[n], lo, hi) for n, (lo, hi) in ranges.items()},
                driver_rows=most if capable else DRIVER_CHANGE_ROWS,
            )
            self._check_claims(plan, inputs, ranges)
        outcomes: list[Outcome] = []
        if self._expects(plan):
            with profile.phase("expectations", spark=False):
                outcomes = self._check_sources(plan, ranges, batch_id, changes, inputs)
        rows_in = sum(c.rows for c in inputs.values())
        driver = capable and rows_in <= most
        reason = "" if finishing else self._recompute_instead(plan, refs, targets, rows_in, driver)
        if reason:
            self._recompute(
                plan,
                tables,
                generation + 1,
                batch_id,
                "bootstrap",
                True,
                targets,
                note=reason,
                checked=outcomes,
            )
            return
        snapshot_before = _version_before(tables.snapshot, application, batch_id)
        # Inputs with changes: a version that changed no row (a view's batch that committed nothing new) moves
        # nothing, so the join terms over the other inputs' rows before it are not read.
        moved = frozenset(n for n, (lo, hi) in ranges.items() if hi > lo and inputs[n].rows)
        marks = None
        if has_event_time(plan, self.catalog):
            with profile.phase("watermark", spark=False):
                marks = batch_watermarks(plan, self.catalog, refs, targets, tables.snapshot, snapshot_before)
        computed = (
            self._on_driver(
                plan,
                tables,
                inputs,
                refs,
                ranges,
                moved,
                application,
                batch_id,
                snapshot_before,
                profile,
                marks,
            )
            if driver
            else None
        )
        engine = "spark" if computed is None else "driver"
        if computed is None:
            computed = self._in_spark(
                plan,
                tables,
                inputs,
                refs,
                ranges,
                moved,
                application,
                batch_id,
                snapshot_before,
                profile,
                changes,
                marks,
            )
        out, state, unfiltered = computed
        if plan.view.expectations:
            with profile.phase("expectations", spark=engine == "spark"):
                outcomes += self._check_view(
                    plan,
                    tables,
                    batch_id,
                    unfiltered,
                    after=lambda: self._table_after(tables, snapshot_before, out.zset),
                )
        out.changelog = with_emit_timing(out.changelog, plan, marks)
        self._commit(
            plan,
            tables,
            state,
            out,
            app_id=application,
            batch_id=batch_id,
            generation=generation,
            kind="stream",
            inputs=targets,
            profile=profile,
            spark=engine == "spark",
            marks=marks,
            outcomes=outcomes,
            started=started,
            rows_in=rows_in,
        )
        version_before = -1 if snapshot_before is None else snapshot_before
        zset = out.zset
        output = (
            InputChanges(self.spark, out.rows, out.retractions, arrow=zset)
            if isinstance(zset, pa.Table)
            else InputChanges(self.spark, out.rows, out.retractions, _frame=zset)
        )
        changes.outputs[plan.name] = ViewOutput(version_before, version_before + 1, output)
        note = "; ".join(n for n in (note, *profile.notes) if n)
        self.report(
            BatchReport(
                plan.name,
                batch_id,
                "stream",
                targets,
                rows_in,
                out.rows,
                self._recorded_ms(plan, started),
                note,
                profile.phases,
                engine,
                expectations=outcomes,
            )
        )

    def _start_spark(self) -> None:
        """Spark's functions need a running session: start it (if it waits for its first use) before them."""
        if isinstance(self.spark, SparkOnDemand):
            self.spark.session()

    def _recorded_ms(self, plan: ViewPlan, started: float) -> int:
        """The batch's time as its snapshot commit records it (`mv status`'s ms): from its start until the new
        version is committed, readable; the changelog's commit comes after."""
        return self._batch_ms.pop(plan.name, None) or self._millis_since(started)

    def _millis_since(self, started: float) -> int:
        """A batch's time, without Spark's start when the batch was the one that started it (a line of its own,
        runtime/session.SparkOnDemand)."""
        elapsed = time.monotonic() - started
        spark_started = getattr(self.spark, "started_at", None)
        if spark_started is not None and spark_started >= started:
            elapsed -= getattr(self.spark, "start_seconds", 0.0)
        return int(elapsed * 1000)

    def _driver_capable(self, plan: ViewPlan) -> bool:
        """Whether the view's small batches can be computed on the driver (its operators and expressions
        are all in what the driver computes exactly as Spark does)."""
        if plan.name not in self._driver_reasons:
            self._driver_reasons[plan.name] = not_on_driver(plan.root)
        return self._driver_reasons[plan.name] is None

    def _on_driver(
        self,
        plan: ViewPlan,
        tables: ViewTables,
        inputs: dict[str, InputChanges],
        refs: dict[str, TableRef],
        ranges: dict[str, tuple[int, int]],
        moved: frozenset[str],
        application: str,
        batch_id: int,
        snapshot_before: int | None,
        profile: Profile,
        marks: Watermarks | None,
    ) -> tuple[ViewChanges, StateStore, pa.Table] | None:
        """The batch computed on the driver, and the view's changes before its own expectations' filter; None
        (nothing staged) when it must go to Spark."""
        arrows = {n: c.on_driver(self.config.driver_max_changes) for n, c in inputs.items()}
        if any(a is None for a in arrows.values()):
            return None
        state = StateStore(
            self.spark,
            tables.state,
            self.config.storage_options,
            application,
            batch_id,
            fresh=False,
            on_driver=True,
        )
        batch = DriverBatch(
            arrows,
            state,
            before=self._driver_reader(refs, ranges),
            moved=moved,
            late_before=late_cutoff(plan, marks),
        )
        state.purge = purge_conditions(plan, batch.late_before)
        try:
            with profile.phase("delta rule", spark=False):
                unfiltered: list[pa.Table] = []
                zset = view_delta_on_driver(
                    plan.root, batch, unfiltered=unfiltered.append if plan.drops_own else None
                )
                zset = conform(zset, arrow_schema(tables.snapshot.open()))
                zset = hold_back(plan, zset, state, marks)
            with profile.phase("compute changes", spark=False):
                out = changes_on_driver(
                    plan,
                    zset,
                    state,
                    snapshot=tables.snapshot,
                    snapshot_before=snapshot_before,
                    batch_id=batch_id,
                )
                out.late = pa.concat_tables(batch.late) if batch.late else None
        except NotOnDriver as e:
            profile.notes.append(f"computed by Spark: {e}")
            return None
        return out, state, unfiltered[0] if unfiltered else zset

    def _driver_reader(self, refs: dict[str, TableRef], ranges: dict[str, tuple[int, int]]):
        """Reads an input as it was before the batch, on the driver (only the rows a key filter names)."""
        return lambda name, where: read_before(refs[name], ranges[name][0], where)

    def _in_spark(
        self,
        plan: ViewPlan,
        tables: ViewTables,
        inputs: dict[str, InputChanges],
        refs: dict[str, TableRef],
        ranges: dict[str, tuple[int, int]],
        moved: frozenset[str],
        application: str,
        batch_id: int,
        snapshot_before: int | None,
        profile: Profile,
        changes: BatchChanges,
        marks: Watermarks | None,
    ) -> tuple[ViewChanges, StateStore, DataFrame]:
        """The batch computed by Spark, and the view's changes before its own expectations' filter."""
        rows_in = sum(c.rows for c in inputs.values())
        state = StateStore(
            self.spark,
            tables.state,
            self.config.storage_options,
            application,
            batch_id,
            fresh=False,
            on_driver=rows_in <= DRIVER_ROWS,
        )
        before = {n: _reader(self.spark, refs[n], lo) for n, (lo, hi) in ranges.items()}
        batch = Batch(
            self.spark,
            {n: c.frame() for n, c in inputs.items()},
            state,
            before=before,
            moved=moved,
            late_before=late_cutoff(plan, marks),
        )
        state.purge = purge_conditions(plan, batch.late_before)
        changes.keep_until_released(batch)
        with profile.phase("plan delta rule"):
            unfiltered: list[DataFrame] = []
            zset = view_delta(plan.root, batch, unfiltered=unfiltered.append if plan.drops_own else None)
        if plan.view.emit is not None:
            with profile.phase("emit policy"):
                zset = self.spark.createDataFrame(
                    hold_back(plan, zset.toArrow(), state, marks), schema=zset.schema
                )
        with profile.phase("compute changes"):
            out = view_changes(
                plan,
                zset,
                batch,
                snapshot=tables.snapshot,
                snapshot_before=snapshot_before,
                batch_id=batch_id,
            )
            out.late = reduce(DataFrame.unionAll, batch.late) if batch.late else None
        return out, state, unfiltered[0] if unfiltered else zset

    def _recompute_instead(
        self,
        plan: ViewPlan,
        refs: dict[str, TableRef],
        targets: dict[str, int],
        rows_in: int,
        on_driver: bool,
    ) -> str:
        """Why this batch recomputes the view instead of applying its delta rule ("" when it does not): under
        refresh_policy 'auto', when its changes exceed a share of its inputs' rows (and `recompute_min_changes`)
        where a recomputation costs less: `[refresh] recompute_above` for a batch the driver would compute,
        `recompute_above_in_spark` for one Spark would (benchmarks/README.md, "Incremental or full"). Never for a
        view whose rows depend on when input rows arrived (PROCTIME(), FIRST/LAST): a recomputation cannot know."""
        if (
            plan.view.refresh_policy != "auto"
            or plan.by_arrival
            or rows_in < max(self.config.recompute_min_changes, 1)
        ):
            return ""
        total = sum(table_rows(refs[n], targets[n]) for n in plan.inputs)
        share = rows_in / max(total, 1)
        setting = "recompute_above" if on_driver else "recompute_above_in_spark"
        threshold = getattr(self.config, setting)
        if share <= threshold:
            return ""
        return (
            f"recomputed by cost: {rows_in} changes are {share:.0%} of the inputs' {total} rows, above "
            f"{setting} {threshold:g}"
        )

    def _check_claims(
        self, plan: ViewPlan, inputs: dict[str, InputChanges], ranges: dict[str, tuple[int, int]]
    ) -> None:
        """No input that claims append-only (a source declared so, or a view planned so) may delete or update
        a row: the view trusts the claim (a MIN/MAX keeps only the current extreme), so a retraction would
        make it silently wrong."""
        for name, found in inputs.items():
            if found.retractions and self._claims_append_only(name):
                lo, hi = ranges[name]
                raise MvError(
                    f"{self._kind(name)} {name} is {'declared' if name in self.catalog.sources else 'planned'} "
                    f"append-only, but its versions {lo + 1}..{hi} delete or update {found.retractions} rows; "
                    f"view {plan.name} would go wrong, so nothing was written",
                    hint=self._append_only_hint(name, lo),
                )

    def _claims_append_only(self, name: str) -> bool:
        if name in self.catalog.sources:
            return self.catalog.sources[name].append_only
        return self.catalog.plans[name].changelog == "append-only"

    def _kind(self, name: str) -> str:
        return "source" if name in self.catalog.sources else "view"

    def _append_only_hint(self, name: str, lo: int) -> str:
        if name not in self.catalog.sources:
            return (
                f"a source that view {name} reads is declared append-only but deleted or updated rows: find "
                f"it with mv history, then fix its declaration or its data"
            )
        source = self.catalog.sources[name]
        return (
            f"if the source does change rows, drop 'append_only' = 'true' from its CREATE TABLE "
            f"({source.file}:{source.line}): the views over it are then rebuilt to keep what deletes need; "
            f"otherwise undo those commits (restore the table to version {lo}) and refresh"
        )

    # -- expectations (runtime/expectations.py) -------------------------------------------------------------

    @property
    def checks(self) -> Checks:
        if self._checks is None:
            self._checks = Checks(self.spark)
        return self._checks

    def check_before_batch(self, plans: list[ViewPlan], cut: dict[str, int], changes: BatchChanges) -> None:
        """Before a pipeline batch moves any view: the FAIL UPDATE expectations of the sources it reads, over
        every change a view will read (from the oldest version one reflects to the cut), so that a failing row
        stops the whole batch before anything is written, not only the views that read it."""
        for name in self.sources_of(plans):
            failing = tuple(
                e for e in self.catalog.sources[name].expectations if e.on_violation == "FAIL UPDATE"
            )
            if not failing:
                continue
            seen = [
                last.inputs[name]
                for plan in plans
                if name in plan.inputs
                if (last := last_commit(view_tables(plan, self.config.storage_options).snapshot)) is not None
                and name in last.inputs
            ]
            if not seen or cut.get(name, -1) <= min(seen):
                continue  # (a new view's first computation checks the whole table)
            lo, hi = min(seen), cut[name]
            if any(not e.row_level for e in failing):
                self._start_spark()
            found = changes.read({name: (self.source_ref(name), lo, hi)})[name]
            try:
                self.checks.check(
                    name,
                    failing,
                    inserted(found.arrow if found.arrow is not None else found.frame()),
                    quarantine=None,
                    version=hi,
                    batch_id=-1,
                    what=f"source {name} (versions {lo + 1} to {hi})",
                    whole=read_table(self.spark, self.source_ref(name), version=hi)
                    if any(not e.row_level for e in failing)
                    else None,
                )
            except ExpectationFailed as e:
                e.view = next(p.name for p in plans if name in p.inputs)  # the first view it stopped
                raise

    def _expects(self, plan: ViewPlan) -> bool:
        """Whether the view or a source it reads declares expectations."""
        return bool(plan.view.expectations) or any(
            self.catalog.sources[n].expectations for n in plan.inputs if n in self.catalog.sources
        )

    def _check_sources(
        self,
        plan: ViewPlan,
        ranges: dict[str, tuple[int, int]],
        batch_id: int,
        changes: BatchChanges | None = None,
        inputs: dict[str, InputChanges] | None = None,
    ) -> list[Outcome]:
        """The outcomes of the expectations of the sources the view reads, over the rows their versions in
        `ranges` (from exclusive, to inclusive; from -1: the whole table) inserted. Checked once per pipeline
        batch and range, whichever views read it (`changes.checked`); FAIL UPDATE raises before any write."""
        outcomes: list[Outcome] = []
        for name in plan.inputs:
            source = self.catalog.sources.get(name)
            if source is None or not source.expectations or ranges[name][1] == ranges[name][0]:
                continue
            lo, hi = ranges[name]
            key = (name, lo, hi)
            if changes is not None and key in changes.checked:
                outcomes += changes.checked[key]
                continue
            ref = self.source_ref(name)
            quarantine = source_quarantine(self.config.warehouse, name, self.config.storage_options)
            table_level = any(not e.row_level for e in source.expectations)
            if table_level or lo < 0:
                self._start_spark()
            what = f"source {name} (versions {lo + 1} to {hi})"
            whole = read_table(self.spark, ref, version=hi) if table_level or lo < 0 else None
            if lo < 0:
                # The whole table, counted; its refused rows are quarantined but for those that already are:
                # the versions up to the last that refused any were checked (and their rows written) before.
                last = (
                    quarantine.open().transaction_version(Checks.app(quarantine))
                    if quarantine.exists()
                    else None
                )
                found_outcomes = self.checks.check(
                    name,
                    source.expectations,
                    whole,
                    quarantine=None,
                    version=hi,
                    batch_id=batch_id,
                    what=what,
                    whole=whole,
                )
                if last is not None and last < hi:
                    recent = BatchChanges(self.spark)
                    try:
                        found = recent.read({name: (ref, last, hi)})[name]
                        rows = inserted(found.arrow if found.arrow is not None else found.frame())
                        self.checks.check(
                            name,
                            source.expectations,
                            rows,
                            quarantine=quarantine,
                            version=hi,
                            batch_id=batch_id,
                            what=what,
                        )
                    finally:
                        recent.release()
                elif last is None:
                    self.checks.quarantine(
                        name, source.expectations, whole, found_outcomes, quarantine, hi, batch_id
                    )
            else:
                if inputs is not None and name in inputs:
                    found = inputs[name]
                else:
                    assert changes is not None, (
                        name
                    )  # a caller without the inputs' changes passes the batch's
                    found = changes.read({name: (ref, lo, hi)})[name]
                rows = inserted(found.arrow if found.arrow is not None else found.frame())
                found_outcomes = self.checks.check(
                    name,
                    source.expectations,
                    rows,
                    quarantine=quarantine,
                    version=hi,
                    batch_id=batch_id,
                    what=what,
                    whole=whole,
                )
            if changes is not None:
                changes.checked[key] = found_outcomes
            outcomes += found_outcomes
        return outcomes

    def _check_view(
        self,
        plan: ViewPlan,
        tables: ViewTables,
        batch_id: int,
        zset,
        *,
        recomputed: bool = False,
        after: Callable[[], DataFrame],
    ) -> list[Outcome]:
        """The outcomes of the view's own expectations over the rows the batch inserts into it (before its
        DROP ROW / QUARANTINE filter; `recomputed`: all its rows), and of its table-level ones over `after()`,
        its table as the batch leaves it; FAIL UPDATE raises before any write."""
        if not plan.view.expectations:
            return []
        whole = None
        if any(not e.row_level for e in plan.view.expectations) and _holds_rows(zset):
            self._start_spark()
            whole = after()
        return self.checks.check(
            plan.name,
            plan.view.expectations,
            inserted(zset),
            quarantine=tables.quarantine,
            version=batch_id,
            batch_id=batch_id,
            what=f"view {plan.name} (batch {batch_id})",
            recomputed=recomputed,
            whole=whole,
        )

    def _table_after(self, tables: ViewTables, snapshot_before: int | None, zset) -> DataFrame:
        """The view's snapshot as the batch's changes (`zset`, as committed) leave it, before they are committed:
        its rows before, with the rows the batch inserts and without those it retracts (as bags)."""
        frame = zset if isinstance(zset, DataFrame) else self.spark.createDataFrame(zset)
        gained = inserted(frame)
        lost = inserted(frame.withColumn(WEIGHT, -F.col(WEIGHT)))
        if snapshot_before is None:
            return gained.exceptAll(lost)
        before = read_table(self.spark, tables.snapshot, version=snapshot_before).select(*gained.columns)
        return before.unionByName(gained).exceptAll(lost)

    # -- the writes of one batch ----------------------------------------------------------------------------

    def _commit(
        self,
        plan: ViewPlan,
        tables: ViewTables,
        state: StateStore,
        changes: ViewChanges,
        *,
        app_id: str,
        batch_id: int,
        generation: int,
        kind: str,
        inputs: dict[str, int],
        profile: Profile,
        spark: bool = True,
        marks: Watermarks | None = None,
        outcomes: Sequence[Outcome] = (),
        started: float,
        rows_in: int | None = None,
    ) -> None:
        """Operator state, snapshot, emit revisions, changelog: each skipped when this batch already committed it.
        The snapshot commit records the batch for readers (`mv status`, `mv ui`): its rows in (None for a
        recomputation), where it ran, and its time from `started` to that commit. The emit revisions come after
        the snapshot: a batch whose snapshot is not committed is recomputed (possibly from newer input versions,
        for a bootstrap), and must find the revisions as they were. `spark`: whether the writes may run Spark jobs
        (not when the batch was computed on the driver)."""
        self.writing.add(plan.name)
        with self._commit_phase(plan, "state", profile, spark):
            state.commit(state.staged - {EMIT_STATE})
        ids = {n: self.source_ref(n).open().metadata().id for n in inputs if n in self.catalog.sources}
        metadata = {
            "mvengine.inputs": json.dumps(inputs, sort_keys=True),
            "mvengine.input_ids": json.dumps(ids, sort_keys=True),
            "mvengine.batch_id": str(batch_id),
            "mvengine.generation": str(generation),
            "mvengine.sql_hash": sql_hash(plan),
            "mvengine.kind": kind,
            "mvengine.changes": str(changes.rows),
            "mvengine.engine": "spark" if spark else "driver",
        }
        if rows_in is not None:
            metadata["mvengine.rows_in"] = str(rows_in)
        if marks is not None and marks.after is not None:
            metadata[WATERMARK] = str(marks.after)
        if outcomes:
            metadata[EXPECTATIONS] = json.dumps([o.to_json() for o in outcomes])
        txn = (app_id, batch_id)
        self._batch_ms[plan.name] = self._millis_since(started)
        metadata["mvengine.batch_ms"] = str(self._batch_ms[plan.name])
        on_driver = state.on_driver and changes.rows <= DRIVER_ROWS
        with self._commit_phase(plan, "snapshot", profile, spark):
            if changes.upserts is not None and tables.snapshot.exists():
                merge_into(
                    changes.upserts,
                    tables.snapshot,
                    changes.keys,
                    delete_column=DELETE_MARK,
                    metadata=metadata,
                    txn=txn,
                    on_driver=on_driver,
                )
            else:
                replace_rows(
                    changes.inserts,
                    tables.snapshot,
                    changes.keys,
                    changes.deletes,
                    metadata=metadata,
                    txn=txn,
                    on_driver=on_driver,
                )
        with self._commit_phase(plan, "key revisions", profile, spark):
            state.commit()
        with self._commit_phase(plan, "changelog", profile, spark):
            write_table(
                changes.changelog,
                tables.changelog,
                metadata={"mvengine.batch_id": str(batch_id)},
                txn=txn,
                on_driver=on_driver,
            )
        if changes.late is not None:
            with self._commit_phase(plan, "late rows", profile, spark):
                assert marks is not None  # rows are late only against a watermark
                late = late_rows(changes.late, inputs, marks, batch_id)
                if late is not None:
                    write_table(late, tables.late, txn=txn, on_driver=on_driver)

    @contextlib.contextmanager
    def _commit_phase(self, plan: ViewPlan, commit: str, profile: Profile, spark: bool) -> Iterator[None]:
        """One of a batch's commits: a phase of its profile, between two crash points (crash_points.py)."""
        boundary(plan.name, commit, "before")
        with profile.phase(f"commit {commit}", spark=spark):
            yield
        boundary(plan.name, commit, "after")


def _holds_rows(zset) -> bool:
    """Whether a batch's changes (Arrow or Spark) hold any row."""
    return zset.num_rows > 0 if isinstance(zset, pa.Table) else not zset.isEmpty()


def _view_error(plan: ViewPlan, e: Exception, during: str = "") -> Exception:
    """A failure while refreshing a view, attributed to it. Spark's own errors about the query or its data
    (an unknown function, a division by zero under ANSI mode, a bad cast) are the user's to fix and become an
    MvError naming the view's file and line; anything else (Spark's INTERNAL_ERROR classes included) is a bug:
    `e` itself, with a note saying which view it stopped."""
    from pyspark.errors import PySparkException

    condition = (e.getCondition() or "") if isinstance(e, PySparkException) else ""
    if isinstance(e, PySparkException) and condition and not condition.startswith("INTERNAL_ERROR"):
        message = (e.getMessage() or str(e)).strip().splitlines()[0]
        return MvError(
            f"{plan.view.file}:{plan.view.line}: view {plan.name}: {during + ': ' if during else ''}"
            f"Spark cannot compute it: {message}",
            hint="fix the view's SQL, or the input rows it fails on (mv plan checks names and types, "
            "not every function or value), then run mv refresh again: the batch is planned anew "
            f"up to the inputs' newest versions; as a last resort, mv refresh --full {plan.name} "
            "recomputes the view from its inputs",
        )
    e.add_note(f"refreshing view {plan.name}" + (f", {during}" if during else ""))
    return e


def _rows_within(refs: dict[str, TableRef], versions: dict[str, int], most: int) -> bool:
    """Whether the inputs hold at most `most` rows in all at these versions, by their logs' row counts: a
    recomputation over so few writes its results from the driver, as a small incremental batch does (a Spark
    write job costs about ten times as much as collecting a few rows and writing them with delta-rs)."""
    total = 0
    for name, ref in refs.items():
        try:
            total += table_rows(ref, versions[name])
        except (DeltaError, StorageError):  # a table delta-rs cannot read: Spark writes
            return False
    return total <= most


def _reader(spark: SparkSession, ref: TableRef, version: int) -> Callable[[], DataFrame]:
    """A reader of the table at `version`, for a rule that reads an input as it was before the batch."""
    return lambda: read_table(spark, ref, version=version)


def _version_before(ref: TableRef, app_id: str, batch_id: int) -> int | None:
    """The snapshot's version before this batch (None when the batch creates it)."""
    if not ref.exists():
        return None
    version = version_before(ref, app_id, batch_id)
    return version if version >= 0 else None


def _latest_commit_time(refs: dict[str, TableRef], versions: dict[str, int]) -> str:
    """The commit time of the newest input version a recomputation reads (its rows' _mtime)."""
    times = []
    for name, ref in refs.items():
        info = commit_metadata(ref.open(), versions[name])
        times.append(int(info["timestamp"]))
    millis = max(times) if times else int(time.time() * 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(millis / 1000)) + f".{millis % 1000:03d}"
