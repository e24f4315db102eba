"""Writes from Spark: Parquet files written by the executors, committed once by the driver.

One commit per write, optionally with custom commit metadata and a Delta application transaction
(`txn` action: appId, version). A write whose (appId, version) is already committed writes nothing, so a
replayed micro-batch cannot commit twice.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, Transaction
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from mvengine.errors import StorageError
from mvengine.storage.files import FileWriter, WrittenFile, delete_files, unique_rows
from mvengine.storage.tables import TABLE_PROPERTIES, TableRef, is_committed
from mvengine.storage.types import spark_compatible_type, spark_to_arrow_schema


@dataclass(frozen=True)
class WriteOptions:
    overwrite: bool = False
    new_schema: bool = False  # an overwrite that changes the table's columns (a view redefined)
    partition_by: tuple[str, ...] = ()
    metadata: tuple[tuple[str, Any], ...] = ()
    txn: tuple[str, int] | None = None
    target_file_rows: int = 1_000_000
    # Key columns that each task's rows, sorted by them, must not repeat (unique_rows).
    unique: tuple[str, ...] = ()
    # Table properties of a table the write creates, beside TABLE_PROPERTIES.
    properties: tuple[tuple[str, str], ...] = ()

    def commit_properties(self) -> CommitProperties:
        return CommitProperties(
            custom_metadata=dict(self.metadata) or None,
            app_transactions=[Transaction(app_id=self.txn[0], version=self.txn[1])] if self.txn else None,
        )


@dataclass
class WrittenFiles(WriterCommitMessage):
    files: list[WrittenFile]


class DeltaWriter(DataSourceArrowWriter):
    def __init__(self, ref: TableRef, schema: StructType, options: WriteOptions) -> None:
        self.ref = ref
        self.options = options
        self.arrow_schema = spark_to_arrow_schema(schema)
        self.partition_by = list(options.partition_by)
        self.prefix = f"{uuid.uuid4().hex[:8]}-"
        if ref.exists():
            if not (options.overwrite and options.new_schema):
                check_compatible(ref, self.arrow_schema, self.partition_by)
            self.partition_by = ref.open().metadata().partition_columns
        self.skip = options.txn is not None and is_committed(ref, *options.txn)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFiles:
        if self.skip:
            for _ in iterator:
                pass
            return WrittenFiles([])
        writer = FileWriter(
            self.ref,
            self.arrow_schema,
            self.partition_by,
            prefix=self.prefix,
            target_rows=self.options.target_file_rows,
        )
        batches = _conformed(iterator, self.arrow_schema)
        if self.options.unique:
            batches = unique_rows(batches, list(self.options.unique))
        # (a failed task leaves none of its files behind: Spark's abort knows only the other tasks' files)
        try:
            return WrittenFiles(writer.write(batches))
        except BaseException:
            delete_files(self.ref, [f.path for f in writer.written])
            raise

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        files = [f for m in messages if isinstance(m, WrittenFiles) for f in m.files]
        if self.skip or (self.options.txn and is_committed(self.ref, *self.options.txn)):
            delete_files(self.ref, [f.path for f in files])
            return
        commit_files(self.ref, self.arrow_schema, files, self.partition_by, self.options)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        delete_files(self.ref, [f.path for m in messages if isinstance(m, WrittenFiles) for f in m.files])


def _conformed(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        if batch.schema != schema:
            batch = pa.RecordBatch.from_arrays(
                [c.cast(f.type) if c.type != f.type else c for c, f in zip(batch.columns, schema)],
                schema=schema,
            )
        yield batch


def commit_files(
    ref: TableRef, schema: pa.Schema, files: list[WrittenFile], partition_by: list[str], options: WriteOptions
) -> None:
    """One Delta commit adding `files` (and, for an overwrite, removing every current file)."""
    now = int(time.time() * 1000)
    adds = [AddAction(f.path, f.size, f.partition_values, now, True, f.stats) for f in files]
    try:
        if ref.exists():
            ref.open().create_write_transaction(
                list[AddAction | RemoveAction](adds),
                "overwrite" if options.overwrite else "append",
                schema,
                partition_by=partition_by or None,
                commit_properties=options.commit_properties(),
            )
        else:
            from deltalake import Schema

            create_table_with_add_actions(
                ref.uri,
                Schema.from_arrow(schema),
                adds,
                mode="error",
                partition_by=partition_by or None,
                name=ref.name,
                configuration=TABLE_PROPERTIES | dict(options.properties),
                storage_options=ref.storage_options or None,
                commit_properties=options.commit_properties(),
            )
    except Exception as e:
        delete_files(ref, [f.path for f in files])
        raise StorageError(f"cannot commit the write to {ref.label}: {ref.redact(str(e))}") from None
    finally:
        # After the commit: the open table it went through stays at the version before, and an open inside a
        # `logs_read_once` scope before this point would be taken as up to date (issue 43).
        ref.committed()


def check_compatible(ref: TableRef, schema: pa.Schema, partition_by: list[str]) -> None:
    """Refuse writes whose columns or partitioning differ from the table's (no silent schema change)."""
    dt = ref.open()
    table_schema = pa.schema(dt.schema().to_arrow())
    have = [(f.name, str(f.type)) for f in schema]
    want = [(f.name, str(spark_compatible_type(f.type))) for f in table_schema]
    if have != want:
        raise StorageError(
            f"the data written to {ref.label} does not match its schema: table has "
            f"{', '.join(f'{n} {t}' for n, t in want)}; data has {', '.join(f'{n} {t}' for n, t in have)}",
            hint="select and cast the columns to the table's schema, or overwrite it into a new path",
        )
    existing = dt.metadata().partition_columns
    if partition_by and list(partition_by) != existing:
        raise StorageError(
            f"{ref.label} is partitioned by {existing or 'nothing'}, not by {list(partition_by)}",
            hint="drop the partitionBy option, or write to a new table",
        )
