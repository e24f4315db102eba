"""Refreshing views: bootstrap, incremental batches over the inputs' change feeds, and full recomputation.

Per view (DESIGN.md §4–§5): a new view, a view whose SQL changed, or `--full` is computed from its inputs'
current versions (a new *generation*); an incremental view then runs one Structured Streaming query over the
version ranges of its inputs, whose `foreachBatch` reads each range's change data feed and applies the view's
delta rule; a full-refresh view is recomputed whenever an input moved. Every batch writes the view's state,
snapshot and changelog, each with the application transaction (view generation, batch id), so a batch replayed
after a crash skips what it already committed and recomputes the rest from the pre-batch versions (time
travel).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mvengine.errors import MvError
from mvengine.incremental.batch import Batch
from mvengine.incremental.compiler import supports, view_delta
from mvengine.incremental.state import StateStore
from mvengine.incremental.zset import MTIME, WEIGHT, from_change_feed, inserts
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.catalog import Catalog
from mvengine.project.config import Config, join_uri
from mvengine.project.layout import Committed, ViewTables, app_id, last_commit, source_table, view_tables
from mvengine.runtime.emit import EMIT_STATE, view_changes
from mvengine.runtime.profile import Phase, Profile
from mvengine.storage.api import (
    DELETE_MARK,
    RETRACTIONS,
    ChangeFeed,
    batch_ranges,
    merge_into,
    read_change_feed,
    read_table,
    remove_folder,
    replace_rows,
    stream_version_ranges,
    write_table,
)
from mvengine.storage.change_reader import CHANGE_COLUMNS
from mvengine.storage.sources import ensure_source_table
from mvengine.storage.tables import TableRef, commit_metadata, is_committed, version_before

# A batch of at most this many input changes (and changelog rows) writes its state, snapshot and changelog
# from the driver, collected as Arrow: Spark write jobs cost more than the work for small batches.
DRIVER_ROWS = 500_000
# An input's changes of at most this many rows are read by delta-rs on the driver and handed to Spark as Arrow;
# above it, moving the rows from Python into Spark costs more than delta-rs in Spark's Python workers (mvdelta).
# Both beat Delta's connector, which first rebuilds the table's state in a Spark job (benchmarks/README.md,
# "Which reader, which writer").
DRIVER_CHANGE_ROWS = 50_000


def sql_hash(plan: ViewPlan) -> str:
    """Identifies what a view computes: its query (as sqlglot prints it, so comments and layout do not count),
    its column names, its strategy and the state it keeps (which changes when an input's append-only claim
    does: a MIN/MAX then needs its multiset)."""
    text = "|".join([plan.strategy, ",".join(c.name for c in plan.columns), plan.view.query.sql("spark"),
                     plan.state])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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

    def line(self) -> str:
        versions = ", ".join(f"{n}@{v}" for n, v in self.inputs.items())
        note = f"  ({self.note})" if self.note else ""
        work = "recomputed" if self.rows_in is None else f"{self.rows_in} changes in"
        return (f"{self.view}: batch {self.batch_id} [{self.kind}] inputs {versions}: {work}, "
                f"{self.rows_out} changelog rows out, {self.millis} ms{note}")

    def profile(self) -> str:
        """The batch's phases, one line: `mv refresh --profile` prints it under the batch line."""
        return "  phases: " + ", ".join(p.text() for p in self.phases)


@dataclass
class Refresher:
    spark: SparkSession
    config: Config
    catalog: Catalog
    report: Callable[[BatchReport], None] = lambda r: None
    stopping: Callable[[], bool] = lambda: False
    _sources_ready: bool = field(default=False, init=False)

    # -- what to refresh ------------------------------------------------------------------------------------

    def plans_for(self, names: list[str] | None) -> list[ViewPlan]:
        """The named views (default: all) and every view they read, in DAG order."""
        if not names:
            return [self.catalog.plans[n] for n in self.catalog.order if n in self.catalog.plans]
        wanted: set[str] = set()
        for name in self.catalog.require(names):
            if name not in self.catalog.plans:
                raise MvError(f"{name} is a source, not a view", hint="mv refresh VIEW ...; sources need no refresh")
            wanted.add(name)
            wanted.update(a for a in _ancestors(self.catalog, name) if a in self.catalog.plans)
        return [self.catalog.plans[n] for n in self.catalog.order if n in wanted]

    def refresh(self, names: list[str] | None = None, *, full: bool = False) -> None:
        """Bring the views to one consistent cut: the sources' versions when the refresh starts. In DAG order,
        each view then reads its sources at the cut and its upstream views at the versions they just reached,
        so every view reflects the same version of every source it depends on, however many paths lead there."""
        self.prepare_sources()
        plans = self.plans_for(names)
        cut = self.source_cut(plans)
        for plan in plans:
            if self.stopping():
                return
            try:
                self.refresh_view(plan, full=full, cut=cut)
            except MvError:
                raise
            except Exception as e:
                error = _view_error(plan, e)
                if error is e:
                    raise
                raise error from e

    def source_cut(self, plans: list[ViewPlan]) -> dict[str, int]:
        """The current version of every source the views read."""
        names = sorted({n for plan in plans for n in plan.inputs if n in self.catalog.sources})
        return {n: source_table(self.catalog.sources[n], self.config.storage_options).open().version()
                for n in names}

    def prepare_sources(self) -> None:
        if self._sources_ready:
            return
        for source in self.catalog.sources.values():
            ensure_source_table(source_table(source, self.config.storage_options), source.schema)
        self._sources_ready = True

    def input_refs(self, plan: ViewPlan) -> dict[str, TableRef]:
        refs = {}
        for name in plan.inputs:
            if name in self.catalog.sources:
                refs[name] = source_table(self.catalog.sources[name], self.config.storage_options)
            else:
                refs[name] = view_tables(self.catalog.plans[name], self.config.storage_options).snapshot
                if not refs[name].exists():
                    raise MvError(f"view {plan.name} reads view {name}, which has not been refreshed yet",
                                  hint=f"run mv refresh {name} first (mv refresh refreshes in dependency order)")
        return refs

    # -- one view -------------------------------------------------------------------------------------------

    def refresh_view(self, plan: ViewPlan, *, full: bool = False, cut: dict[str, int] | None = None) -> None:
        """Bring one view up to the cut (default: its inputs' current versions), its upstream views being there."""
        tables = view_tables(plan, self.config.storage_options)
        # A source at the cut; a view at its latest version (refreshed to the cut just before, in DAG order).
        targets = {n: cut[n] if cut and n in cut else r.open().version() for n, r in self.input_refs(plan).items()}
        last = last_commit(tables.snapshot)
        digest = sql_hash(plan)
        incremental = plan.strategy == "incremental" and supports(plan.root)
        if last is not None and not is_committed(tables.changelog, app_id(plan.name, last.generation), last.batch_id):
            # The process stopped between the snapshot and the changelog of a batch: finish that batch first.
            if last.kind == "stream":
                self._stream(plan, tables, last, targets)  # Structured Streaming replays the uncommitted batch
            else:
                self._recompute(plan, tables, last.generation, last.batch_id, last.kind, incremental, last.inputs,
                                resuming=True, note="finishing an interrupted batch")
            last = last_commit(tables.snapshot)
        if last is None or last.sql_hash != digest or full:
            note = ("new view" if last is None else "SQL changed: rebuilt from the inputs" if last.sql_hash != digest
                    else "--full: recomputed from the inputs")
            if last is not None and self._columns_changed(plan, tables):
                note += "; its columns changed, so its snapshot and changelog start over"
                for ref in (tables.snapshot, tables.changelog):
                    if ref.exists():
                        remove_folder(ref)
                for folder in (tables.state, tables.checkpoints):
                    _remove_tree(folder, self.config.storage_options)
                last = None
            generation = 0 if last is None else last.generation + 1
            batch_id = 0 if last is None else last.batch_id + 1
            self._recompute(plan, tables, generation, batch_id, "bootstrap" if incremental else "full",
                            incremental, targets, note=note)
            last = last_commit(tables.snapshot)
        assert last is not None
        if incremental:
            if any(v > last.inputs.get(n, -1) for n, v in targets.items()):
                self._stream(plan, tables, last, targets)
        elif targets != last.inputs:
            self._recompute(plan, tables, last.generation, last.batch_id + 1, "full", False, targets)

    def _columns_changed(self, plan: ViewPlan, tables: ViewTables) -> bool:
        names = [f.name for f in tables.snapshot.open().schema().fields]
        return names != [c.name for c in plan.columns]

    # -- recomputation (bootstrap of incremental views, every batch of full-refresh views) -----------------

    def _recompute(self, plan: ViewPlan, tables: ViewTables, generation: int, batch_id: int, kind: str,
                   incremental: bool, versions: dict[str, int], *, resuming: bool = False, note: str = "") -> None:
        started = time.monotonic()
        refs = self.input_refs(plan)
        application = app_id(plan.name, generation)
        mtime = F.lit(_latest_commit_time(refs, versions)).cast("timestamp")
        if kind == "bootstrap" and not resuming:
            # A new generation starts from no operator state (the emit revisions of the view's keys stay).
            _remove_tree(join_uri(tables.checkpoints, f"g{generation}"), self.config.storage_options, prefix=True)
            for name in _state_tables(tables):
                if name != EMIT_STATE:
                    _remove_tree(join_uri(tables.state, name), self.config.storage_options)
        state = StateStore(self.spark, tables.state, self.config.storage_options, application, batch_id,
                           fresh=(kind == "bootstrap"), persistent=frozenset({EMIT_STATE}))
        batch = Batch(self.spark, {}, state)
        profile = Profile(self.spark)
        try:
            with profile.phase("plan inputs"):
                if incremental:
                    batch.changes = {n: inserts(read_table(self.spark, r, version=versions[n]), mtime) for n, r in refs.items()}
                    new_rows = view_delta(plan.root, batch)
                else:
                    new_rows = inserts(self._compute(plan, refs, versions), mtime)
                snapshot_before = _version_before(tables.snapshot, application, batch_id)
                changes = new_rows
                if snapshot_before is not None:
                    old = read_table(self.spark, tables.snapshot, version=snapshot_before)
                    changes = changes.unionByName(old.select("*", F.lit(-1).cast("long").alias(WEIGHT),
                                                             mtime.alias(MTIME)))
            rows_out = self._commit(plan, tables, batch, changes, app_id=application, batch_id=batch_id,
                                    generation=generation, kind=kind, inputs=versions,
                                    snapshot_before=snapshot_before, profile=profile)
        finally:
            batch.release()
        self.report(BatchReport(plan.name, batch_id, kind, versions, None, rows_out,
                                int((time.monotonic() - started) * 1000), note, profile.phases))

    def _compute(self, plan: ViewPlan, refs: dict[str, TableRef], versions: dict[str, int]) -> DataFrame:
        """The view's query run by Spark over its inputs at the given versions."""
        for name, ref in refs.items():
            read_table(self.spark, ref, version=versions[name]).createOrReplaceTempView(name)
        df = self.spark.sql(plan.view.query.sql("spark"))
        return df.toDF(*[c.name for c in plan.columns])

    # -- incremental batches --------------------------------------------------------------------------------

    def _stream(self, plan: ViewPlan, tables: ViewTables, last: Committed, targets: dict[str, int]) -> None:
        """Process the inputs' changes after the last batch's versions up to `targets`, in one batch (more
        after a crash, which replays the batch that was running), each ending at versions the inputs reached
        together."""
        refs = self.input_refs(plan)
        checkpoint = _checkpoint(tables, last)
        base = int(os.path.basename(checkpoint).split("_b")[1])
        application = app_id(plan.name, last.generation)

        failures: list[BaseException] = []
        query_started = [time.monotonic()]  # until the query's first batch with work: its start is reported there

        def run(df: DataFrame, spark_batch: int) -> None:
            try:
                apply(df, spark_batch)
            except BaseException as e:  # kept to re-raise as itself: Spark wraps it in a Java exception
                failures.append(e)
                raise

        def apply(df: DataFrame, spark_batch: int) -> None:
            ranges = batch_ranges(checkpoint, spark_batch)
            if all(hi <= lo for lo, hi in ranges.values()):
                return  # nothing new (a new query's first batch, or inputs that did not move)
            started = time.monotonic()
            batch_id = base + spark_batch + 1
            profile = Profile(self.spark)
            if query_started:
                profile.add("start query", int((started - query_started.pop()) * 1000))
            with profile.phase("read changes"):
                feeds = {n: read_change_feed(self.spark, refs[n], lo + 1, hi, driver_rows=DRIVER_CHANGE_ROWS)
                         for n, (lo, hi) in ranges.items()}
                for feed in feeds.values():
                    if feed.arrow is None:  # read by Spark: cached by the count, for the rule to read again
                        feed.rows.persist()
            try:
                with profile.phase("count changes"):
                    rows_in = self._count_changes(plan, feeds, ranges)
                changes = {n: from_change_feed(f.rows, [c for c in f.rows.columns if c not in CHANGE_COLUMNS])
                           for n, f in feeds.items()}
                state = StateStore(self.spark, tables.state, self.config.storage_options, application, batch_id,
                                   fresh=False, on_driver=rows_in <= DRIVER_ROWS)
                before = {n: _reader(self.spark, refs[n], lo) for n, (lo, hi) in ranges.items()}
                moved = frozenset(n for n, (lo, hi) in ranges.items() if hi > lo)
                batch = Batch(self.spark, changes, state, before=before, moved=moved)
                try:
                    with profile.phase("plan delta rule"):
                        zset = view_delta(plan.root, batch)
                    versions = {n: hi for n, (lo, hi) in ranges.items()}
                    snapshot_before = _version_before(tables.snapshot, application, batch_id)
                    rows_out = self._commit(plan, tables, batch, zset, app_id=application, batch_id=batch_id,
                                            generation=last.generation, kind="stream", inputs=versions,
                                            snapshot_before=snapshot_before, profile=profile)
                finally:
                    batch.release()
            finally:
                for feed in feeds.values():
                    feed.rows.unpersist()
            self.report(BatchReport(plan.name, batch_id, "stream", versions, rows_in, rows_out,
                                    int((time.monotonic() - started) * 1000), phases=profile.phases))

        stream = stream_version_ranges(self.spark, refs, starting_versions=last.inputs, ending_versions=targets)
        query = (stream.writeStream.queryName(f"mvengine_{plan.name}").foreachBatch(run)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            query.awaitTermination()
        except Exception:
            if failures:
                raise failures[0] from None
            raise

    def _count_changes(self, plan: ViewPlan, feeds: dict[str, ChangeFeed],
                       ranges: dict[str, tuple[int, int]]) -> int:
        """The batch's change rows, checking that no input claimed append-only (a source declared so, or a
        view planned so) deleted or updated a row: the view trusts the claim (a MIN/MAX keeps only the current
        extreme), so a retraction would make it silently wrong. Feeds read on the driver are counted there; the
        others in one Spark job, which also fills their caches."""
        counts = {n: f.counts() for n, f in feeds.items() if ranges[n][1] > ranges[n][0]}
        in_spark = [feeds[n].rows.select(F.lit(n).alias("_table"), "_change_type")
                    for n, c in counts.items() if c is None]
        if in_spark:
            counts.update({n: (0, 0) for n, c in counts.items() if c is None})  # a range may hold no changes
            df = in_spark[0]
            for rows in in_spark[1:]:
                df = df.unionByName(rows)
            retracting = F.col("_change_type").isin(*RETRACTIONS)
            for row in df.groupBy("_table").agg(F.count(F.lit(1)).alias("rows"),
                                                F.sum(retracting.cast("long")).alias("retractions")).collect():
                counts[row["_table"]] = (row["rows"], row["retractions"])
        for name, (_, retractions) in counts.items():
            if retractions and self._claims_append_only(name):
                lo, hi = ranges[name]
                raise MvError(
                    f"{self._kind(name)} {name} is {'declared' if name in self.catalog.sources else 'planned'} "
                    f"append-only, but its versions {lo + 1}..{hi} delete or update {retractions} rows; "
                    f"view {plan.name} would go wrong, so nothing was written",
                    hint=self._append_only_hint(name, lo))
        return sum(rows for rows, _ in counts.values())

    def _claims_append_only(self, name: str) -> bool:
        if name in self.catalog.sources:
            return self.catalog.sources[name].append_only
        return self.catalog.plans[name].changelog == "append-only"

    def _kind(self, name: str) -> str:
        return "source" if name in self.catalog.sources else "view"

    def _append_only_hint(self, name: str, lo: int) -> str:
        if name not in self.catalog.sources:
            return (f"a source that view {name} reads is declared append-only but deleted or updated rows: find "
                    f"it with mv history, then fix its declaration or its data")
        source = self.catalog.sources[name]
        return (f"if the source does change rows, drop 'append_only' = 'true' from its CREATE TABLE "
                f"({source.file}:{source.line}): the views over it are then rebuilt to keep what deletes need; "
                f"otherwise undo those commits (restore the table to version {lo}) and refresh")

    # -- the writes of one batch ----------------------------------------------------------------------------

    def _commit(self, plan: ViewPlan, tables: ViewTables, batch: Batch, zset: DataFrame, *, app_id: str,
                batch_id: int, generation: int, kind: str, inputs: dict[str, int],
                snapshot_before: int | None, profile: Profile) -> int:
        """Operator state, snapshot, emit revisions, changelog: each skipped when this batch already committed
        it. The emit revisions come after the snapshot: a batch whose snapshot is not committed is recomputed
        (possibly from newer input versions, for a bootstrap), and must find the revisions as they were."""
        with profile.phase("compute changes"):
            changes = view_changes(plan, zset, batch, snapshot=tables.snapshot, snapshot_before=snapshot_before,
                                   batch_id=batch_id)
        changelog = changes.changelog
        rows_out = changes.rows
        with profile.phase("commit state"):
            batch.state.commit(batch.state.staged - {EMIT_STATE})
        metadata = {"mvengine.inputs": json.dumps(inputs, sort_keys=True), "mvengine.batch_id": str(batch_id),
                    "mvengine.generation": str(generation), "mvengine.sql_hash": sql_hash(plan),
                    "mvengine.kind": kind, "mvengine.changes": str(rows_out)}
        txn = (app_id, batch_id)
        on_driver = batch.state.on_driver and rows_out <= DRIVER_ROWS
        with profile.phase("commit snapshot"):
            if changes.upserts is not None and tables.snapshot.exists():
                merge_into(changes.upserts, tables.snapshot, changes.keys, delete_column=DELETE_MARK,
                           metadata=metadata, txn=txn, on_driver=on_driver)
            else:
                replace_rows(changes.inserts, tables.snapshot, changes.keys, changes.deletes, metadata=metadata,
                             txn=txn, on_driver=on_driver)
        with profile.phase("commit key revisions"):
            batch.state.commit()
        with profile.phase("commit changelog"):
            write_table(changelog, tables.changelog, metadata={"mvengine.batch_id": str(batch_id)}, txn=txn,
                        on_driver=on_driver)
        return rows_out


def _view_error(plan: ViewPlan, e: Exception) -> Exception:
    """A failure while refreshing a view, attributed to it. Spark's own errors about the query or its data
    (an unknown function, a division by zero under ANSI mode, a bad cast) are the user's to fix and become an
    MvError naming the view's file and line; anything else (Spark's INTERNAL_ERROR classes included) is a bug:
    `e` itself, with a note saying which view it stopped."""
    from pyspark.errors import PySparkException

    condition = (e.getCondition() or "") if isinstance(e, PySparkException) else ""
    if condition and not condition.startswith("INTERNAL_ERROR"):
        message = (e.getMessage() or str(e)).strip().splitlines()[0]
        return MvError(f"{plan.view.file}:{plan.view.line}: view {plan.name}: Spark cannot compute it: {message}",
                       hint="fix the view's SQL, or the input rows it fails on (mv plan checks names and types, "
                            "not every function or value), then run mv refresh again")
    e.add_note(f"refreshing view {plan.name}")
    return e


def _reader(spark: SparkSession, ref: TableRef, version: int) -> Callable[[], DataFrame]:
    """A reader of the table at `version`, for a rule that reads an input as it was before the batch."""
    return lambda: read_table(spark, ref, version=version)


def _version_before(ref: TableRef, app_id: str, batch_id: int) -> int | None:
    """The snapshot's version before this batch (None when the batch creates it)."""
    if not ref.exists():
        return None
    version = version_before(ref, app_id, batch_id)
    return version if version >= 0 else None


def _checkpoint(tables: ViewTables, last: Committed) -> str:
    """The Structured Streaming checkpoint of the view's generation. Its name records the view batch id it
    started after, so view batch ids keep increasing even if a checkpoint is lost and started again."""
    folder = tables.checkpoints.removeprefix("file:")
    if "://" in folder:
        raise MvError(f"checkpoints must be on a local or mounted path, not {folder}",
                      hint="set [project] warehouse to a local path, or give the view a local 'path'")
    prefix = f"g{last.generation}_b"
    existing = sorted(d for d in os.listdir(folder) if d.startswith(prefix)) if os.path.isdir(folder) else []
    if existing:
        return os.path.join(folder, existing[-1])
    return os.path.join(folder, f"{prefix}{last.batch_id}")


def _remove_tree(path: str, storage_options: dict[str, str], *, prefix: bool = False) -> None:
    """Remove a folder (with `prefix`: every folder whose name starts with the path's last segment)."""
    local = path.removeprefix("file:")
    if "://" in local:
        if TableRef(path, storage_options).exists():
            remove_folder(TableRef(path, storage_options))
        return
    parent, name = os.path.split(local)
    targets = [os.path.join(parent, d) for d in os.listdir(parent) if d.startswith(name)] \
        if prefix and os.path.isdir(parent) else [local]
    for target in targets:
        shutil.rmtree(target, ignore_errors=True)


def _state_tables(tables: ViewTables) -> list[str]:
    local = tables.state.removeprefix("file:")
    if "://" in local:
        raise MvError(f"view state must be on a local or mounted path, not {local}",
                      hint="set [project] warehouse to a local path, or give the view a local 'path'")
    return sorted(os.listdir(local)) if os.path.isdir(local) else []


def _latest_commit_time(refs: dict[str, TableRef], versions: dict[str, int]) -> str:
    """The commit time of the newest input version a recomputation reads (its rows' _mtime)."""
    times = []
    for name, ref in refs.items():
        info = commit_metadata(ref.open(), versions[name])
        times.append(int(info["timestamp"]))
    millis = max(times) if times else int(time.time() * 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(millis / 1000)) + f".{millis % 1000:03d}"


def _ancestors(catalog: Catalog, name: str) -> set[str]:
    import networkx as nx

    return set(nx.ancestors(catalog.graph, name))
