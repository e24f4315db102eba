"""Projection is linear: each change row is projected, keeping its weight and time."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverChildDelta, zset
from mvengine.incremental.driver_expressions import evaluate
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Project


def delta(node: Project, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    child = child_delta(node.child, batch)
    columns = [F.expr(e.sql("spark")).alias(f.name) for e, f in zip(node.projections, node.fields)]
    return child.select(*columns, F.col(WEIGHT), F.col(MTIME))


def driver_delta(node: Project, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    child = child_delta(node.child, batch)
    return zset(
        [evaluate(e, child, node.child.fields) for e in node.projections],
        child.column(WEIGHT),
        child.column(MTIME),
    )
