"""One Structured Streaming query for all the views of a refresh (DESIGN.md §4, Execution).

The query streams the version ranges of every source the views read, taken together (storage/stream_reader.py);
its `foreachBatch` brings every view, in DAG order, to the batch's cut of the sources. A view over a view takes
its upstream's changes of the batch from memory (runtime/changes.py). A view moves only when every view it
reads reflects the batch's cut, so every view a batch commits reflects one version of each source, through
every path.

A view's batch starts from the versions the view last recorded, not from the query's offsets: a view that
lags (new to this set of views, or left behind by a stop) catches up in the next batch, and one that is ahead
(rebuilt at a later cut) waits for the query to reach it. The query's checkpoint (one per warehouse) decides
which cut a batch ends at: after a crash, the batch that was running is run again to the same cut, so views it
had not reached yet finish exactly that batch.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from mvengine.errors import MvError
from mvengine.plan.view_plan import ViewPlan
from mvengine.project.config import join_uri
from mvengine.project.layout import last_commit, view_tables
from mvengine.runtime.changes import BatchChanges
from mvengine.runtime.refresh import Refresher
from mvengine.storage.api import batch_ranges, stream_version_ranges

QUERY_NAME = "mvengine_pipeline"


class Pipeline:
    def __init__(self, refresher: Refresher, plans: list[ViewPlan], *, rebuild: set[str] | None = None) -> None:
        self.refresher = refresher
        self.plans = plans
        self.rebuild = set(rebuild or ())  # views to recompute once (--full)
        self.sources = refresher.sources_of(plans)
        self.checkpoint = pipeline_checkpoint(refresher.config.warehouse)
        self._failures: list[BaseException] = []
        self._lock = threading.Lock()
        self._closing = False

    # -- running the query ----------------------------------------------------------------------------------

    def run_once(self, cut: dict[str, int]) -> None:
        """Process every source commit up to `cut`, then bring any view the query's batches did not reach
        (a new view, a view that lagged) to it."""
        starting = self._starting(cut)
        if self.sources and _needs_query(self.checkpoint, starting, cut):
            self._await(self._start(starting, ending=cut), self.refresher.stopping)
        if not self.refresher.stopping():
            self.advance(cut)

    def run_continuous(self, interval_s: float, until: Callable[[], bool]) -> None:
        """Keep the query alive, a batch every `interval_s` when a source moved, until `until()` is true; the
        batch under way then finishes first."""
        if not self.sources:
            while not until():
                time.sleep(0.1)
            return
        query = self._start(self._starting(None), interval_s=interval_s)
        self._await(query, until)

    def _starting(self, cut: dict[str, int] | None) -> dict[str, int]:
        """For a new checkpoint, the versions the query starts after: the oldest any view reflects."""
        starting: dict[str, int] = {}
        for plan in self.plans:
            last = last_commit(view_tables(plan, self.refresher.config.storage_options).snapshot)
            for name in plan.inputs:
                if name in self.sources and last is not None and name in last.inputs:
                    starting[name] = min(starting.get(name, last.inputs[name]), last.inputs[name])
        for name in self.sources:
            if name not in starting:
                starting[name] = cut[name] if cut else self.refresher.source_ref(name).open().version()
        return starting

    def _start(self, starting: dict[str, int], *, ending: dict[str, int] | None = None,
               interval_s: float | None = None):
        spark = self.refresher.spark
        refs = {n: self.refresher.source_ref(n) for n in self.sources}
        stream = stream_version_ranges(spark, refs, starting_versions=starting, ending_versions=ending)
        writer = (stream.writeStream.queryName(QUERY_NAME).foreachBatch(self._run)
                  .option("checkpointLocation", self.checkpoint))
        writer = writer.trigger(availableNow=True) if interval_s is None \
            else writer.trigger(processingTime=f"{int(interval_s * 1000)} milliseconds")
        started = time.monotonic()
        query = writer.start()
        self.refresher.notice(f"pipeline query {query.id} started over {len(refs)} source"
                              f"{'' if len(refs) == 1 else 's'} for {len(self.plans)} view"
                              f"{'' if len(self.plans) == 1 else 's'} in {int((time.monotonic() - started) * 1000)} ms")
        return query

    def _await(self, query, until: Callable[[], bool]) -> None:
        try:
            while query.isActive and not until():
                query.awaitTermination(0.1)
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

    def _run(self, df, spark_batch: int) -> None:
        with self._lock:
            if self._closing:
                return
            try:
                ranges = batch_ranges(self.checkpoint, spark_batch)
                self.advance({n: hi for n, (lo, hi) in ranges.items() if n in self.sources})
            except BaseException as e:  # kept to re-raise as itself: Spark wraps it in a Java exception
                self._failures.append(e)
                raise

    # -- one batch over the DAG -----------------------------------------------------------------------------

    def advance(self, cut: dict[str, int]) -> None:
        """Bring every view whose inputs allow it to `cut`, in DAG order."""
        refresher = self.refresher
        changes = BatchChanges(refresher.spark)
        at_cut: dict[str, int] = {}  # view -> its snapshot version, once it reflects the cut
        try:
            for plan in self.plans:
                upstream = [n for n in plan.inputs if n in refresher.catalog.plans]
                sources = [n for n in plan.inputs if n in refresher.catalog.sources]
                if any(n not in at_cut for n in upstream) or any(n not in cut for n in sources):
                    continue  # an input is not at this cut (yet)
                targets = {n: cut[n] if n in cut else at_cut[n] for n in plan.inputs}
                tables = view_tables(plan, refresher.config.storage_options)
                last = last_commit(tables.snapshot)
                if last is not None and any(last.inputs.get(n, -1) > cut[n] for n in sources) \
                        and plan.name not in self.rebuild:
                    continue  # rebuilt at a later cut: the query has not reached it yet
                refresher.guarded(plan, refresher.advance, plan, last, targets, changes,
                                  rebuild=plan.name in self.rebuild)
                self.rebuild.discard(plan.name)
                output = changes.outputs.get(plan.name)
                at_cut[plan.name] = output.version if output is not None else tables.snapshot.open().version()
        finally:
            changes.release()


def pipeline_checkpoint(warehouse: str) -> str:
    """The query's checkpoint: one per warehouse, so that a batch interrupted by a crash is run again to the
    same cut whichever views the next refresh names."""
    folder = join_uri(warehouse, "_pipeline").removeprefix("file:")
    if "://" in folder:
        raise MvError(f"the pipeline's checkpoint must be on a local or mounted path, not {folder}",
                      hint="set [project] warehouse to a local path")
    return folder


def _needs_query(checkpoint: str, starting: dict[str, int], cut: dict[str, int]) -> bool:
    """Whether the query has work: a batch to run again after a crash, or sources past its last offsets."""
    offsets, commits = os.path.join(checkpoint, "offsets"), os.path.join(checkpoint, "commits")
    logged = _batch_ids(offsets)
    if not logged:
        return any(cut[n] > starting[n] for n in cut)
    last = max(logged)
    if last not in _batch_ids(commits):
        return True
    done = {n: hi for n, (lo, hi) in batch_ranges(checkpoint, last).items()}
    return any(cut[n] > done.get(n, starting[n]) for n in cut)


def _batch_ids(folder: str) -> set[int]:
    return {int(f) for f in os.listdir(folder) if f.isdigit()} if os.path.isdir(folder) else set()

