"""What a delta rule sees of one batch: the changes of every input, the inputs as they were before the batch,
the view's state, and Spark."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mvengine.incremental.clock import Clock, clock_moves
from mvengine.incremental.collected import collect_small, reads_files_only
from mvengine.incremental.driver import DriverBatch
from mvengine.incremental.state import StateStore
from mvengine.incremental.zset import ReadOnDemand, inserts
from mvengine.plan.nodes import Node, Scan


@dataclass
class HandOff:
    """Where a Spark batch may go on on the driver: the nodes whose rules may (by id), the driver's side of the
    batch, and the most rows a kept relation may have to be handed off."""

    nodes: frozenset[int]
    driver: DriverBatch
    most: int
    handed: list[str] = field(default_factory=list)  # what was handed off, for the batch's profile notes


@dataclass
class Batch:
    spark: SparkSession
    changes: Mapping[str, DataFrame]  # input name → Z-set of its rows (its columns, _w, _mtime)
    state: StateStore
    # input name → its rows at the version before the batch (read by time travel, when a rule asks);
    # None when the view starts from nothing (a bootstrap: every input's rows are its changes).
    before: dict[str, Callable[[], DataFrame]] | None = None
    moved: frozenset[str] | None = None  # the inputs with changes in this batch; None: all of them
    # id(node) → its position in the plan (names state)
    node_ids: dict[int, int] = field(default_factory=dict)
    checkpoints: list[DataFrame] = field(default_factory=list)  # released when the batch ends
    # allowed_lateness: input rows whose event time is before this (µs) are not applied, but kept in `late`
    late_before: int | None = None
    late: list[DataFrame] = field(default_factory=list)  # (row JSON, event_time, _w) of the rows not applied
    clock: Clock | None = None  # the time NOW() reads (None: the view has no temporal filter nor state_ttl)
    expired: int = 0  # the keys the view's state_ttl expired in this batch
    # Where the batch may go on on the driver, once a rule keeps few rows (incremental/hand_off.py); None: never.
    hand_off: HandOff | None = None
    _as_before: Batch | None = field(default=None, repr=False)

    def node_id(self, node: Node) -> int:
        return self.node_ids[id(node)]

    def changed(self, node: Node) -> bool:
        """Whether any input under `node` changed in this batch (if not, the node's changes are empty)."""
        return (
            self.moved is None
            or any(isinstance(n, Scan) and n.input in self.moved for n in node.walk())
            or clock_moves(self.clock, node)
        )

    def as_before(self) -> Batch | None:
        """A batch whose changes are the inputs' whole contents before this batch, all as inserts: evaluating a
        stateless subtree over it gives the subtree's rows before the batch. None when there were none."""
        if self.before is None:
            return None
        if self._as_before is None:
            before = self.before
            self._as_before = Batch(
                self.spark,
                ReadOnDemand(before, lambda name: inserts(before[name](), F.lit(None).cast("timestamp"))),
                self.state,
                node_ids=self.node_ids,
                checkpoints=self.checkpoints,
                clock=None if self.clock is None else self.clock.as_before(),
            )
        return self._as_before

    def keep(self, df: DataFrame) -> DataFrame:
        """Compute a DataFrame used more than once in the batch only once, now, and cut its plan: the rules
        stack many operators, and Spark analyses the whole plan again at each one. Released when the batch ends.

        Always eager: a lazy checkpoint is made by the first job that reads it, and when two jobs read it at
        once (the broadcasts of one query run in parallel) Spark 4.2 can deadlock between the checkpoint's
        global lock and the DAG scheduler's lock on the RDD (seen: a refresh hung with no task running).

        A DataFrame that only reads files at fixed versions and projects or filters their rows is not kept: its
        plan is short, and reading the files again costs less than holding its rows (a bootstrap's input of 100M
        rows took most of two minutes to checkpoint)."""
        if reads_files_only(df):
            return df
        df = df.localCheckpoint(eager=True)
        self.checkpoints.append(df)
        return df

    def keep_small(self, df: DataFrame) -> DataFrame:
        """`keep(df)`, but in a small batch (`state.on_driver`) the rows are collected once as Arrow and go on
        as a local DataFrame: the plans built over it are planned in milliseconds, where a checkpoint of a
        rule's plan costs its planning and broadcast jobs again (about 0.3 s an aggregate)."""
        if self.state.on_driver:  # (at most ExecutionPolicy.collect_to_driver rows)
            collected = collect_small(df, self.state.policy.collect_to_driver)
            if collected is not None:
                return self.spark.createDataFrame(collected, schema=df.schema)
        return self.keep(df)

    def release(self) -> None:
        for df in self.checkpoints:
            df._jdf.queryExecution().analyzed().rdd().unpersist(False)  # the checkpoint's blocks
        self.checkpoints.clear()


# A rule's way to its inputs' changes (compiler.node_delta): the Z-set a child node's rule gives.
ChildDelta = Callable[[Node, Batch], DataFrame]
