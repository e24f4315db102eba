"""Filter is linear: the changes that pass the predicate are the filter's changes."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mvengine.incremental.batch import Batch
from mvengine.plan.nodes import Filter


def delta(node: Filter, batch: Batch, child_delta) -> DataFrame:
    return child_delta(node.child, batch).where(F.expr(node.predicate.sql("spark")))
