"""The Z-set operations a delta rule is written against, implemented twice: by Spark (`SparkEngine`, DataFrames,
any batch) and on the driver (`ArrowEngine`, Arrow, a small batch with no Spark job). An operator's rule written
once as `rule(node, engine)` runs on either (incremental/compiler.py), so the two engines cannot drift apart in
what they compute; each engine's form of an operation is here, next to the other's.

A relation is a Z-set: data columns, then `_w` (the weight) and `_mtime`. Between operators each engine keeps
a node's changes in its own form: Spark's named by the node's fields, the driver's by position (`c0, c1, ...`:
a join's two sides may share names). Inside a rule, `named` gives the data columns names of the rule's choosing,
and `output` makes the rule's result the node's changes again.

Expressions come in two kinds. A node's own (a projection, a predicate) are bound sqlglot expressions over its
child's fields: Spark runs their SQL, the driver evaluates them in the subset it computes exactly as Spark
does (driver_expressions.py). A rule's arithmetic over the columns it named (weights, counts) is Spark SQL text,
evaluated the same two ways.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Any, Protocol, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import MapType
from sqlglot import exp

from mvengine.incremental import exact_sum, functions
from mvengine.incremental.batch import Batch
from mvengine.incremental.clock import Clock
from mvengine.incremental.driver import (
    DriverBatch,
    aggregated,
    align,
    concat,
    consolidated,
    data,
    match,
    normalized,
    read_before,
    same_values,
    zset,
)
from mvengine.incremental.driver_expressions import (
    NotOnDriver,
    cast,
    common_type,
    comparison_type,
    evaluate,
    evaluate_all,
    extreme,
    predicate_mask,
)
from mvengine.incremental.key_filters import key_filters, range_filters
from mvengine.incremental.lateness import on_time, on_time_on_driver, time_position
from mvengine.incremental.partition_rows import batch_time
from mvengine.incremental.ranking import nulls_first, ranked
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, quote
from mvengine.plan.nodes import Field, Join, Node, Scan, WindowAssign
from mvengine.storage.api import read_table
from mvengine.storage.tables import TableRef

R = TypeVar("R")
# A TIMESTAMP column bound over a node's fields, and the least and greatest microseconds since the epoch wanted
Within = tuple[exp.Expression, int, int]


class Engine(Protocol[R]):
    """What a delta rule may do with the changes of a batch (relations of type R)."""

    def node_id(self, node: Node) -> int:
        """The node's position in the plan: names its state tables."""

    def changes(self, node: Scan) -> R:
        """The changes of the input the scan reads, in this batch."""

    def child(self, node: Node) -> R:
        """The changes of a child node in this batch (its rule run first)."""

    def project(
        self, rel: R, child: Node, expressions: Sequence[exp.Expression], fields: Sequence[Field]
    ) -> R:
        """Each change row projected: `expressions` (bound over `child`'s fields) evaluated as `fields`."""

    def mask(self, rel: R, child: Node, predicate: exp.Expression) -> R:
        """The change rows `predicate` (bound over `child`'s fields) holds for: true, not false or NULL."""

    def union(self, rels: Sequence[R], branches: Sequence[Node], fields: Sequence[Field]) -> R:
        """The branches' changes in one, by column position, each widened to the types Spark gives the union."""

    def named(self, rel: R, child: Node, names: Sequence[str]) -> R:
        """`child`'s changes with its data columns named `names`, for a rule's own operations."""

    def consolidate(self, rel: R, names: Sequence[str]) -> R:
        """Equal rows (by `names`, as Spark groups them) summed into one: net weight, latest time; zeros gone."""

    def compute(self, rel: R, columns: Mapping[str, str | exp.Expression]) -> R:
        """Columns added or replaced, each the value of its Spark SQL expression over `rel`'s named columns
        (all evaluated over `rel` as it comes: one may not read another's new value). An expression that
        changes from batch to batch (a batch's number) is given built: the driver would parse its text anew."""

    def where(self, rel: R, condition: str) -> R:
        """The rows a Spark SQL condition over `rel`'s named columns holds for."""

    def keep(self, rel: R) -> R:
        """Computed once here, for a relation read more than once (a no-op on the driver)."""

    def with_state(
        self,
        rel: R,
        table: str,
        keys: Sequence[str],
        columns: Mapping[str, str],
        named: Sequence[str] = (),
        prefix: str = "",
    ) -> R:
        """`rel` with `columns` (name → SQL type), named with `prefix`: the values of state table `table` for each
        row's `keys` (NULL matching NULL; the table names them `named`, or alike; without keys, its one row), as
        the table was before the batch; NULL where it holds none (or does not exist)."""

    def stage(
        self, table: str, rel: R, keys: Sequence[str], columns: Sequence[str], delete: str | None = None
    ) -> None:
        """Queue `rel`'s rows (`keys` and `columns`) to state table `table`: each key's new row, or (where its
        column `delete` is true) its removal; committed with the batch's other writes."""

    def output(self, rel: R, names: Sequence[str]) -> R:
        """The rule's result as the node's changes: the data columns `names` in order, `_w`, `_mtime`."""

    # -- keyed joins: relations that keep a node's own columns (as `child` gives them) next to named ones ----

    def changed(self, node: Node) -> bool:
        """Whether any input under `node` changed in this batch, or the clock its temporal filters read moved
        (if not, its changes are empty)."""

    def clock(self) -> Clock | None:
        """The time NOW() reads in this batch, and read in the batch before (None: no temporal filter)."""

    def before(
        self,
        node: Node,
        keys: Sequence[exp.Expression],
        known: Sequence[tuple[R, Sequence[str]]],
        within: Within | None = None,
        null_safe: bool = False,
    ) -> R | None:
        """`node`'s rows before the batch, as inserts (None when the view starts from nothing): at least those
        whose `keys` (bound over `node`'s fields) take a value that a relation of `known` holds in its named
        key columns (a NULL key too, when `null_safe`: a group's), and whose time lies `within` a range; the
        driver reads only those, Spark all of them in the range (the files whose statistics exclude it are
        skipped)."""

    def time_range(self, rel: R, child: Node, column: exp.Expression) -> tuple[int, int] | None:
        """The least and greatest value of TIMESTAMP `column` (bound over `child`'s fields; `rel` is its changes,
        maybe with columns added after them), in microseconds since the epoch; None when no row has one."""

    def keyed(
        self, rel: R, child: Node | None, keys: Mapping[str, exp.Expression], condition: exp.Expression | None
    ) -> R:
        """`rel` with named key columns added: each the value of its expression, NULL where `condition` is not
        true; the expressions are bound over `child`'s fields (`rel` is its changes) or, without `child`, over
        `rel`'s named columns."""

    def pairs(
        self,
        left: R,
        right: R,
        keys: Sequence[tuple[str, str]],
        both: exp.Expression | None,
        fields: Sequence[Field],
    ) -> R:
        """The pairs of rows whose named keys are equal (a NULL key matches nothing) and for which `both`
        (bound over `fields`: the left's then the right's) holds: the two rows' columns side by side,
        weights multiplied, the later time, then the other columns a rule named; key columns dropped."""

    def lookup(
        self, rel: R, keys: Sequence[tuple[str, str]], table: R, how: str, *, null_safe: bool = False
    ) -> R:
        """`rel`'s rows by whether their named keys equal those of `table`, a relation of named columns only
        (NULL matches nothing, or with `null_safe` NULL): `semi` keeps those that match, `anti` those that do
        not, `inner` and `left` add `table`'s other columns (NULL where `left` finds no match)."""

    def aggregate(self, rel: R, keys: Mapping[str, str], sums: Mapping[str, tuple[str, str]]) -> R:
        """One row per group of the named `keys` (output name → column; NULLs form one group, as Spark groups):
        the group's keys and each `sums` output, a function of a column: `sum` (beyond its type, Spark's error),
        `min`, `max` (NaN above every number, as in Spark), `count` (of its non-NULL values), `sorted_list` (its
        non-NULL values in ascending order; Spark only), or by `_mtime` (rows of one time in any order) `first`,
        `last`, `first_valid`, `last_valid` (the first or last non-NULL value). Without keys, one row, also over
        no rows (as Spark's global aggregate)."""

    def concat(self, rels: Sequence[R]) -> R:
        """Relations of the same columns in one."""

    def select(self, rel: R, names: Sequence[str]) -> R:
        """Only the named columns, in this order."""

    def drop(self, rel: R, names: Sequence[str]) -> R:
        """Without the named columns."""

    def padded(self, rel: R, other: R, left: bool) -> R:
        """A join's unmatched rows: `rel`'s columns with NULLs for those of `other`'s rows (a side's changes,
        for its columns), `rel`'s on the `left` or the right; its weight and time."""

    def empty(self, rel: R) -> R:
        """No rows, `rel`'s columns."""

    def joined(self, rel: R, node: Join) -> R:
        """A join's pairs and padded rows (its sides' columns, `_w`, `_mtime`) as the join's changes."""

    # -- a GROUP BY's accumulators (incremental/accumulators.py) -----------------------------------------------

    def exact_sums(
        self, rows: R, partial: R, groups: Sequence[str], sums: Sequence[tuple[str, str, bool]]
    ) -> R:
        """`partial` (a row per group of `groups`, as `aggregate` gives) with, for each (name, column, of squares)
        of `sums`, the exact Σ w·x (or w·x²) of `rows`' double `column` per group, as a digit map
        (incremental/exact_sum.py)."""

    def updates(
        self, rel: R, old: Sequence[str], new: Sequence[str], names: Sequence[str], retract: str, insert: str
    ) -> R:
        """Each row as up to two changes named `names`: its `old` columns retracted (weight -1) where its
        `retract` column is true, its `new` columns inserted (+1) where `insert` is; its `_mtime`."""

    # -- event-time windows ------------------------------------------------------------------------------------

    def on_time(self, rel: R, window: WindowAssign) -> R:
        """The changes of `window`'s child less the rows later than the view's allowed lateness, which the batch
        keeps apart (incremental/lateness.py)."""

    def windows(self, rel: R, window: WindowAssign) -> R:
        """The changes of `window`'s child, each row once per window holding its time (none for a NULL time),
        with the window's columns: a struct named by its qualifier, or start, end and time (its last instant)."""

    # -- ranking ----------------------------------------------------------------------------------------------

    def rank(
        self,
        rel: R,
        partition: Sequence[str],
        order: Sequence[exp.Ordered],
        ties: Sequence[str],
        outputs: Mapping[str, str],
    ) -> R:
        """`rel` with each `outputs` column: per partition (the named columns), `row_number` in the total order
        (`order`, over the named columns, then `ties` ascending with NULLs first), `rank` or `dense_rank` in
        `order` alone."""

    def copies(self, rel: R, count: str) -> R:
        """Each row `count` times (its named column: a positive multiplicity)."""

    def numbered(self, rel: R, name: str) -> R:
        """`rel` with a named column that tells its rows apart (distinct numbers, the same wherever the result
        is used): a row's identity, where equal rows must be counted apart."""

    def any_rows(self, rel: R) -> bool:
        """Whether `rel` holds a row (computed now)."""

    def stamped(self, rel: R, changes: R) -> R:
        """`rel` with `_mtime` (added, or replaced) the latest of `changes`': the time of what a recomputation of
        some rows emits."""

    def expired(self, table: str, keys: Sequence[str], touched: R) -> R | None:
        """The rows of state table `table` (all its columns) whose keys the view's state_ttl expires in this
        batch: last touched at or before the clock's `expire_through`, and not among the named `keys` of
        `touched` (NULL matching NULL); None when none does (or the view has no state_ttl). Counted in the
        batch's `expired`."""

    def holds_state(self, table: str) -> bool:
        """Whether state table `table` has rows before the batch (False: it is new, or the view is rebuilt),
        known without reading it: a rule whose state starts empty can skip merging into it."""

    def read_state(self, table: str, template: R, keys: Sequence[str], touched: R) -> R:
        """The rows of state table `table` whose named `keys` equal those of a row of `touched` (NULL matching
        NULL; without keys, every row), as they were before the batch: `template`'s columns and types (empty
        where none)."""

    # -- a view's changelog (runtime/emit.py) ------------------------------------------------------------------

    def rename(self, rel: R, names: Mapping[str, str]) -> R:
        """`rel` with the columns `names` holds renamed (old name → new)."""

    def outer(self, left: R, right: R, keys: Sequence[tuple[str, str]]) -> R:
        """The pairs of rows whose named keys are equal (NULL matching NULL; without keys, every pair), and the
        rows of either with no match, padded with NULLs: both sides' columns, which have distinct names."""

    def same(self, rel: R, left: Sequence[str], right: Sequence[str], name: str) -> R:
        """`rel` with `name`: whether each `left` column holds the same value as its `right` one (NULL the same
        as NULL, NaN as NaN, -0.0 as 0.0, as Spark compares rows)."""

    def one_row(self, rel: R) -> dict[str, Any]:
        """The values of `rel`'s first row (computed now), by column name."""

    def table(self, ref: TableRef, version: int, near: R, column: str) -> R:
        """Table `ref` at `version`, its columns by name: at least the rows whose `column` takes a value of
        `near`'s column of that name (the driver reads those, or all when it cannot narrow; Spark reads all)."""


@dataclass
class SparkEngine:
    batch: Batch
    child_delta: Callable[[Node, Batch], DataFrame]
    # Whether `keep` may collect a small relation to the driver (Batch.keep_small); False where the rows are
    # known to be many: the attempt would compute them once more, and a local relation of ~100,000 rows is
    # serialized into every task of every job that reads it.
    collect_small: bool = True

    def node_id(self, node: Node) -> int:
        return self.batch.node_id(node)

    def changes(self, node: Scan) -> DataFrame:
        return self.batch.changes[node.input]

    def child(self, node: Node) -> DataFrame:
        return self.child_delta(node, self.batch)

    def project(
        self, rel: DataFrame, child: Node, expressions: Sequence[exp.Expression], fields: Sequence[Field]
    ) -> DataFrame:
        columns = [F.expr(e.sql("spark")).alias(f.name) for e, f in zip(expressions, fields)]
        return rel.select(*columns, F.col(WEIGHT), F.col(MTIME))

    def mask(self, rel: DataFrame, child: Node, predicate: exp.Expression) -> DataFrame:
        return rel.where(F.expr(predicate.sql("spark")))

    def union(
        self, rels: Sequence[DataFrame], branches: Sequence[Node], fields: Sequence[Field]
    ) -> DataFrame:
        # Spark widens the branches' types (int and bigint give bigint), as the plan does.
        return reduce(
            DataFrame.unionAll,
            [
                rel.select(
                    *[F.col(quote(s.name)).alias(t.name) for s, t in zip(branch.fields, fields)],
                    F.col(WEIGHT),
                    F.col(MTIME),
                )
                for rel, branch in zip(rels, branches)
            ],
        )

    def named(self, rel: DataFrame, child: Node, names: Sequence[str]) -> DataFrame:
        rel = rel.select(*[F.col(quote(f.name)) for f in child.fields], WEIGHT, MTIME)
        return rel.toDF(*names, WEIGHT, MTIME)

    def consolidate(self, rel: DataFrame, names: Sequence[str]) -> DataFrame:
        return consolidate(rel, list(names))

    def compute(self, rel: DataFrame, columns: Mapping[str, str | exp.Expression]) -> DataFrame:
        for sql in columns.values():
            if isinstance(sql, str) and "mv_" in sql:
                functions.register(self.batch.spark, sql)
        return rel.withColumns({name: F.expr(_text(sql)) for name, sql in columns.items()})

    def where(self, rel: DataFrame, condition: str) -> DataFrame:
        return rel.where(F.expr(condition))

    def keep(self, rel: DataFrame) -> DataFrame:
        return self.batch.keep_small(rel) if self.collect_small else self.batch.keep(rel)

    def with_state(
        self,
        rel: DataFrame,
        table: str,
        keys: Sequence[str],
        columns: Mapping[str, str],
        named: Sequence[str] = (),
        prefix: str = "",
    ) -> DataFrame:
        names = list(named or keys)
        touched = rel.select(*[F.col(quote(k)).alias(n) for k, n in zip(keys, names)])
        template = touched.select("*", *[F.lit(None).cast(t).alias(c) for c, t in columns.items()]).limit(0)
        state = self.batch.state.read_candidates(table, template, touched, names).alias("s")
        on = [F.col(f"r.{quote(k)}").eqNullSafe(F.col(f"s.{quote(n)}")) for k, n in zip(keys, names)]
        return (
            rel.alias("r")
            .join(state, reduce(lambda a, b: a & b, on, F.lit(True)), "left")
            .select("r.*", *[F.col(f"s.{quote(c)}").alias(prefix + c) for c in columns])
        )

    def stage(
        self,
        table: str,
        rel: DataFrame,
        keys: Sequence[str],
        columns: Sequence[str],
        delete: str | None = None,
    ) -> None:
        names = [*keys, *columns, *([delete] if delete else [])]
        self.batch.state.stage(table, rel.select(*[quote(c) for c in names]), list(keys), delete)

    def output(self, rel: DataFrame, names: Sequence[str]) -> DataFrame:
        return rel.select(*[quote(c) for c in names], WEIGHT, MTIME)

    def changed(self, node: Node) -> bool:
        return self.batch.changed(node)

    def clock(self) -> Clock | None:
        return self.batch.clock

    def before(
        self,
        node: Node,
        keys: Sequence[exp.Expression],
        known: Sequence[tuple[DataFrame, Sequence[str]]],
        within: Within | None = None,
        null_safe: bool = False,
    ) -> DataFrame | None:
        before = self.batch.as_before()
        if before is None:
            return None
        rows = self.child_delta(node, before)
        if within is not None:  # (literals: Delta's data skipping compares them to the files' statistics)
            column, low, high = within
            times = [F.timestamp_micros(F.lit(t)) for t in (low, high)]
            rows = rows.where(F.expr(column.sql("spark")).between(*times))
        return rows

    def time_range(self, rel: DataFrame, child: Node, column: exp.Expression) -> tuple[int, int] | None:
        micros = F.unix_micros(F.expr(column.sql("spark")))
        low, high = rel.agg(F.min(micros), F.max(micros)).first()  # type: ignore[misc]
        return None if low is None else (low, high)

    def keyed(
        self,
        rel: DataFrame,
        child: Node | None,
        keys: Mapping[str, exp.Expression],
        condition: exp.Expression | None,
    ) -> DataFrame:
        values = {}
        for name, key in keys.items():
            value = F.expr(key.sql("spark"))
            values[name] = value if condition is None else F.when(F.expr(condition.sql("spark")), value)
        return rel.withColumns(values)

    def pairs(
        self,
        left: DataFrame,
        right: DataFrame,
        keys: Sequence[tuple[str, str]],
        both: exp.Expression | None,
        fields: Sequence[Field],
    ) -> DataFrame:
        # Each side's weight and time renamed (the two sides' columns may share names, told apart by their
        # qualifiers), the pairs' own added last.
        left = left.withColumnsRenamed({WEIGHT: "_lw", MTIME: "_lt"})
        right = right.withColumnsRenamed({WEIGHT: "_rw", MTIME: "_rt"})
        pairs = left.join(right, _equal(keys), "inner")
        if both is not None:
            pairs = pairs.where(F.expr(both.sql("spark")))
        pairs = pairs.withColumns(
            {WEIGHT: F.col("_lw") * F.col("_rw"), MTIME: F.greatest(F.col("_lt"), F.col("_rt"))}
        )
        return pairs.drop("_lw", "_lt", "_rw", "_rt", *[k for pair in keys for k in pair])

    def lookup(
        self,
        rel: DataFrame,
        keys: Sequence[tuple[str, str]],
        table: DataFrame,
        how: str,
        *,
        null_safe: bool = False,
    ) -> DataFrame:
        # The table's keys renamed apart: the two often share names (and lineage, which Spark cannot tell apart).
        renamed = table.withColumnsRenamed({t: f"_key{i}" for i, (_, t) in enumerate(keys)})
        on = _equal([(r, f"_key{i}") for i, (r, _) in enumerate(keys)], null_safe)
        found = rel.join(renamed, on, {"semi": "left_semi", "anti": "left_anti"}.get(how, how))
        return found if how in ("semi", "anti") else found.drop(*[f"_key{i}" for i in range(len(keys))])

    def aggregate(
        self, rel: DataFrame, keys: Mapping[str, str], sums: Mapping[str, tuple[str, str]]
    ) -> DataFrame:
        time = F.col(MTIME)
        return rel.groupBy(*[F.col(quote(c)).alias(name) for name, c in keys.items()]).agg(
            *[_SPARK_AGGREGATES[f](F.col(quote(c)), time).alias(name) for name, (f, c) in sums.items()]
        )

    def exact_sums(
        self,
        rows: DataFrame,
        partial: DataFrame,
        groups: Sequence[str],
        sums: Sequence[tuple[str, str, bool]],
    ) -> DataFrame:
        return exact_sum.with_sums(rows, partial, groups, sums)

    def updates(
        self,
        rel: DataFrame,
        old: Sequence[str],
        new: Sequence[str],
        names: Sequence[str],
        retract: str,
        insert: str,
    ) -> DataFrame:
        # Both changes come from the same row, through one explode: no union reads `rel` twice. _mtime rides
        # inside the exploded struct: beside it, Spark's nested-column pruning through the explode can drop it
        # when a filter (a HAVING) sits above (INTERNAL_ERROR_ATTRIBUTE_NOT_FOUND). The changes that do not hold
        # are filtered after the explode, not inside its array: a `filter` lambda has no generated code, and
        # made the stage 5 to 7 times slower (an aggregate's 1M-group bootstrap: 3.2 s of a 17 s refresh).
        def change(weight: int, columns: Sequence[str], on: str) -> Column:
            row = F.struct(*[F.col(quote(c)).alias(n) for c, n in zip(columns, names)])
            weighted = F.lit(weight).cast("long").alias(WEIGHT)
            return F.struct(
                weighted, row.alias("row"), F.col(MTIME).alias(MTIME), F.col(quote(on)).alias("on")
            )

        emitted = F.explode(F.array(change(-1, old, retract), change(1, new, insert))).alias("_e")
        return (
            rel.select(emitted)
            .where(F.col("_e.on"))
            .select(
                *[F.col("_e.row").getField(n).alias(n) for n in names],
                F.col(f"_e.{WEIGHT}").alias(WEIGHT),
                F.col(f"_e.{MTIME}").alias(MTIME),
            )
        )

    def concat(self, rels: Sequence[DataFrame]) -> DataFrame:
        return reduce(DataFrame.unionAll, rels)

    def select(self, rel: DataFrame, names: Sequence[str]) -> DataFrame:
        return rel.select(*[quote(c) for c in names])

    def drop(self, rel: DataFrame, names: Sequence[str]) -> DataFrame:
        return rel.drop(*names)

    def padded(self, rel: DataFrame, other: DataFrame, left: bool) -> DataFrame:
        # An outer join to none of `other`'s rows gives its columns, with their qualifiers, all NULL.
        rel = rel.withColumnsRenamed({WEIGHT: "_pw", MTIME: "_pt"})
        nothing = other.where(F.lit(False)).withColumnsRenamed({WEIGHT: "_ow", MTIME: "_ot"})
        joined = (
            rel.join(nothing, F.lit(False), "left_outer")
            if left
            else nothing.join(rel, F.lit(False), "right_outer")
        )
        return joined.withColumns({WEIGHT: F.col("_pw"), MTIME: F.col("_pt")}).drop(
            "_pw", "_pt", "_ow", "_ot"
        )

    def empty(self, rel: DataFrame) -> DataFrame:
        return rel.limit(0)

    def joined(self, rel: DataFrame, node: Join) -> DataFrame:
        if all(f.qualifier is None for f in node.fields):  # the view's root: its columns as the view names
            return rel.toDF(*[f.name for f in node.fields], WEIGHT, MTIME)
        return rel

    def on_time(self, rel: DataFrame, window: WindowAssign) -> DataFrame:
        return on_time(window, rel, self.batch)

    def windows(self, rel: DataFrame, window: WindowAssign) -> DataFrame:
        spec = window.spec
        assigned = F.window(
            F.expr(window.time.sql("spark")),
            f"{spec.size} microseconds",
            f"{spec.slide} microseconds",
            f"{spec.offset} microseconds",
        )
        if spec.qualifier:  # GROUP BY window(...) reads `window`.`start`, as Spark does
            return rel.select("*", assigned.alias(spec.qualifier)).where(F.col(spec.qualifier).isNotNull())
        windowed = rel.select("*", assigned.alias("_win")).where(F.col("_win").isNotNull())
        names = [f.name for f in window.fields[len(window.child.fields) :]]
        bounds = [
            F.col("_win.start"),
            F.col("_win.end"),
            F.col("_win.end") - F.expr("INTERVAL 1 MICROSECOND"),
        ]
        return windowed.withColumns(dict(zip(names, bounds))).drop("_win")

    def rank(
        self,
        rel: DataFrame,
        partition: Sequence[str],
        order: Sequence[exp.Ordered],
        ties: Sequence[str],
        outputs: Mapping[str, str],
    ) -> DataFrame:
        keys = []
        for o in order:
            c, first = F.expr(o.this.sql("spark")), nulls_first(o)
            if o.args.get("desc"):
                keys.append(c.desc_nulls_first() if first else c.desc_nulls_last())
            else:
                keys.append(c.asc_nulls_first() if first else c.asc_nulls_last())
        tie_keys = [  # (maps cannot be ordered, and are left out)
            F.col(quote(c)).asc_nulls_first() for c in ties if not isinstance(rel.schema[c].dataType, MapType)
        ]
        parts = [F.col(quote(c)) for c in partition]
        functions = {"row_number": F.row_number, "rank": F.rank, "dense_rank": F.dense_rank}
        columns = [
            functions[f]()
            .over(Window.partitionBy(*parts).orderBy(*keys, *(tie_keys if f == "row_number" else [])))
            .alias(name)
            for name, f in outputs.items()
        ]
        return rel.select("*", *columns)

    def copies(self, rel: DataFrame, count: str) -> DataFrame:
        copy = F.explode(F.sequence(F.lit(1), F.col(quote(count)).cast("int")))
        return rel.select("*", copy.alias("_copy")).drop("_copy")

    def numbered(self, rel: DataFrame, name: str) -> DataFrame:
        # (kept: the numbers depend on the partitions, which a plan evaluated twice need not reproduce)
        return self.batch.keep(rel.withColumn(name, F.monotonically_increasing_id()))

    def any_rows(self, rel: DataFrame) -> bool:
        return not bool(rel.isEmpty())

    def stamped(self, rel: DataFrame, changes: DataFrame) -> DataFrame:
        return rel.withColumn(MTIME, batch_time(changes))

    def expired(self, table: str, keys: Sequence[str], touched: DataFrame) -> DataFrame | None:
        clock = self.batch.clock
        through = None if clock is None else clock.expire_through
        rows = None if through is None else self.batch.state.expired(table, through)
        if rows is None:
            return None
        keys_of = touched.select(*map(quote, keys))
        rows = self.keep(self.lookup(rows, [(k, k) for k in keys], keys_of, "anti", null_safe=True))
        count = rows.count()
        self.batch.expired += count
        return rows if count else None

    def holds_state(self, table: str) -> bool:
        return self.batch.state.holds(table)

    def read_state(
        self, table: str, template: DataFrame, keys: Sequence[str], touched: DataFrame
    ) -> DataFrame:
        return self.batch.state.read_for(table, template, touched, list(keys))

    def rename(self, rel: DataFrame, names: Mapping[str, str]) -> DataFrame:
        return rel.withColumnsRenamed(dict(names))

    def outer(self, left: DataFrame, right: DataFrame, keys: Sequence[tuple[str, str]]) -> DataFrame:
        return left.join(right, _equal(keys, null_safe=True), "full_outer")

    def same(self, rel: DataFrame, left: Sequence[str], right: Sequence[str], name: str) -> DataFrame:
        def row(names: Sequence[str]) -> Column:  # (fields named alike: a struct's type includes its names)
            return F.struct(*[F.col(quote(c)).alias(f"f{i}") for i, c in enumerate(names)])

        return rel.withColumn(name, row(left).eqNullSafe(row(right)))

    def one_row(self, rel: DataFrame) -> dict[str, Any]:
        return rel.collect()[0].asDict()

    def table(self, ref: TableRef, version: int, near: DataFrame, column: str) -> DataFrame:
        return read_table(self.batch.spark, ref, version=version)


_SPARK_AGGREGATES: dict[str, Callable[[Column, Column], Column]] = {  # a function of a column and `_mtime`
    "sum": lambda c, time: F.sum(c),
    "min": lambda c, time: F.min(c),
    "max": lambda c, time: F.max(c),
    "count": lambda c, time: F.count(c),
    "sorted_list": lambda c, time: F.sort_array(F.collect_list(c)),
    "first": lambda c, time: F.min_by(c, time),
    "last": lambda c, time: F.max_by(c, time),
    "first_valid": lambda c, time: F.min_by(c, F.when(c.isNotNull(), time)),
    "last_valid": lambda c, time: F.max_by(c, F.when(c.isNotNull(), time)),
}


def _equal(keys: Sequence[tuple[str, str]], null_safe: bool = False) -> Column:
    if not keys:
        return F.lit(True)
    return reduce(
        lambda a, b: a & b,
        [
            F.col(quote(a)).eqNullSafe(F.col(quote(b))) if null_safe else F.col(quote(a)) == F.col(quote(b))
            for a, b in keys
        ],
    )


@dataclass
class ArrowEngine:
    batch: DriverBatch
    child_delta: Callable[[Node, DriverBatch], pa.Table]

    def node_id(self, node: Node) -> int:
        return self.batch.node_id(node)

    def changes(self, node: Scan) -> pa.Table:
        changes = self.batch.changes[node.input]
        return zset(
            [changes.column(f.name) for f in node.fields], changes.column(WEIGHT), changes.column(MTIME)
        )

    def child(self, node: Node) -> pa.Table:
        return self.child_delta(node, self.batch)

    def project(
        self, rel: pa.Table, child: Node, expressions: Sequence[exp.Expression], fields: Sequence[Field]
    ) -> pa.Table:
        return zset(evaluate_all(expressions, rel, child.fields), rel.column(WEIGHT), rel.column(MTIME))

    def mask(self, rel: pa.Table, child: Node, predicate: exp.Expression) -> pa.Table:
        return rel.filter(predicate_mask(predicate, rel, child.fields))

    def union(self, rels: Sequence[pa.Table], branches: Sequence[Node], fields: Sequence[Field]) -> pa.Table:
        types = [common_type([r.schema.field(i).type for r in rels]) for i in range(len(fields))]
        return concat(
            [
                zset([cast(c, t) for c, t in zip(data(r), types)], r.column(WEIGHT), r.column(MTIME))
                for r in rels
            ]
        )

    def named(self, rel: pa.Table, child: Node, names: Sequence[str]) -> pa.Table:
        return rel.rename_columns([*names, WEIGHT, MTIME])

    def consolidate(self, rel: pa.Table, names: Sequence[str]) -> pa.Table:
        return consolidated(rel.select([*names, WEIGHT, MTIME])).rename_columns([*names, WEIGHT, MTIME])

    def compute(self, rel: pa.Table, columns: Mapping[str, str | exp.Expression]) -> pa.Table:
        source, fields = rel, _fields(rel)
        # Each SQL once (accumulators of one argument share some), over the relation as it came.
        evaluated: dict[str | int, pa.ChunkedArray] = {}
        for name, sql in columns.items():
            key = sql if isinstance(sql, str) else id(sql)
            if key not in evaluated:
                evaluated[key] = evaluate(_parsed(sql), source, fields)
            column = evaluated[key]
            i = rel.schema.get_field_index(name)
            rel = rel.set_column(i, name, column) if i >= 0 else rel.append_column(name, column)
        return rel

    def where(self, rel: pa.Table, condition: str) -> pa.Table:
        return rel.filter(predicate_mask(_parsed(condition), rel, _fields(rel)))

    def keep(self, rel: pa.Table) -> pa.Table:
        return rel

    def with_state(
        self,
        rel: pa.Table,
        table: str,
        keys: Sequence[str],
        columns: Mapping[str, str],
        named: Sequence[str] = (),
        prefix: str = "",
    ) -> pa.Table:
        schema = self.batch.state.schema(table)
        if schema is None:
            return self.compute(rel, {prefix + c: f"CAST(NULL AS {t})" for c, t in columns.items()})
        if set(columns) - set(schema.names):
            raise NotOnDriver(f"state {table} lacks columns this rule reads")
        names = list(named or keys)
        rows, found = self._state_rows(table, rel, keys, names)
        if names:
            index = align([rows.column(n) for n in names], [found.column(n) for n in names])
        else:  # a table of one row
            _, index = _every_pair(rel.num_rows, min(found.num_rows, 1), "left outer")
            assert index is not None  # an outer join pairs rows
        for c in columns:
            rel = rel.append_column(prefix + c, found.column(c).take(index))
        return rel

    def _state_rows(
        self, table: str, rel: pa.Table, keys: Sequence[str], names: Sequence[str]
    ) -> tuple[pa.Table, pa.Table]:
        """`rel`'s keys in the state table's names and types, and the table's rows of those keys (before the
        batch; without keys, all of them)."""
        schema = self.batch.state.schema(table)
        assert schema is not None  # (the callers' check)
        rows = pa.table([cast(rel.column(k), schema.field(n).type) for k, n in zip(keys, names)], names=names)
        state = self.batch.state
        found = state.lookup(table, rows, names) if names else state.read_all(table)
        assert found is not None  # its schema was found
        return rows, found

    def stage(
        self,
        table: str,
        rel: pa.Table,
        keys: Sequence[str],
        columns: Sequence[str],
        delete: str | None = None,
    ) -> None:
        schema = self.batch.state.schema(table)  # (None: a new table, of the rows' own types)
        names = [*keys, *columns]
        if schema is not None and set(schema.names) - set(names):
            raise NotOnDriver(f"state {table} holds columns this rule does not compute")
        rows = pa.table(
            [rel.column(c) if schema is None else cast(rel.column(c), schema.field(c).type) for c in names]
            + ([rel.column(delete)] if delete else []),
            names=[*names, *([delete] if delete else [])],
        )
        self.batch.state.stage(table, rows, list(keys), delete)

    def output(self, rel: pa.Table, names: Sequence[str]) -> pa.Table:
        return zset([rel.column(c) for c in names], rel.column(WEIGHT), rel.column(MTIME))

    def changed(self, node: Node) -> bool:
        return self.batch.changed(node)

    def clock(self) -> Clock | None:
        return self.batch.clock

    def before(
        self,
        node: Node,
        keys: Sequence[exp.Expression],
        known: Sequence[tuple[pa.Table, Sequence[str]]],
        within: Within | None = None,
        null_safe: bool = False,
    ) -> pa.Table | None:
        values = [_aligned([rel.column(names[i]) for rel, names in known]) for i in range(len(keys))]
        ranges = {} if within is None else range_filters(node, *within)
        before = self.batch.as_before(key_filters(node, keys, values, null_safe), ranges)
        return None if before is None else self.child_delta(node, before)

    def time_range(self, rel: pa.Table, child: Node, column: exp.Expression) -> tuple[int, int] | None:
        times = evaluate(column, rel, child.fields)
        low, high = pc.min_max(pc.cast(times, pa.int64())).values()
        return None if low.as_py() is None else (low.as_py(), high.as_py())

    def keyed(
        self,
        rel: pa.Table,
        child: Node | None,
        keys: Mapping[str, exp.Expression],
        condition: exp.Expression | None,
    ) -> pa.Table:
        fields = _fields(rel) if child is None else child.fields
        holds = None if condition is None else predicate_mask(condition, rel, fields)
        for name, key in keys.items():
            value = evaluate(key, rel, fields)
            rel = rel.append_column(
                name, value if holds is None else pc.if_else(holds, value, pa.scalar(None, value.type))
            )
        return rel

    def pairs(
        self,
        left: pa.Table,
        right: pa.Table,
        keys: Sequence[tuple[str, str]],
        both: exp.Expression | None,
        fields: Sequence[Field],
    ) -> pa.Table:
        li, ri = _match(left, right, keys, "inner")
        assert ri is not None  # an inner join pairs rows
        left, right = left.take(li), right.take(ri)
        weight = pc.multiply_checked(left.column(WEIGHT), right.column(WEIGHT))
        later = extreme("max", [left.column(MTIME), right.column(MTIME)])
        pairs = zset([*_data(left), *_data(right)], weight, later)
        dropped = {k for pair in keys for k in pair} | {WEIGHT, MTIME}
        for side in (left, right):  # the other columns a rule named, as Spark keeps them
            for name in side.column_names:
                if not _NODE_COLUMN.fullmatch(name) and name not in dropped:
                    pairs = pairs.append_column(name, side.column(name))
        return pairs if both is None else pairs.filter(predicate_mask(both, pairs, fields))

    def lookup(
        self,
        rel: pa.Table,
        keys: Sequence[tuple[str, str]],
        table: pa.Table,
        how: str,
        *,
        null_safe: bool = False,
    ) -> pa.Table:
        joins = {"semi": "left semi", "anti": "left anti", "left": "left outer"}
        mine, found = _match(rel, table, keys, joins.get(how, how), null_safe)
        rel = rel.take(mine)
        if found is None:
            return rel
        for name in table.column_names:
            if name not in {t for _, t in keys}:
                rel = rel.append_column(name, table.column(name).take(found))
        return rel

    def aggregate(
        self, rel: pa.Table, keys: Mapping[str, str], sums: Mapping[str, tuple[str, str]]
    ) -> pa.Table:
        if any(f == "sorted_list" for f, _ in sums.values()):
            raise NotOnDriver("a list of a group's values")
        if any(f not in ("sum", "min", "max", "count") for f, _ in sums.values()):  # in time order (stably)
            rel = rel.take(pc.sort_indices(rel, [(MTIME, "ascending")]))
        table = pa.table(
            [*[normalized(rel.column(c)) for c in keys.values()], *[rel.column(c) for _, c in sums.values()]],
            names=[*keys, *[f"_{i}" for i in range(len(sums))]],
        )
        how = {f"_{i}": _ARROW_AGGREGATES.get(f, f) for i, (f, _) in enumerate(sums.values())}
        return aggregated(table, list(keys), how).rename_columns([*keys, *sums])

    def exact_sums(
        self, rows: pa.Table, partial: pa.Table, groups: Sequence[str], sums: Sequence[tuple[str, str, bool]]
    ) -> pa.Table:
        group_of = (  # each row's row of `partial`
            align([normalized(rows.column(g)) for g in groups], [partial.column(g) for g in groups])
            if groups
            else pa.array(np.zeros(rows.num_rows, np.int64))
        ).to_numpy(zero_copy_only=False)
        weights = rows.column(WEIGHT).to_numpy(zero_copy_only=False)
        summed: dict[tuple[str, bool], pa.Array] = {}  # SUM(x) and AVG(x) both sum x
        for name, column, square in sums:
            if (column, square) not in summed:
                digits = exact_sum.square_digits_np if square else exact_sum.digits_np
                at, slot, digit = digits(rows.column(column))
                summed[column, square] = exact_sum.maps_np(
                    len(partial), group_of[at], slot, digit * weights[at]
                )
            partial = partial.append_column(name, summed[column, square])
        return partial

    def updates(
        self,
        rel: pa.Table,
        old: Sequence[str],
        new: Sequence[str],
        names: Sequence[str],
        retract: str,
        insert: str,
    ) -> pa.Table:
        # A row's retraction comes before its insertion, next to it (a changelog's -U before its +U): the two
        # sides stacked, then taken row by row, retraction first, where each holds.
        def side(weight: int, columns: Sequence[str]) -> pa.Table:
            weights = pa.repeat(pa.scalar(weight, pa.int64()), rel.num_rows)
            return pa.table(
                [*[rel.column(c) for c in columns], weights, rel.column(MTIME)], names=[*names, WEIGHT, MTIME]
            )

        holds = np.empty(2 * rel.num_rows, dtype=bool)
        for at, on in ((0, retract), (1, insert)):
            holds[at::2] = pc.fill_null(rel.column(on), False).to_numpy(zero_copy_only=False)
        code = np.flatnonzero(holds)  # 2 × row + (0: its retraction, 1: its insertion), in order
        index = code // 2 + rel.num_rows * (code % 2)
        return self.concat([side(-1, old), side(1, new)]).take(pa.array(index, pa.int64()))

    def concat(self, rels: Sequence[pa.Table]) -> pa.Table:
        names = rels[0].column_names
        columns = [_aligned([r.column(i) for r in rels]) for i in range(len(names))]
        return pa.table(columns, names=names)

    def select(self, rel: pa.Table, names: Sequence[str]) -> pa.Table:
        return rel.select(list(names))

    def drop(self, rel: pa.Table, names: Sequence[str]) -> pa.Table:
        return rel.drop_columns(list(names))

    def padded(self, rel: pa.Table, other: pa.Table, left: bool) -> pa.Table:
        nulls = [pa.nulls(rel.num_rows, c.type) for c in _data(other)]
        columns = [*_data(rel), *nulls] if left else [*nulls, *_data(rel)]
        return zset(columns, rel.column(WEIGHT), rel.column(MTIME))

    def empty(self, rel: pa.Table) -> pa.Table:
        return rel.schema.empty_table()

    def joined(self, rel: pa.Table, node: Join) -> pa.Table:
        return rel

    def on_time(self, rel: pa.Table, window: WindowAssign) -> pa.Table:
        return on_time_on_driver(window, rel, self.batch)

    def windows(self, rel: pa.Table, window: WindowAssign) -> pa.Table:
        position = time_position(window)
        rel = rel.filter(pc.is_valid(rel.column(position)))
        time = rel.column(position)
        t = time.cast(pa.int64()).to_numpy() if len(rel) else np.zeros(0, dtype=np.int64)
        spec = window.spec
        last_start = t - np.mod(t - spec.offset, spec.slide)
        flat = len(window.fields) - len(window.child.fields) == 3  # start, end and time
        parts = []
        for k in range(-(-spec.size // spec.slide)):
            start = last_start - k * spec.slide
            holds = start + spec.size > t
            rows = rel.filter(pa.array(holds)) if not holds.all() else rel
            start = start[holds]
            bounds = [pa.array(start).cast(time.type), pa.array(start + spec.size).cast(time.type)]
            if flat:
                bounds.append(pa.array(start + spec.size - 1).cast(time.type))
            parts.append(zset([*data(rows), *bounds], rows.column(WEIGHT), rows.column(MTIME)))
        return concat(parts)

    def rank(
        self,
        rel: pa.Table,
        partition: Sequence[str],
        order: Sequence[exp.Ordered],
        ties: Sequence[str],
        outputs: Mapping[str, str],
    ) -> pa.Table:
        keys = [evaluate(o.this, rel, _fields(rel)) for o in order]
        return ranked(rel, partition, order, keys, ties, outputs)

    def copies(self, rel: pa.Table, count: str) -> pa.Table:
        counts = rel.column(count).to_numpy()
        return rel.take(pa.array(np.repeat(np.arange(rel.num_rows), counts)))

    def numbered(self, rel: pa.Table, name: str) -> pa.Table:
        return rel.append_column(name, pa.array(np.arange(rel.num_rows, dtype=np.int64)))

    def any_rows(self, rel: pa.Table) -> bool:
        return bool(rel.num_rows > 0)

    def stamped(self, rel: pa.Table, changes: pa.Table) -> pa.Table:
        latest = pc.max(changes.column(MTIME))
        column = pa.repeat(latest, rel.num_rows)
        i = rel.schema.get_field_index(MTIME)
        return rel.set_column(i, MTIME, column) if i >= 0 else rel.append_column(MTIME, column)

    def expired(self, table: str, keys: Sequence[str], touched: pa.Table) -> pa.Table | None:
        clock = self.batch.clock
        through = None if clock is None else clock.expire_through
        rows = None if through is None else self.batch.state.expired_arrow(table, through)
        if rows is None or not rows.num_rows:
            return None
        touched = pa.table(
            [cast(touched.column(k), rows.schema.field(k).type) for k in keys], names=list(keys)
        )
        rows = self.lookup(rows, [(k, k) for k in keys], touched, "anti", null_safe=True)
        self.batch.expired += rows.num_rows
        return rows if rows.num_rows else None

    def holds_state(self, table: str) -> bool:
        return self.batch.state.holds(table)

    def read_state(self, table: str, template: pa.Table, keys: Sequence[str], touched: pa.Table) -> pa.Table:
        if self.batch.state.schema(table) is None:
            return template.schema.empty_table()
        _, found = self._state_rows(table, touched, keys, keys)
        return pa.table([cast(found.column(f.name), f.type) for f in template.schema], schema=template.schema)

    def rename(self, rel: pa.Table, names: Mapping[str, str]) -> pa.Table:
        return rel.rename_columns([names.get(c, c) for c in rel.column_names])

    def outer(self, left: pa.Table, right: pa.Table, keys: Sequence[tuple[str, str]]) -> pa.Table:
        li, ri = _match(left, right, keys, "full outer", null_safe=True)
        assert ri is not None  # an outer join pairs rows
        pairs = left.take(li)
        for name, column in zip(right.column_names, right.take(ri).columns):
            pairs = pairs.append_column(name, column)
        return pairs

    def same(self, rel: pa.Table, left: Sequence[str], right: Sequence[str], name: str) -> pa.Table:
        equal = pa.chunked_array([pa.repeat(pa.scalar(True), rel.num_rows)])
        for a, b in zip(left, right):
            equal = pc.and_(equal, same_values(rel.column(a), rel.column(b)))
        return rel.append_column(name, equal)

    def one_row(self, rel: pa.Table) -> dict[str, Any]:
        return dict(rel.slice(0, 1).to_pylist()[0])

    def table(self, ref: TableRef, version: int, near: pa.Table, column: str) -> pa.Table:
        return read_before(
            ref, version, (column, near.column(column)), self.batch.state.policy.driver_read_rows
        )


_ARROW_AGGREGATES: dict[str, tuple[str, pc.ScalarAggregateOptions]] = {  # by `_mtime`, the rows sorted so
    "first": ("first", pc.ScalarAggregateOptions(skip_nulls=False)),
    "last": ("last", pc.ScalarAggregateOptions(skip_nulls=False)),
    "first_valid": ("first", pc.ScalarAggregateOptions(skip_nulls=True)),
    "last_valid": ("last", pc.ScalarAggregateOptions(skip_nulls=True)),
}


def _data(rel: pa.Table) -> list[pa.ChunkedArray]:
    """A relation's node columns (`c0, c1, ...`), without the columns a rule named."""
    return [rel.column(name) for name in rel.column_names if _NODE_COLUMN.fullmatch(name)]


_NODE_COLUMN = re.compile(r"c[0-9]+")


def _aligned(columns: Sequence[pa.ChunkedArray]) -> pa.ChunkedArray:
    """Columns in one, in the type Spark compares them in (an INT key meets a BIGINT key as BIGINT)."""
    target = reduce(comparison_type, [c.type for c in columns])
    return pa.chunked_array([chunk for c in columns for chunk in cast(c, target).chunks], target)


def _match(
    rel: pa.Table, table: pa.Table, keys: Sequence[tuple[str, str]], how: str, null_safe: bool = False
) -> tuple[pa.ChunkedArray, pa.ChunkedArray | None]:
    """`match` of the named keys, each pair compared in the type Spark compares them in; without keys, every
    pair of rows (and each side's rows alone as `how` keeps them when the other has none)."""
    if not keys:
        return _every_pair(rel.num_rows, table.num_rows, how)
    mine, theirs = [], []
    for a, b in keys:
        x, y = rel.column(a), table.column(b)
        if x.type != y.type:
            target = comparison_type(x.type, y.type)
            x, y = cast(x, target), cast(y, target)
        mine.append(x)
        theirs.append(y)
    return match(mine, theirs, how, null_safe=null_safe)


def _every_pair(n: int, m: int, how: str) -> tuple[pa.ChunkedArray, pa.ChunkedArray | None]:
    if how in ("left semi", "left anti"):
        kept = np.arange(n) if (m > 0) == (how == "left semi") else np.arange(0)
        return pa.chunked_array([pa.array(kept, pa.int64())]), None
    if n and m:
        li, ri = pa.array(np.repeat(np.arange(n), m)), pa.array(np.tile(np.arange(m), n))
    else:  # the rows of the side that has some, padded as `how` keeps them
        pads = {"left outer": n and not m, "right outer": m and not n, "full outer": True}
        li = pa.array(range(n) if n else [None] * m, pa.int64())
        ri = pa.array(range(m) if m else [None] * n, pa.int64())
        if not pads.get(how, False):
            li, ri = li.slice(0, 0), ri.slice(0, 0)
    return pa.chunked_array([li], pa.int64()), pa.chunked_array([ri], pa.int64())


def _fields(rel: pa.Table) -> tuple[Field, ...]:
    """The table's columns as the fields a rule's SQL names (its types are the columns' own)."""
    return _named_fields(tuple(rel.column_names))


@lru_cache(maxsize=1024)
def _named_fields(names: tuple[str, ...]) -> tuple[Field, ...]:  # (made once per list of names)
    return tuple(Field(name, _UNKNOWN, True) for name in names)


_UNKNOWN = exp.DataType.build("UNKNOWN")  # (built once: building it costs more than most evaluations)


def _parsed(sql: str | exp.Expression) -> exp.Expression:
    return _parsed_text(sql) if isinstance(sql, str) else sql


@lru_cache(maxsize=256)
def _parsed_text(sql: str) -> exp.Expression:
    parsed = sqlglot.parse_one(sql, read="spark")
    assert isinstance(parsed, exp.Expression)  # a rule's own SQL: one expression
    return parsed


def _text(sql: str | exp.Expression) -> str:
    return sql if isinstance(sql, str) else sql.sql("spark")
