"""Projection is linear: each change row is projected, keeping its weight and time."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Project


def delta(node: Project, batch: Batch, child_delta) -> DataFrame:
    child = child_delta(node.child, batch)
    columns = [F.expr(e.sql("spark")).alias(f.name) for e, f in zip(node.projections, node.fields)]
    return child.select(*columns, F.col(WEIGHT), F.col(MTIME))
