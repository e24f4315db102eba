"""A streaming read of the change data feeds of several Delta tables at once.

The offset is the version of every table. To let a batch's consumer know the exact version range of every
input, also of inputs with no changes in it, an offset is self-describing: for each table it holds the range
(`from`, `to`] that the batch ending at it covers. `batch_ranges` reads that back from the query's checkpoint
in `foreachBatch`. Committed versions never change, so replaying a batch from its checkpointed offsets
re-reads exactly the same rows.

Each row has `_table` (the input's name), the change columns, and one struct column per input named after it
holding that input's columns (null for the other inputs' rows).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, SupportsTriggerAvailableNow
from pyspark.sql.types import StringType, StructField, StructType

from mvengine.errors import StorageError, UnsupportedError
from mvengine.storage.change_reader import (
    CHANGE_COLUMNS,
    DEFAULT_FILES_PER_PARTITION,
    VersionRange,
    change_fields,
    read_changes,
    split_versions,
)
from mvengine.storage.tables import TableRef
from mvengine.storage.types import conform_batch, spark_to_arrow_schema

Offset = dict[str, dict[str, dict[str, int]]]


def stream_schema(table_schemas: dict[str, StructType]) -> StructType:
    fields = [StructField("_table", StringType(), False), *change_fields()]
    fields += [StructField(name, schema, True) for name, schema in table_schemas.items()]
    return StructType(fields)


class ChangeStreamPartition(InputPartition):
    def __init__(self, table: str, versions: VersionRange) -> None:
        super().__init__((table, versions.first, versions.last))
        self.table = table
        self.versions = versions


class ChangeStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, refs: dict[str, TableRef], starting: dict[str, int], schema: StructType, *,
                 ending: dict[str, int] | None = None,
                 files_per_partition: int = DEFAULT_FILES_PER_PARTITION) -> None:
        self.refs = refs
        self.starting = starting
        self.ending = ending or {}  # versions never read past (a consistent cut of several tables)
        self.schema = schema
        self.files_per_partition = files_per_partition
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

    def latestOffset(self, start: Offset, limit: ReadLimit = ReadAllAvailable()) -> Offset:
        done = {n: r["to"] for n, r in start["tables"].items()}
        latest = {n: self._latest(n) for n in self.refs}
        for bound in (self.target, self.ending):
            if bound:
                latest = {n: min(v, bound.get(n, v)) for n, v in latest.items()}
        if all(latest[n] <= done.get(n, -1) for n in self.refs):
            return start
        return {"tables": {n: {"from": done[n], "to": max(latest[n], done[n])} for n in self.refs}}

    def partitions(self, start: Offset, end: Offset) -> Sequence[InputPartition]:
        if start == end:
            return []
        parts: list[InputPartition] = []
        for name, r in end["tables"].items():
            for versions in split_versions(self.refs[name], r["from"] + 1, r["to"], self.files_per_partition):
                parts.append(ChangeStreamPartition(name, versions))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangeStreamPartition)
        output = spark_to_arrow_schema(self.schema)
        own = output.field(partition.table).type
        columns = [own.field(i).name for i in range(own.num_fields)] + list(CHANGE_COLUMNS)
        for batch in read_changes(self.refs[partition.table], partition.versions, columns):
            if not batch.num_rows:
                continue
            n = batch.num_rows
            arrays = []
            for f in output:
                if f.name == "_table":
                    arrays.append(pa.array([partition.table] * n, pa.string()))
                elif f.name in CHANGE_COLUMNS:
                    arrays.append(batch.column(f.name))
                elif f.name == partition.table:
                    own_batch = conform_batch(batch, pa.schema(list(own)))
                    arrays.append(pa.StructArray.from_arrays(own_batch.columns, fields=list(own)))
                else:
                    arrays.append(pa.nulls(n, f.type))
            yield conform_batch(pa.RecordBatch.from_arrays(arrays, names=output.names), output)


def batch_ranges(checkpoint_location: str, batch_id: int) -> dict[str, tuple[int, int]]:
    """For a micro-batch of a change stream, each input's covered versions as (from exclusive, to inclusive).

    Reads the end offset Spark logged for the batch before running it (`<checkpoint>/offsets/<batch_id>`).
    """
    location = checkpoint_location.removeprefix("file:")
    if "://" in location:
        raise UnsupportedError(f"checkpoints on {location.split('://')[0]} storage are not supported yet",
                               hint="keep checkpoints on a local or mounted path")
    path = os.path.join(location, "offsets", str(batch_id))
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise StorageError(f"no offsets logged for batch {batch_id} at {path}") from None
    # Format: "v1", the batch metadata JSON, then one line per source: ours is the only source.
    offset = json.loads(lines[2])
    return {n: (r["from"], r["to"]) for n, r in offset["tables"].items()}
