"""A batch Spark starts and the driver finishes: the rules of a view's upper nodes (driver_support.driver_finishes)
go on in Arrow from the first relation they keep that is small.

A bootstrap over 100M rows must be computed by Spark, but what a GROUP BY keeps of them (its partials by group)
may be a million rows. Spark then computed the rest of the batch too, in a dozen jobs of ~150 ms and more
each: the roll-up, the accumulators, the changes, each state table, snapshot and changelog collected or written
apart. Collected once where the rule keeps it, those rows go on through the same rules on the driver's engine
(incremental/engine.py's two engines compute the same rule), and the batch's tables are written from there.

`HandOffEngine` is the engine of those upper nodes' rules: each operation runs on the engine of the relations it
is given, Spark's until one is handed off, Arrow's after. A relation handed to the driver that meets one Spark
keeps (a state read of many rows) stops the batch with `HandOffRefused`: the caller computes it again, in Spark
alone; so does a value the driver does not compute exactly (`NotOnDriver`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pyarrow as pa
from pyspark.sql import DataFrame
from sqlglot import exp

from mvengine.incremental.batch import Batch, HandOff
from mvengine.incremental.clock import Clock
from mvengine.incremental.collected import collect_kept
from mvengine.incremental.driver import DriverBatch
from mvengine.incremental.driver_expressions import NotOnDriver
from mvengine.incremental.engine import ArrowEngine, SparkEngine, Within
from mvengine.plan.nodes import Field, Join, Node, Scan, WindowAssign
from mvengine.storage.tables import TableRef

Rel: TypeAlias = DataFrame | pa.Table


class HandOffRefused(NotOnDriver):
    """A relation handed to the driver met one that Spark keeps: the batch is to run in Spark alone."""


def rule_engine(node: Node, batch: Batch, child_delta: Callable[[Node, Batch], DataFrame]) -> Any:
    """The engine a node's rule runs on in a Spark batch: Spark's, or for a node the batch may finish on the
    driver, the engine that hands off."""
    spark = SparkEngine(batch, child_delta)
    hand_off = batch.hand_off
    if hand_off is None or id(node) not in hand_off.nodes:
        return spark
    return HandOffEngine(spark, ArrowEngine(hand_off.driver, _no_child), hand_off)


def _no_child(node: Node, batch: DriverBatch) -> pa.Table:
    raise AssertionError("a handed-off rule takes its child's changes from Spark's side")


@dataclass
class HandOffEngine:
    spark: SparkEngine
    driver: ArrowEngine
    hand_off: HandOff

    def _on(self, *rels: Rel | None) -> Any:
        """The engine of these relations: the driver's when every one is Arrow, Spark's when none is."""
        given = [r for r in rels if r is not None]
        arrow = [isinstance(r, pa.Table) for r in given]
        if all(arrow) and arrow:
            return self.driver
        if not any(arrow):
            return self.spark
        raise HandOffRefused("rows handed to the driver met rows Spark keeps")

    def _in_spark(self, rel: Rel) -> DataFrame:
        """Rows of named columns (keys a read is narrowed by) for Spark's side."""
        return self.spark.batch.spark.createDataFrame(rel) if isinstance(rel, pa.Table) else rel

    # -- what every engine answers alike ---------------------------------------------------------------------

    def node_id(self, node: Node) -> int:
        return self.spark.node_id(node)

    def changes(self, node: Scan) -> DataFrame:
        return self.spark.changes(node)

    def child(self, node: Node) -> Any:
        return self.spark.child(node)

    def changed(self, node: Node) -> bool:
        return self.spark.changed(node)

    def clock(self) -> Clock | None:
        return self.spark.clock()

    def holds_state(self, table: str) -> bool:
        return self.spark.holds_state(table)

    # -- where a relation goes to the driver -----------------------------------------------------------------

    def keep(self, rel: Rel) -> Any:
        """Spark's keep, and its rows collected when they are few: the rest of the batch goes on in Arrow. (A
        relation that reads an input's files is not kept: it is no reduction of them, and the driver computes
        small inputs from the start.)"""
        if isinstance(rel, pa.Table):
            return rel
        kept = self.spark.keep(rel)
        rows = collect_kept(kept, self.hand_off.most)
        if rows is None:
            return kept
        self.hand_off.handed.append(f"{rows.num_rows} rows")
        return rows

    # -- one relation: its engine's ----------------------------------------------------------------------------

    def project(
        self, rel: Rel, child: Node, expressions: Sequence[exp.Expression], fields: Sequence[Field]
    ) -> Any:
        return self._on(rel).project(rel, child, expressions, fields)

    def mask(self, rel: Rel, child: Node, predicate: exp.Expression) -> Any:
        return self._on(rel).mask(rel, child, predicate)

    def named(self, rel: Rel, child: Node, names: Sequence[str]) -> Any:
        return self._on(rel).named(rel, child, names)

    def consolidate(self, rel: Rel, names: Sequence[str]) -> Any:
        return self._on(rel).consolidate(rel, names)

    def compute(self, rel: Rel, columns: Mapping[str, str | exp.Expression]) -> Any:
        return self._on(rel).compute(rel, columns)

    def where(self, rel: Rel, condition: str) -> Any:
        return self._on(rel).where(rel, condition)

    def with_state(
        self,
        rel: Rel,
        table: str,
        keys: Sequence[str],
        columns: Mapping[str, str],
        named: Sequence[str] = (),
        prefix: str = "",
    ) -> Any:
        return self._on(rel).with_state(rel, table, keys, columns, named, prefix)

    def stage(
        self, table: str, rel: Rel, keys: Sequence[str], columns: Sequence[str], delete: str | None = None
    ) -> None:
        self._on(rel).stage(table, rel, keys, columns, delete)

    def output(self, rel: Rel, names: Sequence[str]) -> Any:
        return self._on(rel).output(rel, names)

    def time_range(self, rel: Rel, child: Node, column: exp.Expression) -> tuple[int, int] | None:
        return self._on(rel).time_range(rel, child, column)  # type: ignore[no-any-return]

    def keyed(
        self,
        rel: Rel,
        child: Node | None,
        keys: Mapping[str, exp.Expression],
        condition: exp.Expression | None,
    ) -> Any:
        return self._on(rel).keyed(rel, child, keys, condition)

    def aggregate(self, rel: Rel, keys: Mapping[str, str], sums: Mapping[str, tuple[str, str]]) -> Any:
        return self._on(rel).aggregate(rel, keys, sums)

    def select(self, rel: Rel, names: Sequence[str]) -> Any:
        return self._on(rel).select(rel, names)

    def drop(self, rel: Rel, names: Sequence[str]) -> Any:
        return self._on(rel).drop(rel, names)

    def empty(self, rel: Rel) -> Any:
        return self._on(rel).empty(rel)

    def joined(self, rel: Rel, node: Join) -> Any:
        return self._on(rel).joined(rel, node)

    def updates(
        self,
        rel: Rel,
        old: Sequence[str],
        new: Sequence[str],
        names: Sequence[str],
        retract: str,
        insert: str,
    ) -> Any:
        return self._on(rel).updates(rel, old, new, names, retract, insert)

    def on_time(self, rel: Rel, window: WindowAssign) -> Any:
        return self._on(rel).on_time(rel, window)

    def windows(self, rel: Rel, window: WindowAssign) -> Any:
        return self._on(rel).windows(rel, window)

    def rank(
        self,
        rel: Rel,
        partition: Sequence[str],
        order: Sequence[exp.Ordered],
        ties: Sequence[str],
        outputs: Mapping[str, str],
    ) -> Any:
        return self._on(rel).rank(rel, partition, order, ties, outputs)

    def copies(self, rel: Rel, count: str) -> Any:
        return self._on(rel).copies(rel, count)

    def numbered(self, rel: Rel, name: str) -> Any:
        return self._on(rel).numbered(rel, name)

    def any_rows(self, rel: Rel) -> bool:
        return self._on(rel).any_rows(rel)  # type: ignore[no-any-return]

    def rename(self, rel: Rel, names: Mapping[str, str]) -> Any:
        return self._on(rel).rename(rel, names)

    def same(self, rel: Rel, left: Sequence[str], right: Sequence[str], name: str) -> Any:
        return self._on(rel).same(rel, left, right, name)

    def one_row(self, rel: Rel) -> dict[str, Any]:
        return self._on(rel).one_row(rel)  # type: ignore[no-any-return]

    # -- several relations: one engine's, keys handed back to Spark where a Spark read is narrowed by them --

    def union(self, rels: Sequence[Rel], branches: Sequence[Node], fields: Sequence[Field]) -> Any:
        return self._on(*rels).union(rels, branches, fields)

    def concat(self, rels: Sequence[Rel]) -> Any:
        return self._on(*rels).concat(rels)

    def pairs(
        self,
        left: Rel,
        right: Rel,
        keys: Sequence[tuple[str, str]],
        both: exp.Expression | None,
        fields: Sequence[Field],
    ) -> Any:
        return self._on(left, right).pairs(left, right, keys, both, fields)

    def padded(self, rel: Rel, other: Rel, left: bool) -> Any:
        return self._on(rel, other).padded(rel, other, left)

    def outer(self, left: Rel, right: Rel, keys: Sequence[tuple[str, str]]) -> Any:
        return self._on(left, right).outer(left, right, keys)

    def stamped(self, rel: Rel, changes: Rel) -> Any:
        return self._on(rel, changes).stamped(rel, changes)

    def exact_sums(
        self, rows: Rel, partial: Rel, groups: Sequence[str], sums: Sequence[tuple[str, str, bool]]
    ) -> Any:
        return self._on(rows, partial).exact_sums(rows, partial, groups, sums)

    def lookup(
        self, rel: Rel, keys: Sequence[tuple[str, str]], table: Rel, how: str, *, null_safe: bool = False
    ) -> Any:
        if isinstance(rel, DataFrame):
            return self.spark.lookup(rel, keys, self._in_spark(table), how, null_safe=null_safe)
        return self._on(rel, table).lookup(rel, keys, table, how, null_safe=null_safe)

    def read_state(self, table: str, template: Rel, keys: Sequence[str], touched: Rel) -> Any:
        if isinstance(template, DataFrame):
            return self.spark.read_state(table, template, keys, self._in_spark(touched))
        return self._on(template, touched).read_state(table, template, keys, touched)

    def expired(self, table: str, keys: Sequence[str], touched: Rel) -> Any:
        return self._on(touched).expired(table, keys, touched)

    def before(
        self,
        node: Node,
        keys: Sequence[exp.Expression],
        known: Sequence[tuple[Rel, Sequence[str]]],
        within: Within | None = None,
        null_safe: bool = False,
    ) -> DataFrame | None:
        known = [(self._in_spark(rel), names) for rel, names in known]
        return self.spark.before(node, keys, known, within, null_safe)

    def table(self, ref: TableRef, version: int, near: Rel, column: str) -> Any:
        return self._on(near).table(ref, version, near, column)
