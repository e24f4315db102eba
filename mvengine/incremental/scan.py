"""Scan: the changes of a source or an upstream view, as its change data feed gives them."""

from __future__ import annotations

from pyspark.sql import DataFrame

from mvengine.incremental.batch import Batch
from mvengine.plan.nodes import Scan


def delta(node: Scan, batch: Batch, _children) -> DataFrame:
    return batch.changes[node.input]
