"""Ranking on the driver (the engine's `rank`, incremental/engine.py): each row's place in a total order within
its partition, by one Arrow sort. Arrow places NULLs at one end for every key of a sort, and Spark per key: each
key is sorted after a flag of whether it is NULL, which puts its NULLs first or last as its `ORDER BY` says.
Values are compared as Spark orders them: strings by their UTF-8 bytes, -0.0 equal to 0.0; a NaN, which Arrow
orders apart from Spark (Spark: above every number), sends the batch to Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mvengine.incremental.driver_expressions import NotOnDriver


def ranked(
    rel: pa.Table,
    partition: Sequence[str],
    order: Sequence[exp.Ordered],
    keys: Sequence[pa.ChunkedArray],
    ties: Sequence[str],
    outputs: Mapping[str, str],
) -> pa.Table:
    """`rel` with the `outputs` columns (engine.rank): `keys` are the values of `order`'s expressions."""
    parts = [rel.column(c) for c in partition]
    tied = [rel.column(c) for c in ties]
    for values in [*parts, *keys, *tied]:
        if pa.types.is_nested(values.type):
            raise NotOnDriver(f"ordering by a value of type {values.type}")
        if pa.types.is_floating(values.type) and pc.any(pc.is_nan(values)).as_py():
            raise NotOnDriver("ordering by NaN")
    sort_keys: list[tuple[str, str]] = []
    columns: list[pa.ChunkedArray] = []

    def by(values: pa.ChunkedArray, descending: bool, first: bool) -> None:
        n = len(columns)
        columns.extend([pc.is_null(values), values])
        sort_keys.append((f"k{n}", "descending" if first else "ascending"))
        sort_keys.append((f"k{n + 1}", "descending" if descending else "ascending"))

    for values in parts:
        by(values, False, True)
    for o, values in zip(order, keys):
        descending = bool(o.args.get("desc"))
        by(values, descending, nulls_first(o))
    for values in tied:
        by(values, False, True)
    n = rel.num_rows
    if n == 0:
        for name in outputs:
            rel = rel.append_column(name, pa.array([], pa.int32()))
        return rel
    table = pa.table(columns, names=[f"k{i}" for i in range(len(columns))])
    at = pc.sort_indices(table, sort_keys=sort_keys).to_numpy()
    new_partition = _starts([p.take(at) for p in parts], n)
    new_value = new_partition | _starts([k.take(at) for k in keys], n)
    place = np.arange(n)
    partition_start = np.maximum.accumulate(np.where(new_partition, place, 0))
    row_number = place - partition_start + 1
    rank = np.maximum.accumulate(np.where(new_value, place, 0)) - partition_start + 1
    dense_count = np.cumsum(new_value)
    dense = dense_count - dense_count[partition_start] + 1
    values = {"row_number": row_number, "rank": rank, "dense_rank": dense}
    for name, function in outputs.items():
        column = np.empty(n, np.int32)
        column[at] = values[function]
        rel = rel.append_column(name, pa.array(column, pa.int32()))
    return rel


def _starts(columns: Sequence[pa.ChunkedArray], n: int) -> np.ndarray:
    """In sorted rows, where a value of `columns` differs from the row before (NULL equal to NULL); the first
    row starts too."""
    start = np.zeros(n, bool)
    start[0] = True
    for values in columns:
        before, after = values.slice(0, n - 1), values.slice(1)
        same = pc.or_(
            pc.fill_null(pc.equal(before, after), False), pc.and_(pc.is_null(before), pc.is_null(after))
        )
        start[1:] |= ~same.to_numpy(zero_copy_only=False)
    return start


def nulls_first(o: exp.Ordered) -> bool:
    """Whether an ORDER BY term puts NULLs first: as written, or Spark's default (first ascending, last
    descending)."""
    first = o.args.get("nulls_first")
    return bool(first) if first is not None else not o.args.get("desc")
