"""Scan: the changes of a source or an upstream view, as its change data feed gives them."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame

from mvengine.incremental.batch import Batch, ChildDelta
from mvengine.incremental.driver import DriverBatch, DriverChildDelta, zset
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.plan.nodes import Scan


def delta(node: Scan, batch: Batch, _children: ChildDelta) -> DataFrame:
    return batch.changes[node.input]


def driver_delta(node: Scan, batch: DriverBatch, _children: DriverChildDelta) -> pa.Table:
    changes = batch.changes[node.input]
    return zset([changes.column(f.name) for f in node.fields], changes.column(WEIGHT), changes.column(MTIME))
