"""Spark filters pushed into the delta-rs scan.

A filter is taken over from Spark only when pyarrow evaluates it with exactly Spark's semantics: top-level
columns of integer, string, date, timestamp, boolean or decimal type, with `=`, `<`, `<=`, `>`, `>=`, `IN`
(without NULL in the list), `IS [NOT] NULL` and `NOT` of those. Float columns stay with Spark (NaN orders
differently). Taken filters skip files twice over: on partition values and on per-file min/max statistics
(`file_pruning_predicate`), then drop rows while the Parquet is read. Statistics of timestamps are truncated to
milliseconds by some writers, so timestamps prune files only on partition columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)

_COMPARISONS = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


@dataclass(frozen=True)
class Predicate:
    """One pushed filter, in a picklable form: (op, column, value); `child` for NOT."""

    op: str
    column: str
    value: Any = None
    child: Predicate | None = None

    def expression(self, types: dict[str, pa.DataType] | None = None) -> pc.Expression:
        if self.op == "not":
            assert self.child is not None
            return ~self.child.expression(types)
        field = pc.field(self.column)
        if types is not None and pa.types.is_string(types.get(self.column, pa.null())):
            # Files written by delta-rs's MERGE hold strings as string_view, which does not compare with string.
            field = field.cast(pa.string())
        if self.op == "is_null":
            return field.is_null()
        if self.op == "is_not_null":
            return field.is_valid()
        if self.op == "in":
            # An OR of equalities, not isin(): isin() is false for NULL, but SQL's IN is NULL, so NOT IN differs.
            expression = None
            for v in self.value:
                expression = (field == v) if expression is None else expression | (field == v)
            return expression
        return {
            "=": field == self.value,
            ">": field > self.value,
            ">=": field >= self.value,
            "<": field < self.value,
            "<=": field <= self.value,
        }[self.op]

    def pruning_tuple(self, column_type: pa.DataType, is_partition: bool) -> tuple[str, str, Any] | None:
        """The delta-rs file-pruning form, when the filter can safely skip files."""
        if self.op not in ("=", ">", ">=", "<", "<=", "in"):
            return None
        prunable = (
            pa.types.is_integer(column_type)
            or pa.types.is_string(column_type)
            or pa.types.is_date(column_type)
        )
        if not (is_partition or prunable):
            return None
        # delta-rs reads '' in a pruning predicate as NULL (the Delta protocol's empty partition value), so
        # `s = ''` would skip every file: leave such filters to the row-level evaluation.
        if "" in (self.value if self.op == "in" else [self.value]):
            return None
        return (self.column, self.op, list(self.value) if self.op == "in" else self.value)


def _exact_type(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_boolean(t)
        or pa.types.is_decimal(t)
    )


def to_predicate(f: Filter, types: dict[str, pa.DataType]) -> Predicate | None:
    """The pyarrow-exact form of a Spark filter, or None when Spark must evaluate it."""
    if isinstance(f, Not):
        child = to_predicate(f.child, types)
        return Predicate("not", child.column, child=child) if child else None
    attribute: tuple[str, ...] = getattr(f, "attribute", ())
    if len(attribute) != 1 or attribute[0] not in types or not _exact_type(types[attribute[0]]):
        return None
    column = attribute[0]
    if isinstance(f, IsNull):
        return Predicate("is_null", column)
    if isinstance(f, IsNotNull):
        return Predicate("is_not_null", column)
    value = getattr(f, "value", None)  # the comparisons' and In's
    if isinstance(f, In):
        values = list(f.value)
        return Predicate("in", column, tuple(values)) if values and None not in values else None
    op = _COMPARISONS.get(type(f))
    if op is None or value is None:
        return None
    return Predicate(op, column, value)


def row_filter(predicates: list[Predicate], schema: pa.Schema | None = None) -> pc.Expression | None:
    types = {f.name: f.type for f in schema} if schema is not None else None
    expression = None
    for p in predicates:
        expression = p.expression(types) if expression is None else expression & p.expression(types)
    return expression


def pruning_filters(
    predicates: list[Predicate], types: dict[str, pa.DataType], partition_columns: list[str]
) -> list[tuple[str, str, Any]]:
    tuples = []
    for p in predicates:
        t = p.pruning_tuple(types[p.column], p.column in partition_columns)
        if t is not None:
            tuples.append(t)
    return tuples
