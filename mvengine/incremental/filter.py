"""Filter is linear: the changes that pass the predicate are the filter's changes."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverChildDelta
from mvengine.incremental.driver_expressions import predicate_mask
from mvengine.plan.nodes import Filter


def delta(node: Filter, batch: Batch, child_delta: ChildDelta) -> DataFrame:
    return child_delta(node.child, batch).where(F.expr(node.predicate.sql("spark")))


def driver_delta(node: Filter, batch: DriverBatch, child_delta: DriverChildDelta) -> pa.Table:
    changes = child_delta(node.child, batch)
    return changes.filter(predicate_mask(node.predicate, changes, node.child.fields))
