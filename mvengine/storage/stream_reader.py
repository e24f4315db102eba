"""A streaming read of the version ranges of several Delta tables at once: the cut that a refresh advances.

The offset is the version of every table. To let a batch's consumer know the exact version range of every
input, also of inputs with no changes in it, an offset is self-describing: for each table it holds the range
(`from`, `to`] that the batch ending at it covers. `batch_ranges` reads that back from the query's checkpoint
in `foreachBatch`. Committed versions never change, so replaying a batch from its checkpointed offsets covers
exactly the same versions.

The stream carries no rows: the consumer reads each range's changes with `mvengine.storage.api`'s
`read_change_feed`, which picks the reader by the table and the feed's size (delta-rs on the driver for a
small feed, in Spark's Python workers for a large one, Delta's connector for table features delta-rs lacks;
benchmarks/README.md). Offsets are whole versions taken together, so every
batch ends at one consistent cut of all its tables, which Delta's own streaming source cannot promise (it may
stop inside a version, and each table's stream advances on its own).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StringType, StructField, StructType

from mvengine.errors import StorageError, UnsupportedError
from mvengine.storage.tables import TableRef

# The stream's schema: Spark needs one, though no row is ever produced.
STREAM_SCHEMA = StructType([StructField("_table", StringType(), True)])

Offset = dict[str, dict[str, dict[str, int]]]
_ALL_AVAILABLE = ReadAllAvailable()  # Spark's default limit: every change up to the latest offset


class VersionRangeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, refs: dict[str, TableRef], starting: dict[str, int]) -> None:
        self.refs = refs
        self.starting = starting
        self.target: dict[str, int] | None = None
        self._tables: dict = {}

    def _latest(self, name: str) -> int:
        dt = self._tables.get(name)
        if dt is None:
            dt = self._tables[name] = self.refs[name].open()
        else:
            dt.update_incremental()
        return dt.version()

    def initialOffset(self) -> Offset:
        versions = {n: self.starting[n] if n in self.starting else self._latest(n) for n in self.refs}
        return {"tables": {n: {"from": v, "to": v} for n, v in versions.items()}}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = {n: self._latest(n) for n in self.refs}

    def latestOffset(self, start: Offset, limit: ReadLimit = _ALL_AVAILABLE) -> Offset:
        # A table new to the checkpoint (the views read one more source than last time) starts where the
        # views reflect it; tables the views no longer read are left out.
        done = {
            n: start["tables"][n]["to"] if n in start["tables"] else self.starting.get(n, self._latest(n))
            for n in self.refs
        }
        latest = {n: self._latest(n) for n in self.refs}
        if self.target:
            latest = {n: min(v, self.target.get(n, v)) for n, v in latest.items()}
        if all(latest[n] <= done.get(n, -1) for n in self.refs):
            return start
        return {"tables": {n: {"from": done[n], "to": max(latest[n], done[n])} for n in self.refs}}

    def partitions(self, start: Offset, end: Offset) -> Sequence[InputPartition]:
        return []  # the consumer reads the changes of the batch's ranges itself

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        raise AssertionError("a version-range stream has no partitions to read")


def batch_ranges(checkpoint_location: str, batch_id: int) -> dict[str, tuple[int, int]]:
    """For a micro-batch of a version-range stream, each input's covered versions as (from exclusive, to inclusive).

    Reads the end offset Spark logged for the batch before running it (`<checkpoint>/offsets/<batch_id>`).
    """
    location = checkpoint_location.removeprefix("file:")
    if "://" in location:
        raise UnsupportedError(
            f"checkpoints on {location.split('://')[0]} storage are not supported yet",
            hint="keep checkpoints on a local or mounted path",
        )
    path = os.path.join(location, "offsets", str(batch_id))
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise StorageError(f"no offsets logged for batch {batch_id} at {path}") from None
    # Format: "v1", the batch metadata JSON, then one line per source: ours is the only source.
    offset = json.loads(lines[2])
    return {n: (r["from"], r["to"]) for n, r in offset["tables"].items()}
