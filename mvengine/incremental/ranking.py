"""Ranking on the driver (the engine's `rank`, incremental/engine.py): per partition, each row's place in a total
order, in Python. A batch touches few partitions, each a prefix of N + buffer rows, so sorting them row by row
costs milliseconds. Values are compared as Spark orders them: NULLs first or last per key, strings by code point
(UTF-8 byte order); a NaN, which Python cannot order as Spark does, sends the batch to Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cmp_to_key
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mvengine.incremental.driver_expressions import NotOnDriver

Row = tuple[Any, ...]


def ranked(
    rel: pa.Table,
    partition: Sequence[str],
    order: Sequence[exp.Ordered],
    keys: Sequence[pa.ChunkedArray],
    ties: Sequence[str],
    outputs: Mapping[str, str],
) -> pa.Table:
    """`rel` with the `outputs` columns (engine.rank): `keys` are the values of `order`'s expressions."""
    for values in [*keys, *[rel.column(c) for c in ties]]:
        if pa.types.is_nested(values.type):
            raise NotOnDriver(f"ordering by a value of type {values.type}")
        if pa.types.is_floating(values.type) and pc.any(pc.is_nan(values)).as_py():
            raise NotOnDriver("ordering by NaN")
    n = rel.num_rows
    parts = list(zip(*[rel.column(c).to_pylist() for c in partition])) if partition else [()] * n
    ordered = list(zip(*[k.to_pylist() for k in keys])) if keys else [()] * n
    tied = list(zip(*[rel.column(c).to_pylist() for c in ties])) if ties else [()] * n
    directions = [(bool(o.args.get("desc")), _nulls_first(o)) for o in order]

    def compare(a: int, b: int) -> int:
        for (desc, nulls_first), x, y in zip(directions, ordered[a], ordered[b]):
            if c := _compare(x, y, nulls_first, desc):
                return c
        for x, y in zip(tied[a], tied[b]):
            if c := _compare(x, y, True, False):
                return c
        return 0

    groups: dict[Row, list[int]] = {}
    for i, p in enumerate(parts):
        groups.setdefault(p, []).append(i)
    values = {name: [0] * n for name in outputs}
    for rows in groups.values():
        rows.sort(key=cmp_to_key(compare))
        rank = dense = 0
        previous: object = object()
        for place, i in enumerate(rows, start=1):
            if ordered[i] != previous:
                rank, dense, previous = place, dense + 1, ordered[i]
            for name, function in outputs.items():
                values[name][i] = {"row_number": place, "rank": rank, "dense_rank": dense}[function]
    for name in outputs:
        rel = rel.append_column(name, pa.array(values[name], pa.int32()))
    return rel


def _nulls_first(o: exp.Ordered) -> bool:
    first = o.args.get("nulls_first")
    return bool(first) if first is not None else not o.args.get("desc")


def _compare(x: Any, y: Any, nulls_first: bool, desc: bool) -> int:
    if x is None or y is None:
        if x is None and y is None:
            return 0
        return (-1 if x is None else 1) * (1 if nulls_first else -1)
    if x == y:
        return 0
    return (-1 if x < y else 1) * (-1 if desc else 1)
