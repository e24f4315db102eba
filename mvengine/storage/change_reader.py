"""Change data feed reads: the rows each commit in a version range inserted, deleted or updated, with
`_change_type`, `_commit_version` and `_commit_timestamp`. A long range is split by versions into several
Spark partitions of about `files_per_partition` data files each."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from mvengine.errors import StorageError
from mvengine.storage.objects import is_local
from mvengine.storage.tables import (
    TableRef,
    commit_history,
    has_column_mapping,
    require_cdf,
    require_version_range,
)
from mvengine.storage.types import conform_batch, spark_to_arrow_schema

CHANGE_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")
DEFAULT_FILES_PER_PARTITION = 16


def change_fields() -> list[StructField]:
    return [
        StructField("_change_type", StringType(), False),
        StructField("_commit_version", LongType(), False),
        StructField("_commit_timestamp", TimestampType(), False),
    ]


@dataclass(frozen=True)
class VersionRange:
    """Versions `first..last`, both included."""

    first: int
    last: int


def split_versions(ref: TableRef, first: int, last: int, files_per_partition: int) -> list[VersionRange]:
    """Consecutive version ranges holding about `files_per_partition` changed files each, estimated from
    the operation metrics of each commit (a commit without metrics counts as one file)."""
    if first > last:
        return []
    weights = {v: 1 for v in range(first, last + 1)}
    dt = ref.open()
    for entry in dt.history(limit=dt.version() - first + 1):
        version = entry.get("version")
        if version in weights:
            metrics = entry.get("operationMetrics") or {}
            counted = sum(
                int(v)
                for k, v in metrics.items()
                if "file" in k.lower() and ("add" in k.lower() or "remov" in k.lower()) and str(v).isdigit()
            )
            weights[version] = max(1, counted)
    ranges: list[VersionRange] = []
    start, load = first, 0
    for v in range(first, last + 1):
        load += weights[v]
        if load >= files_per_partition or v == last:
            ranges.append(VersionRange(start, v))
            start, load = v + 1, 0
    return ranges


def change_batches(ref: TableRef, versions: VersionRange, columns: list[str]) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the change data feed of `versions` (not yet cast for Spark): by delta-rs, or by
    delta-kernel-rs for a table with column mapping, whose feed delta-rs does not read yet."""
    dt = ref.open()
    if has_column_mapping(dt):
        yield from kernel_change_batches(ref, dt, versions, columns)
        return
    try:
        reader = dt.load_cdf(starting_version=versions.first, ending_version=versions.last, columns=columns)
    except Exception as e:
        raise StorageError(
            f"cannot read the change data feed of {ref.label}, versions "
            f"{versions.first}..{versions.last}: {ref.redact(str(e))}",
            hint="the change data feed must have been enabled at those versions, "
            "and their files must not have been vacuumed",
        ) from None
    yield from pa.RecordBatchReader.from_stream(reader)


def kernel_change_batches(
    ref: TableRef, dt: DeltaTable, versions: VersionRange, columns: list[str]
) -> Iterator[pa.RecordBatch]:
    """The change data feed of a table with column mapping, read by delta-kernel-rs (Delta Sharing's Python
    client's reader: `delta-kernel-rust-sharing-wrapper`), which maps the files' physical columns to the
    table's. Each commit is timed by its commitInfo, as delta-rs and `mv history` time it (the kernel takes the
    log file's modification time). A range over which the table's schema changed (a renamed column) is not
    read: Delta's connector refuses it too."""
    import delta_kernel_rust_sharing_wrapper as kernel

    if not is_local(ref.uri):
        raise StorageError(
            f"the change data feed of {ref.label}, which has column mapping, is read on a local path only",
            hint="mvengine reads it with Delta's Spark connector there",
        )
    uri = ref.uri if "://" in ref.uri else Path(ref.uri).absolute().as_uri()
    try:
        interface = kernel.PythonInterface(uri)
        table = kernel.Table(uri)
        builder = kernel.TableChangesScanBuilder(table, interface, versions.first, versions.last)
        reader = builder.build().execute(interface)
    except Exception as e:
        raise StorageError(
            f"cannot read the change data feed of {ref.label}, versions {versions.first}..{versions.last}: "
            f"{ref.redact(str(e))[:500]}",
            hint="the change data feed must have been on at those versions, and the table's columns the same "
            "through them (a renamed or dropped column starts a new range: refresh the views with --full)",
        ) from None
    times = {
        e["version"]: e["timestamp"]
        for e in commit_history(dt, since=versions.first)
        if versions.first <= e.get("version", -1) <= versions.last and e.get("timestamp") is not None
    }
    for batch in reader:
        if not batch.num_rows:
            continue
        batch = batch.select(columns)
        if "_commit_timestamp" in batch.schema.names and times:
            position = batch.schema.get_field_index("_commit_timestamp")
            recorded = (
                pa.array([times.get(v) for v in batch.column("_commit_version").to_pylist()], pa.int64())
                .cast(pa.timestamp("ms"))
                .cast(batch.schema.field(position).type)
            )
            batch = batch.set_column(
                position, "_commit_timestamp", pc.coalesce(recorded, batch.column(position))
            )
        yield batch


class VersionRangePartition(InputPartition):
    def __init__(self, versions: VersionRange) -> None:
        super().__init__((versions.first, versions.last))
        self.versions = versions


class ChangeReader(DataSourceReader):
    """Batch read of the change data feed between two versions (both included)."""

    def __init__(
        self,
        ref: TableRef,
        first: int,
        last: int,
        schema: StructType,
        *,
        files_per_partition: int = DEFAULT_FILES_PER_PARTITION,
    ) -> None:
        dt = ref.open()
        require_cdf(ref, dt)
        require_version_range(ref, dt, first, last)
        self.ref, self.first, self.last = ref, first, last
        self.output_schema = spark_to_arrow_schema(schema)
        self.files_per_partition = files_per_partition

    def partitions(self) -> Sequence[InputPartition]:
        ranges = split_versions(self.ref, self.first, self.last, self.files_per_partition)
        return [VersionRangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, VersionRangePartition)
        for batch in change_batches(self.ref, partition.versions, list(self.output_schema.names)):
            if batch.num_rows:
                yield conform_batch(batch, self.output_schema)
