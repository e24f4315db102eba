"""`mvdelta`: Delta Lake tables as a Spark Python data source, backed by delta-rs.

    spark.read.format("mvdelta").load(path)                                # latest version
    spark.read.format("mvdelta").option("versionAsOf", 3).load(path)      # or timestampAsOf
    spark.read.format("mvdelta").schema("id long, name string").load(path)  # reads only these columns
    spark.read.format("mvdelta").option("readChangeFeed", "true")
         .option("startingVersion", 2).option("endingVersion", 5).load(path)
    spark.readStream.format("mvdelta").option("tables", '{"a": "/p/a", "b": "/p/b"}').load()  # version ranges
    df.write.format("mvdelta").mode("append").option("txnAppId", "v").option("txnVersion", 7).save(path)

Options named `storage.<KEY>` are delta-rs storage options (credentials usually come from the environment).
Use the functions of `mvengine.storage.api` from Python: they validate first and give clear errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, overload

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from mvengine.errors import StorageError
from mvengine.names import validate_name
from mvengine.storage.change_reader import DEFAULT_FILES_PER_PARTITION, ChangeReader, change_fields
from mvengine.storage.stream_reader import STREAM_SCHEMA, VersionRangeStreamReader
from mvengine.storage.tables import TableRef, require_cdf, require_columns, require_readable
from mvengine.storage.types import delta_to_spark_schema

if TYPE_CHECKING:
    from mvengine.storage.writer import DeltaWriter

# The snapshot reader and the writer are imported where used: they need pyarrow.dataset (and with it pandas),
# which would add about a second to the start of every streaming query's Python process.

FORMAT = "mvdelta"


class DeltaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    # -- options -------------------------------------------------------------------------------------------
    def _storage_options(self) -> dict[str, str]:
        return {k[len("storage.") :]: v for k, v in self.options.items() if k.startswith("storage.")}

    def _ref(self) -> TableRef:
        path = self.options.get("path")
        if not path:
            raise StorageError("mvdelta needs a table path: .load(path) / .save(path) or option('path', ...)")
        return TableRef(path, self._storage_options(), self.options.get("name"))

    @overload
    def _int(self, key: str) -> int | None: ...
    @overload
    def _int(self, key: str, default: int) -> int: ...

    def _int(self, key: str, default: int | None = None) -> int | None:
        value = self.options.get(key)
        if value is None:
            return default
        try:
            return int(value)
        except ValueError:
            raise StorageError(f"option {key} must be an integer, not {value!r}") from None

    def _reads_changes(self) -> bool:
        return str(self.options.get("readChangeFeed", "false")).lower() == "true"

    # -- schema --------------------------------------------------------------------------------------------
    def schema(self) -> StructType:
        if "tables" in self.options:
            return STREAM_SCHEMA
        schema = self._table_schema(self._ref())
        if self._reads_changes():
            schema = StructType(list(schema.fields) + change_fields())
        return schema

    def _table_schema(self, ref: TableRef) -> StructType:
        return delta_to_spark_schema(ref.open().schema().to_json())

    # -- batch reads ---------------------------------------------------------------------------------------
    def reader(self, schema: StructType) -> DataSourceReader:
        from mvengine.storage.snapshot_reader import DEFAULT_PARTITION_BYTES, SnapshotReader

        ref = self._ref()
        if self._reads_changes():
            first = self._int("startingVersion", 0)
            last = self._int("endingVersion")
            last = ref.open().version() if last is None else last
            return ChangeReader(
                ref,
                first,
                last,
                schema,
                files_per_partition=self._int("filesPerPartition", DEFAULT_FILES_PER_PARTITION),
            )
        version = self._int("versionAsOf")
        timestamp = self.options.get("timestampAsOf")
        if version is not None and timestamp is not None:
            raise StorageError("give either versionAsOf or timestampAsOf, not both")
        dt = ref.open(version=version, timestamp=timestamp)
        require_readable(ref, dt)
        table_arrow = pa.schema(dt.schema().to_arrow())
        require_columns(ref, table_arrow.names, schema.names)
        return SnapshotReader(
            ref,
            dt.version(),
            schema,
            table_arrow,
            dt.metadata().partition_columns,
            target_bytes=self._int("maxPartitionBytes", DEFAULT_PARTITION_BYTES),
            min_partitions=self._int("minPartitions", 1),
            push_filters=self.options.get("pushFilters", "false").lower() == "true",
        )

    # -- streaming reads -----------------------------------------------------------------------------------
    def _stream_refs(self) -> dict[str, TableRef]:
        tables = _json_option(self.options, "tables")
        if not isinstance(tables, dict) or not tables:
            raise StorageError(
                "option tables must be a JSON object of input name to table path, "
                'e.g. {"orders": "/data/orders"}'
            )
        refs = {}
        for name, path in tables.items():
            validate_name(name, "input name")
            refs[name] = TableRef(str(path), self._storage_options(), name)
        return refs

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        refs = self._stream_refs()
        for ref in refs.values():
            require_cdf(ref, ref.open())
        starting = _json_option(self.options, "startingVersions") or {}
        if not isinstance(starting, dict) or set(starting) - set(refs):
            raise StorageError(
                "option startingVersions must be a JSON object whose keys are input names of "
                f"option tables ({sorted(refs)}), each the last version already processed"
            )
        return VersionRangeStreamReader(refs, {k: int(v) for k, v in starting.items()})

    # -- writes --------------------------------------------------------------------------------------------
    def writer(self, schema: StructType, overwrite: bool) -> DeltaWriter:
        from mvengine.storage.writer import DeltaWriter, WriteOptions

        metadata = _json_option(self.options, "commitMetadata") or {}
        if not isinstance(metadata, dict):
            raise StorageError("option commitMetadata must be a JSON object")
        app_id, txn_version = self.options.get("txnAppId"), self._int("txnVersion")
        if (app_id is None) != (txn_version is None):
            raise StorageError("give txnAppId and txnVersion together")
        partition_by = tuple(
            c.strip() for c in str(self.options.get("partitionBy", "")).split(",") if c.strip()
        )
        options = WriteOptions(
            overwrite=overwrite,
            new_schema=str(self.options.get("overwriteSchema", "false")).lower() == "true",
            partition_by=partition_by,
            metadata=tuple(sorted(metadata.items())),
            txn=(app_id, txn_version) if app_id is not None and txn_version is not None else None,
            target_file_rows=self._int("targetFileRows", 1_000_000) or 1_000_000,
            unique=tuple(_json_option(self.options, "uniqueBy") or ()),
        )
        return DeltaWriter(self._ref(), schema, options)


def _json_option(options: Mapping[str, Any], key: str) -> Any:
    value = options.get(key)
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as e:
        raise StorageError(f"option {key} is not valid JSON: {e}") from None
