"""Batch read of a Delta table at one version: Arrow batches, files skipped by pushed filters, one Spark
partition per group of files."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.dataset as pads
from deltalake import DeltaTable
from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from mvengine.storage.files import FileGroup, group_dataset, group_files
from mvengine.storage.filters import Predicate, pruning_filters, row_filter, to_predicate
from mvengine.storage.tables import TableRef, arrow_dataset
from mvengine.storage.types import conform_batch, spark_compatible_type, spark_to_arrow_schema

DEFAULT_PARTITION_BYTES = 128 * 1024 * 1024
BATCH_ROWS = 65_536


@dataclass(frozen=True)
class ScanPlan:
    """What every partition of one scan reads: the table at a pinned version, columns and filters."""

    ref: TableRef
    version: int
    columns: tuple[str, ...]
    predicates: tuple[Predicate, ...]
    pruning: tuple[tuple, ...]

    def dataset(self, dt: DeltaTable | None = None) -> pads.FileSystemDataset:
        """The files left after pruning, as a pyarrow dataset."""
        dt = dt or self.ref.open(version=self.version)
        return arrow_dataset(dt, file_pruning_predicate=list(self.pruning) or None)

    def file_groups(self, *, target_bytes: int, min_groups: int) -> list[FileGroup]:
        dt = self.ref.open(version=self.version)
        dataset = self.dataset(dt)
        actions = dt.get_add_actions(flatten=True)
        all_sizes = dict(zip(actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist()))
        sizes = {f.path: all_sizes.get(f.path, 0) for f in dataset.get_fragments()}
        return group_files(sizes, target_bytes=target_bytes, min_groups=min_groups)


class FileGroupPartition(InputPartition):
    def __init__(self, group: FileGroup) -> None:
        super().__init__(group.paths)
        self.group = group


class SnapshotReader(DataSourceReader):
    def __init__(
        self,
        ref: TableRef,
        version: int,
        schema: StructType,
        table_arrow_schema: pa.Schema,
        partition_columns: list[str],
        *,
        target_bytes: int = DEFAULT_PARTITION_BYTES,
        min_partitions: int = 1,
        push_filters: bool = False,
    ) -> None:
        self.ref = ref
        self.version = version
        self.output_schema = spark_to_arrow_schema(schema)
        self.types = {f.name: spark_compatible_type(f.type) for f in table_arrow_schema}
        self.partition_columns = partition_columns
        self.target_bytes = target_bytes
        self.min_partitions = min_partitions
        self.predicates: list[Predicate] = []
        self.push_filters = push_filters

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        # Spark 4 keeps the reader a pushdown produced for every later scan of the same DataFrame, also scans
        # with other filters or none (a temporary view used twice in a query): pushed filters would leak into
        # them. So filters are pushed only when the reader is asked to (`pushFilters` option), for DataFrames
        # scanned once; otherwise Spark evaluates them all.
        if not self.push_filters:
            yield from filters
            return
        for f in filters:
            predicate = to_predicate(f, self.types)
            if predicate is None:
                yield f
            else:
                self.predicates.append(predicate)

    @property
    def plan(self) -> ScanPlan:
        pruning = pruning_filters(self.predicates, self.types, self.partition_columns)
        return ScanPlan(
            self.ref, self.version, tuple(self.output_schema.names), tuple(self.predicates), tuple(pruning)
        )

    def partitions(self) -> Sequence[InputPartition]:
        groups = self.plan.file_groups(target_bytes=self.target_bytes, min_groups=self.min_partitions)
        return [FileGroupPartition(g) for g in groups]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FileGroupPartition)
        if not partition.group.paths:
            return
        plan = self.plan
        dataset = group_dataset(plan.dataset(), partition.group.paths)
        row_predicate = row_filter(list(plan.predicates), dataset.schema)
        for batch in dataset.to_batches(
            columns=list(plan.columns), filter=row_predicate, batch_size=BATCH_ROWS
        ):
            if batch.num_rows:
                yield conform_batch(batch, self.output_schema)
