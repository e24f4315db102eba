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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache, reduce
from typing import Protocol, TypeVar

import pyarrow as pa
import sqlglot
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from mvengine.incremental.batch import Batch
from mvengine.incremental.driver import DriverBatch, align, concat, consolidated, data, zset
from mvengine.incremental.driver_expressions import NotOnDriver, cast, common_type, evaluate, predicate_mask
from mvengine.incremental.zset import MTIME, WEIGHT, consolidate, null_safe_equal, quote
from mvengine.plan.nodes import Field, Node, Scan

R = TypeVar("R")


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

    def compute(self, rel: R, columns: Mapping[str, str]) -> R:
        """Columns added or replaced, each the value of its Spark SQL expression over `rel`'s named columns
        (all evaluated over `rel` as it comes: one may not read another's new value)."""

    def where(self, rel: R, condition: str) -> R:
        """The rows a Spark SQL condition over `rel`'s named columns holds for."""

    def keep(self, rel: R) -> R:
        """Computed once here, for a relation read more than once (a no-op on the driver)."""

    def with_state(self, rel: R, table: str, keys: Sequence[str], column: str, sql_type: str) -> R:
        """`rel` with `column`: the value of state table `table` for each row's `keys` (NULL matching NULL),
        as the table was before the batch; NULL where it holds none (or does not exist: of `sql_type`)."""

    def stage(self, table: str, rel: R, keys: Sequence[str], columns: Sequence[str], delete: str) -> None:
        """Queue `rel`'s rows (`keys` and `columns`) to state table `table`: each key's new row, or (where
        `delete` is true) its removal; committed with the batch's other writes."""

    def output(self, rel: R, names: Sequence[str]) -> R:
        """The rule's result as the node's changes: the data columns `names` in order, `_w`, `_mtime`."""


@dataclass
class SparkEngine:
    batch: Batch
    child_delta: Callable[[Node, Batch], DataFrame]

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
        return self.batch.keep_small(consolidate(rel, list(names)))

    def compute(self, rel: DataFrame, columns: Mapping[str, str]) -> DataFrame:
        return rel.withColumns({name: F.expr(sql) for name, sql in columns.items()})

    def where(self, rel: DataFrame, condition: str) -> DataFrame:
        return rel.where(F.expr(condition))

    def keep(self, rel: DataFrame) -> DataFrame:
        return self.batch.keep_small(rel)

    def with_state(
        self, rel: DataFrame, table: str, keys: Sequence[str], column: str, sql_type: str
    ) -> DataFrame:
        template = rel.select(*[quote(k) for k in keys], F.lit(None).cast(sql_type).alias(column)).limit(0)
        state = self.batch.state.read_candidates(table, template, rel, list(keys)).alias("s")
        r = rel.alias("r")
        return r.join(state, null_safe_equal(r, state, list(keys)), "left").select(
            "r.*", F.col(f"s.{quote(column)}").alias(column)
        )

    def stage(
        self, table: str, rel: DataFrame, keys: Sequence[str], columns: Sequence[str], delete: str
    ) -> None:
        self.batch.state.stage(
            table, rel.select(*[quote(c) for c in (*keys, *columns, delete)]), list(keys), delete
        )

    def output(self, rel: DataFrame, names: Sequence[str]) -> DataFrame:
        return rel.select(*[quote(c) for c in names], WEIGHT, MTIME)


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
        values = [evaluate(e, rel, child.fields) for e in expressions]
        return zset(values, rel.column(WEIGHT), rel.column(MTIME))

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

    def compute(self, rel: pa.Table, columns: Mapping[str, str]) -> pa.Table:
        fields = _fields(rel)
        values = {name: evaluate(_parsed(sql), rel, fields) for name, sql in columns.items()}
        for name, column in values.items():
            i = rel.schema.get_field_index(name)
            rel = rel.set_column(i, name, column) if i >= 0 else rel.append_column(name, column)
        return rel

    def where(self, rel: pa.Table, condition: str) -> pa.Table:
        return rel.filter(predicate_mask(_parsed(condition), rel, _fields(rel)))

    def keep(self, rel: pa.Table) -> pa.Table:
        return rel

    def with_state(
        self, rel: pa.Table, table: str, keys: Sequence[str], column: str, sql_type: str
    ) -> pa.Table:
        schema = self.batch.state.schema(table)
        if schema is None:
            raise NotOnDriver(f"state {table} does not exist")
        rows = pa.table([cast(rel.column(k), schema.field(k).type) for k in keys], names=list(keys))
        found = self.batch.state.lookup(table, rows, list(keys))
        assert found is not None  # its schema was found
        old = found.take(align([rows.column(k) for k in keys], [found.column(k) for k in keys]))
        return rel.append_column(column, old.column(column))

    def stage(
        self, table: str, rel: pa.Table, keys: Sequence[str], columns: Sequence[str], delete: str
    ) -> None:
        schema = self.batch.state.schema(table)
        assert schema is not None  # a rule stages into a table it read (with_state)
        names = [*keys, *columns]
        rows = pa.table(
            [cast(rel.column(c), schema.field(c).type) for c in names] + [rel.column(delete)],
            names=[*names, delete],
        )
        self.batch.state.stage(table, rows, list(keys), delete)

    def output(self, rel: pa.Table, names: Sequence[str]) -> pa.Table:
        return zset([rel.column(c) for c in names], rel.column(WEIGHT), rel.column(MTIME))


def _fields(rel: pa.Table) -> list[Field]:
    """The table's columns as the fields a rule's SQL names (its types are the columns' own)."""
    return [Field(name, exp.DataType.build("UNKNOWN"), True) for name in rel.column_names]


@lru_cache(maxsize=256)
def _parsed(sql: str) -> exp.Expression:
    parsed = sqlglot.parse_one(sql, read="spark")
    assert isinstance(parsed, exp.Expression)  # a rule's own SQL: one expression
    return parsed
