"""UNION ALL is linear: the union of its branches' changes, column by column position."""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverChildDelta, concat, data, zset
from mvengine.incremental.driver_expressions import cast, common_type
from mvengine.incremental.zset import MTIME, WEIGHT, quote
from mvengine.plan.nodes import UnionAll


def delta(node: UnionAll, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    branches = []
    for branch in node.inputs:
        df = child_delta(branch, batch)
        # Spark widens the branches' types (int and bigint give bigint), as the plan does.
        columns = [
            F.col(quote(source.name)).alias(target.name) for source, target in zip(branch.fields, node.fields)
        ]
        branches.append(df.select(*columns, F.col(WEIGHT), F.col(MTIME)))
    return reduce(DataFrame.unionAll, branches)


def driver_delta(node: UnionAll, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    branches = [child_delta(branch, batch) for branch in node.inputs]
    types = [common_type([b.schema.field(i).type for b in branches]) for i in range(len(node.fields))]
    return concat(
        [
            zset([cast(c, t) for c, t in zip(data(b), types)], b.column(WEIGHT), b.column(MTIME))
            for b in branches
        ]
    )
