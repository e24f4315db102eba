"""The storage API the rest of mvengine uses: reads, change reads, streams, writes and merges of Delta tables.
Each function validates on the driver first (with delta-rs, which reads a table's log in milliseconds), so
mistakes surface as MvErrors naming the table and path rather than as exceptions from inside Spark.

Each read and write takes the engine that is fastest for it (measured in benchmarks/README.md, "Which
reader, which writer"):
- a table whose rows are exactly its data files' rows (mvengine's own tables; sources without deletion
  vectors, column mapping or partitions) is read by Spark's Parquet reader from the files delta-rs lists for
  the version: no Spark job to rebuild the table's state, which Delta's connector runs for every version
  it has not cached (0.8-1.2 s for time travel);
- other tables, and change data feeds, by Delta's own connector (`delta` format); with
  `read_change_feed(driver_rows=...)` (refresh), the feed of such a plain table by delta-rs instead: on the
  driver, handed to Spark as Arrow, when small, else in Spark's Python workers (`mvdelta`), both cheaper than
  the connector's state rebuild for a new version;
- by `mvdelta`, the Python data source over delta-rs, when the session has no Delta connector or the table is
  on an object store Spark cannot reach yet.
Writes and merges go through delta-rs (small ones from the driver), 4-6x faster than the connector's here,
and recording mvengine's commit metadata and application transaction in the same commit.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterator, Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from mvengine.config import join_uri
from mvengine.errors import KeyWrittenTwice, StorageError
from mvengine.names import quote_identifier, validate_name
from mvengine.storage.change_reader import VersionRange, change_batches, change_fields
from mvengine.storage.datasource import FORMAT
from mvengine.storage.files import DUPLICATE_KEY, STAGING_DIR, FileWriter, delete_files, unique_rows
from mvengine.storage.objects import is_local, remove_staging, remove_tree
from mvengine.storage.spark_files import write_files
from mvengine.storage.stream_reader import batch_ranges as batch_ranges  # re-exported for consumers
from mvengine.storage.tables import (
    TableRef,
    arrow_dataset,
    commit_history,
    in_plain_files,
    is_committed,
    read_by_driver,
    require_cdf,
    require_columns,
    require_readable,
    require_version_range,
)
from mvengine.storage.types import (
    conform_batch,
    delta_to_spark_schema,
    spark_to_arrow_schema,
    table_of_batches,
)
from mvengine.storage.writer import WriteOptions, check_compatible, commit_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import DataStreamReader
    from pyspark.sql.types import StructType

# Rows per file of a table written clustered by its key (snapshots of keyed views, state): a MERGE of a few
# keys into a 10M-row table costs 0.14 s with files of 1M rows and 0.03 s with files of 100k
# (benchmarks/README.md, "Small commits"), while reading 100 files instead of 10 costs Spark little.
CLUSTERED_FILE_ROWS = 100_000
CLUSTERED_FILE_BYTES = 1024 * 1024
TARGET_FILE_SIZE = "delta.targetFileSize"
# The column of merged rows that says a row deletes (its key) rather than adds: named so that no table column
# is likely to be called so.
DELETE_MARK = "_mvengine_delete"


def _storage(reader_or_writer: Any, ref: TableRef) -> Any:
    for key, value in ref.storage_options.items():
        reader_or_writer = reader_or_writer.option(f"storage.{key}", value)
    return reader_or_writer


def read_table(
    spark: SparkSession,
    ref: TableRef,
    *,
    version: int | None = None,
    timestamp: str | datetime | None = None,
    columns: Sequence[str] | None = None,
) -> DataFrame:
    """The table at its latest version, at `version` or as of `timestamp`; only `columns` are read if given
    (by default the ref's own `columns`)."""
    dt = ref.open(version=version, timestamp=timestamp)
    columns = ref.columns if columns is None else columns
    if _local(ref) and in_plain_files(dt):
        df = _read_files(spark, dt)
    elif _spark_reads(spark, ref):
        df = spark.read.format("delta").option("versionAsOf", dt.version()).load(ref.uri)
    else:
        require_readable(ref, dt)
        df = _storage(spark.read.format(FORMAT), ref).option("versionAsOf", dt.version())
        if not is_connect(spark):  # (a Spark Connect session has no SparkContext: the server decides)
            df = df.option("minPartitions", spark.sparkContext.defaultParallelism)
        if columns is not None:
            from pyspark.sql.types import StructType

            schema = delta_to_spark_schema(dt.schema().to_json())
            require_columns(ref, schema.names, list(columns))
            df = df.schema(StructType([schema[c] for c in columns]))
        return df.load(ref.uri)
    if columns is not None:
        require_columns(ref, df.columns, list(columns))
        df = df.select(*[quote_identifier(c) for c in columns])
    return df


def arrow_schema(dt: Any) -> pa.Schema:
    """The table's columns with the Arrow types Spark reads them as (the types of every driver-side read)."""
    return spark_to_arrow_schema(delta_to_spark_schema(dt.schema().to_json()))


class TooManyRows(Exception):
    """A read found more rows than the caller would take (`read_arrow(most=...)`)."""


def read_arrow(
    ref: TableRef,
    *,
    version: int | None = None,
    where: tuple[str, pa.Array | pa.ChunkedArray] | None = None,
    within: Bounds | None = None,
    columns: Sequence[str] | None = None,
    most: int | None = None,
) -> pa.Table:
    """The table at `version` on the driver, by delta-rs, with the types of `arrow_schema`; with `where`
    (a column and values), at least the rows whose column holds one of the values (NULL among them: NULL too;
    the caller matches exactly: a float column, whose -0.0 and NaN compare apart, is not narrowed); with
    `within` (a column, its least and greatest values), at least those of that range. The files and row groups
    whose statistics exclude the values or the range are skipped. Only for tables `read_by_driver`: their
    files' rows, less their deletion vectors. `columns`: only these (without `where`). `most`: past this many
    rows the read stops, with TooManyRows (keys spread through every file of a large table)."""
    dt = ref.open(version=version)
    if not read_by_driver(ref, dt):
        raise StorageError(f"{ref.label} cannot be read on the driver (column mapping, not on a local path)")
    target = _read_schema(ref, arrow_schema(dt))
    if not dt.file_uris():
        return target.empty_table()
    read = _read_files_on_driver if in_plain_files(dt) else _scan
    ranges = [within] if within is not None else []
    if where is None or pa.types.is_floating(target.field(where[0]).type):
        names = list(columns) if where is None and columns else target.names
        return _gathered(
            read(ref, dt, target, names, ranges), pa.schema([target.field(n) for n in names]), most
        )
    column, values = where
    try:
        wanted = pc.drop_null(pc.unique(values)).cast(target.field(column).type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # values of a wider type: no narrowing
        return _gathered(read(ref, dt, target, target.names, ranges), target, most)
    if not len(wanted) and not values.null_count:
        return target.empty_table()
    low, high = pc.min_max(wanted).values() if len(wanted) else (pa.scalar(None), pa.scalar(None))
    bounded = not values.null_count and isinstance(low.as_py(), (int, str, bool, datetime, date))

    def kept(batch: pa.RecordBatch) -> pa.RecordBatch:
        found = batch.column(column)
        keep = pc.fill_null(pc.is_in(found, wanted), False)
        if values.null_count:
            keep = pc.or_(keep, pc.is_null(found))
        return batch.filter(keep)

    batches = read(ref, dt, target, target.names, ([(column, low, high)] if bounded else []) + ranges)
    return _gathered((kept(b) for b in batches), target, most)


def _read_schema(ref: TableRef, schema: pa.Schema) -> pa.Schema:
    """The table's columns as a read of `ref` takes them: its `columns`, when it names them."""
    if ref.columns is None:
        return schema
    require_columns(ref, schema.names, list(ref.columns))
    return pa.schema([schema.field(n) for n in ref.columns])


def _gathered(batches: Iterator[pa.RecordBatch], schema: pa.Schema, most: int | None) -> pa.Table:
    """The batches as one table; past `most` rows, TooManyRows (the rest is not read)."""
    kept, rows = [], 0
    for batch in batches:
        rows += batch.num_rows
        if most is not None and rows > most:
            raise TooManyRows(f"more than {most} rows")
        kept.append(batch)
    return table_of_batches(kept, schema)


Bounds = tuple[str, pa.Scalar, pa.Scalar]  # a column and the least and greatest values wanted of it


def _read_files_on_driver(
    ref: TableRef, dt: Any, target: pa.Schema, names: list[str], bounds: Sequence[Bounds] = ()
) -> Iterator[pa.RecordBatch]:
    """The rows of the table's files (all, or at least those within every one of `bounds`), read by Arrow as
    the target types (delta-rs writes strings as string views in some files and not in others), from the local
    disk directly when the table is there (delta-rs's default filesystem goes through Python)."""
    filesystem = (
        pafs.SubTreeFileSystem(ref.uri.removeprefix("file://"), pafs.LocalFileSystem())
        if _local(ref)
        else None
    )
    # Files whose statistics exclude a range are skipped by delta-rs, row groups by Arrow (except for strings:
    # Arrow 26 cannot test string-view statistics). delta-rs reads '' in a pruning predicate as NULL (an empty
    # partition value), which skips every file: the empty string bounds nothing (issue 44: the state of a group
    # keyed '' was not found).
    files = [
        (column, op, v)
        for column, low, high in bounds
        for op, v in ((">=", low.as_py()), ("<=", high.as_py()))
        if v != ""
    ]
    condition = None
    for column, low, high in bounds:
        if any(c == column for c, _, _ in files) and not pa.types.is_string(target.field(column).type):
            within = (pc.field(column) >= low) & (pc.field(column) <= high)
            condition = within if condition is None else condition & within
    dataset = arrow_dataset(dt, schema=target, filesystem=filesystem, file_pruning_predicate=files or None)
    yield from dataset.to_batches(columns=names, filter=condition)


def _scan(
    ref: TableRef, dt: Any, target: pa.Schema, names: list[str], bounds: Sequence[Bounds] = ()
) -> Iterator[pa.RecordBatch]:
    """The table's rows by delta-rs's scan, which applies deletion vectors (all rows, or at least those within
    the `bounds` of integer columns: files and rows outside are skipped), as the target types."""
    predicates = []
    for column, low, high in bounds:
        if pa.types.is_integer(target.field(column).type):
            name = '"' + column.replace('"', '""') + '"'
            predicates.append(f"{name} >= {low.as_py()} AND {name} <= {high.as_py()}")
    schema = pa.schema([target.field(n) for n in names])
    reader = pa.RecordBatchReader.from_stream(
        dt.scan(columns=names, predicate=" AND ".join(predicates) or None)
    )
    for batch in reader:
        yield conform_batch(batch, schema)


def _read_files(spark: SparkSession, dt: Any) -> DataFrame:
    """The table's version `dt` read by Spark's Parquet reader from the data files delta-rs lists for it."""
    schema = delta_to_spark_schema(dt.schema().to_json())
    files = dt.file_uris()
    if not files:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*files)


def read_changes(spark: SparkSession, ref: TableRef, first: int, last: int | None = None) -> DataFrame:
    """The change data feed of versions `first..last` (both included; `last` defaults to the latest), with
    `_change_type`, `_commit_version` and `_commit_timestamp`. `first = last + 1` is the empty range."""
    return read_change_feed(spark, ref, first, last).rows


RETRACTIONS = ("delete", "update_preimage")  # the change types that take a row away


class ChangeFeed:
    """A change feed read by one of the readers: as Arrow on the driver (`arrow`, when it was read there) and
    as a Spark DataFrame (`rows`, made from the Arrow rows only when asked for)."""

    def __init__(
        self,
        spark: SparkSession,
        schema: StructType,
        *,
        rows: DataFrame | None = None,
        arrow: pa.Table | None = None,
    ) -> None:
        self._spark, self._schema = spark, schema
        self._rows = rows
        self.arrow = arrow

    @property
    def rows(self) -> DataFrame:
        if self._rows is None:
            self._rows = self._spark.createDataFrame(self.arrow, self._schema)
        return self._rows

    @property
    def in_spark(self) -> bool:
        """Whether the rows are only in Spark (not on the driver)."""
        return self.arrow is None

    def counts(self) -> tuple[int, int] | None:
        """(rows, deleted and update-preimage rows), when the rows are on the driver (no Spark job)."""
        if self.arrow is None:
            return None
        kinds = self.arrow.column("_change_type")
        return self.arrow.num_rows, pc.sum(pc.is_in(kinds, pa.array(list(RETRACTIONS)))).as_py() or 0

    def release(self) -> None:
        if self._rows is not None and self.arrow is None:
            self._rows.unpersist()


def read_change_feed(
    spark: SparkSession, ref: TableRef, first: int, last: int | None = None, *, driver_rows: int = 0
) -> ChangeFeed:
    """`read_changes`, and with `driver_rows`, the feed of a table delta-rs reads is read by delta-rs: on the
    driver (as Arrow, handed to Spark only when asked) when it has at most that many rows, else by `mvdelta`
    in Spark's Python workers. Delta's connector would first run a Spark job to rebuild the table's state at its
    new version, which costs more than either (benchmarks/README.md, "Which reader, which writer")."""
    from pyspark.sql.types import StructType

    dt = ref.open()
    require_cdf(ref, dt)
    last = dt.version() if last is None else last
    table_schema = delta_to_spark_schema(dt.schema().to_json())
    if ref.columns is not None:
        require_columns(ref, table_schema.names, list(ref.columns))
        table_schema = StructType([table_schema[c] for c in ref.columns])
    schema = StructType(list(table_schema.fields) + change_fields())
    if first == last + 1:
        return ChangeFeed(spark, schema, arrow=spark_to_arrow_schema(schema).empty_table())
    require_version_range(ref, dt, first, last)
    if driver_rows and read_by_driver(ref, dt):
        rows = _changes_on_driver(ref, first, last, schema, driver_rows)
        if rows is not None:
            return ChangeFeed(spark, schema, arrow=rows)
        return ChangeFeed(spark, schema, rows=_in_columns(_mvdelta_changes(spark, ref, first, last), schema))
    return ChangeFeed(spark, schema, rows=_in_columns(_spark_changes(spark, ref, dt, first, last), schema))


def _in_columns(rows: DataFrame, schema: StructType) -> DataFrame:
    """The feed's rows as `schema`'s columns (a source's declared ones, and the change columns)."""
    if rows.columns == schema.names:
        return rows
    return rows.select(*[quote_identifier(c) for c in schema.names])


def _mvdelta_changes(spark: SparkSession, ref: TableRef, first: int, last: int) -> DataFrame:
    reader = _storage(spark.read.format(FORMAT), ref).option("readChangeFeed", "true")
    return reader.option("startingVersion", first).option("endingVersion", last).load(ref.uri)


def _spark_changes(spark: SparkSession, ref: TableRef, dt: Any, first: int, last: int) -> DataFrame:
    """The feed read by Delta's connector (by `mvdelta` where Spark cannot reach the table)."""
    if not _spark_reads(spark, ref):
        return _mvdelta_changes(spark, ref, first, last)
    from pyspark.sql import functions as F

    df = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", first)
        .option("endingVersion", last)
        .load(ref.uri)
    )
    # The connector times a commit by its log file's modification time; mvengine, delta-rs and `mv history` by
    # the timestamp its commitInfo records (a few milliseconds earlier): one time per commit everywhere.
    times = [
        (e["version"], e.get("timestamp"))
        for e in commit_history(dt, since=first)
        if first <= e.get("version", -1) <= last
    ]
    if not times:
        return df
    by_version = F.create_map(*[x for version, ms in times for x in (F.lit(version), F.lit(ms).cast("long"))])
    recorded = F.timestamp_millis(F.element_at(by_version, F.col("_commit_version")))
    return df.withColumn("_commit_timestamp", F.coalesce(recorded, F.col("_commit_timestamp")))


def _changes_on_driver(
    ref: TableRef, first: int, last: int, schema: StructType, most: int
) -> pa.Table | None:
    """The feed read by delta-rs as Arrow with the types Spark takes; None when it has more than `most` rows."""
    arrow_schema = spark_to_arrow_schema(schema)
    batches = change_batches(ref, VersionRange(first, last), arrow_schema.names)
    try:
        return _gathered((conform_batch(b, arrow_schema) for b in batches), arrow_schema, most)
    except TooManyRows:
        return None


def _local(ref: TableRef) -> bool:
    """Whether the table is on a local or mounted path (Spark reaches object stores only with extra jars)."""
    return is_local(ref.uri)


def _spark_reads(spark: SparkSession, ref: TableRef) -> bool:
    """Whether Delta's connector reads the table (else `mvdelta` does)."""
    return _local(ref) and _has_connector(spark)


DELTA_SOURCE = "org.apache.spark.sql.delta.sources.DeltaDataSource"


def is_connect(spark: SparkSession) -> bool:
    """Whether the session is a Spark Connect client's (runtime/connect.py): no JVM in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def has_native_delta(spark: SparkSession) -> bool:
    """Whether the session can read and write the `delta` format with Delta's own connector."""
    if is_connect(spark):  # a server mvengine started: its session has Delta's extension when it has the jars
        return "DeltaSparkSessionExtension" in (spark.conf.get("spark.sql.extensions", "") or "")
    jvm = spark._jvm
    assert jvm is not None  # a classic session (Spark Connect has no JVM here)
    return bool(jvm.org.apache.spark.util.Utils.classIsLoadable(DELTA_SOURCE))


@functools.lru_cache(maxsize=4)
def _has_connector(spark: SparkSession) -> bool:
    return has_native_delta(spark)


def stream_version_ranges(
    spark: SparkSession, refs: dict[str, TableRef], starting_versions: dict[str, int] | None = None
) -> DataFrame:
    """A streaming DataFrame whose micro-batches are version ranges of several tables, taken together (no
    rows: `batch_ranges` gives a batch's ranges, `read_changes` their changes; see stream_reader).

    `starting_versions` gives, per input, the last version already processed; the default is each table's
    current version (only changes committed from now on).
    """
    for name, ref in refs.items():
        validate_name(name, "input name")
        require_cdf(ref, ref.open())
    reader: DataStreamReader = spark.readStream.format(FORMAT)
    for ref in refs.values():
        reader = _storage(reader, ref)
    reader = reader.option("tables", json.dumps({n: r.uri for n, r in refs.items()}))
    if starting_versions:
        reader = reader.option("startingVersions", json.dumps(starting_versions))
    return reader.load()


def write_table(
    df: DataFrame | pa.Table,
    ref: TableRef,
    *,
    mode: str = "append",
    partition_by: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    txn: tuple[str, int] | None = None,
    target_file_rows: int | None = None,
    on_driver: bool = False,
    cluster_by: Sequence[str] = (),
    new_schema: bool = False,
    unique: bool = False,
) -> bool:
    """Append to or overwrite a table (created with the change data feed on when missing) in one commit;
    `new_schema`: the overwrite gives the table the rows' columns (its earlier versions keep theirs). `unique`:
    the `cluster_by` columns are a key the rows must not repeat, checked as the sorted rows are written
    (KeyWrittenTwice, and nothing committed, when one does).

    With `on_driver` (for few rows: a caller that knows), the rows are collected as Arrow and written by the
    driver, which costs far less than a Spark write job; rows already on the driver (an Arrow table, with the
    Arrow types Spark's would have) are written so too. With `cluster_by`, the rows are written in the order
    of those columns, so each file holds a narrow range of them: a later MERGE by them rewrites only the files
    whose range the merged keys fall in, not every file; the files are then smaller (CLUSTERED_FILE_ROWS),
    since a MERGE rewrites each file it touches whole. Returns False, writing nothing, when the application
    transaction `txn` is already committed.
    """
    if mode not in ("append", "overwrite"):
        raise StorageError(f"write mode must be 'append' or 'overwrite', not {mode!r}")
    if cluster_by and not target_file_rows:
        target_file_rows = CLUSTERED_FILE_ROWS
    schema = _arrow_schema(df)
    cluster_by = _times_first(cluster_by, schema)
    # (a table clustered by key is merged into by key: delta-rs's MERGE then writes files of this size too)
    properties = ((TARGET_FILE_SIZE, str(CLUSTERED_FILE_BYTES)),) if cluster_by else ()
    if txn is not None and is_committed(ref, *txn):
        return False
    if new_schema and mode != "overwrite":
        raise StorageError("new_schema needs mode 'overwrite'")
    if unique and not cluster_by:
        raise StorageError("unique needs the key columns as cluster_by: the rows are checked sorted by them")
    if ref.exists() and not new_schema:
        check_compatible(ref, schema, list(partition_by))
    if on_driver or isinstance(df, pa.Table):  # the data source's own file writer and commit, on the driver
        options = WriteOptions(
            overwrite=mode == "overwrite",
            new_schema=new_schema,
            partition_by=tuple(partition_by),
            metadata=tuple(sorted((metadata or {}).items())),
            txn=txn,
            target_file_rows=target_file_rows or WriteOptions.target_file_rows,
            properties=properties,
        )
        rows = _collected(df)
        if cluster_by:
            rows = rows.sort_by([(c, "ascending") for c in cluster_by])
        partitions = ref.open().metadata().partition_columns if ref.exists() else list(partition_by)
        writer = FileWriter(
            ref, schema, partitions, prefix=f"{uuid.uuid4().hex[:8]}-", target_rows=options.target_file_rows
        )
        batches = rows.cast(schema).to_batches(max_chunksize=options.target_file_rows)
        try:
            files = writer.write(unique_rows(batches, list(cluster_by)) if unique else batches)
        except ValueError as e:
            delete_files(ref, [f.path for f in writer.written])
            raise _written_twice(ref, e) or e from None
        commit_files(ref, schema, files, partitions, options)
        return True
    if _local(ref) and not is_connect(df.sparkSession) and not partition_by and not _partitioned(ref):
        options = WriteOptions(
            overwrite=mode == "overwrite",
            new_schema=new_schema,
            metadata=tuple(sorted((metadata or {}).items())),
            txn=txn,
            target_file_rows=target_file_rows or WriteOptions.target_file_rows,
            unique=tuple(cluster_by) if unique else (),
            properties=properties,
        )
        try:
            return write_files(df, ref, schema, options, cluster_by)
        except Exception as e:
            raise _written_twice(ref, e) or e from None
    if cluster_by:
        columns = [quote_identifier(c) for c in cluster_by]
        df = df.repartitionByRange(*columns).sortWithinPartitions(*columns)
    writer = _storage(df.write.format(FORMAT).mode(mode), ref)
    if unique:
        writer = writer.option("uniqueBy", json.dumps(list(cluster_by)))
    if ref.name:
        writer = writer.option("name", ref.name)
    if partition_by:
        writer = writer.option("partitionBy", ",".join(partition_by))
    if metadata:
        writer = writer.option("commitMetadata", json.dumps(metadata))
    if txn is not None:
        writer = writer.option("txnAppId", txn[0]).option("txnVersion", txn[1])
    if target_file_rows:
        writer = writer.option("targetFileRows", target_file_rows)
    if new_schema:
        writer = writer.option("overwriteSchema", "true")
    try:
        writer.save(ref.uri)
    except Exception as e:
        raise _written_twice(ref, e) or e from None
    ref.committed()  # (by a Python worker of Spark's: this process has not seen the commit)
    return True


def _times_first(keys: Sequence[str], schema: pa.Schema) -> tuple[str, ...]:
    """`keys` with the dates and timestamps among them first: a stream's keys arrive in time order (a window's
    bounds, a day), so that rows clustered so keep a batch's keys in the newest files, which its MERGE rewrites,
    and leave the older ones as they are."""
    timed = [
        k
        for k in keys
        if pa.types.is_timestamp(schema.field(k).type) or pa.types.is_date(schema.field(k).type)
    ]
    return (*timed, *[k for k in keys if k not in timed])


def _partitioned(ref: TableRef) -> bool:
    return ref.exists() and bool(ref.open().metadata().partition_columns)


def _written_twice(ref: TableRef, error: Exception) -> KeyWrittenTwice | None:
    """The error of a write whose key check (unique_rows) failed, from its text (a Spark task's error reaches
    the driver as text); None for any other."""
    text = str(error)
    at = text.find(DUPLICATE_KEY)
    if at < 0:
        return None
    shown = text[at + len(DUPLICATE_KEY) :].split("\n")[0].strip()
    return KeyWrittenTwice(ref.label, shown[1:-1] if shown.startswith("(") and shown.endswith(")") else shown)


def merge_into(
    df: DataFrame | pa.Table,
    ref: TableRef,
    keys: Sequence[str],
    *,
    delete_column: str | None = None,
    metadata: dict[str, Any] | None = None,
    txn: tuple[str, int] | None = None,
    on_driver: bool = False,
    purge: str | None = None,
) -> dict[str, Any] | None:
    """Upsert `df` into the table by `keys` (NULL keys match NULL keys) in one commit.

    Rows whose `delete_column` is true delete the matching target row instead. The delta is staged as Parquet
    by the executors and streamed from there into delta-rs's MERGE, so it never passes through Python objects
    and its size is bounded by disk, not by the driver's memory; with `on_driver` (few rows) it is collected
    as Arrow and merged from memory instead, as an Arrow table `df` is. `purge`, a condition on the target's
    rows (`t."col"`), deletes in the same commit the rows it holds for that `df` does not match. Returns the
    merge metrics, or None when `txn` is already committed.
    """
    if txn is not None and is_committed(ref, *txn):
        return None
    dt = ref.open()
    table_columns = [f.name for f in dt.schema().fields]
    data_columns = [c for c in _arrow_schema(df).names if c != delete_column]
    if sorted(data_columns) != sorted(table_columns) or not keys or set(keys) - set(table_columns):
        raise StorageError(
            f"cannot merge into {ref.label}: the data's columns {data_columns} must be the "
            f"table's {table_columns}, and the keys {list(keys)} some of them"
        )
    q = _datafusion_identifier
    values = {q(c): f"s.{q(c)}" for c in table_columns}
    keep = f"s.{q(delete_column)} IS NOT TRUE" if delete_column else None

    def clauses(merger):
        if delete_column:
            merger = merger.when_matched_delete(predicate=f"s.{q(delete_column)} IS TRUE")
        merger = merger.when_matched_update(values, predicate=keep)
        merger = merger.when_not_matched_insert(values, predicate=keep)
        return merger.when_not_matched_by_source_delete(predicate=purge) if purge else merger

    return _merge(df, ref, dt, keys, clauses, metadata, txn, on_driver)


def replace_rows(
    inserts: DataFrame | pa.Table,
    ref: TableRef,
    keys: Sequence[str],
    deletes: DataFrame | pa.Table | None,
    *,
    metadata: dict[str, Any] | None = None,
    txn: tuple[str, int] | None = None,
    on_driver: bool = False,
    unique: bool = False,
) -> bool:
    """In one commit, remove every row whose `keys` equal those of a row of `deletes` (NULL matches NULL; all
    copies of a duplicated row go; None when nothing goes), then add the rows of `inserts`. A missing table
    is created. `on_driver` as for `merge_into`; `unique` (a missing table's first rows only) as for
    write_table, by `keys`.

    This is how a view's snapshot takes a batch: keyed views delete the changed keys and insert their new rows;
    bags delete the changed rows and insert them again as many times as they now occur. Returns False, writing
    nothing, when `txn` is already committed.
    """
    if txn is not None and is_committed(ref, *txn):
        return False
    exists = ref.exists()
    if unique and (exists or not keys):
        raise StorageError(f"cannot check the keys of rows added to {ref.label}: only a new table's")
    if not exists or deletes is None:
        return write_table(
            inserts,
            ref,
            metadata=metadata,
            txn=txn,
            on_driver=on_driver,
            cluster_by=keys if not exists else (),
            unique=unique,
        )
    dt = ref.open()
    columns = [f.name for f in dt.schema().fields]
    if isinstance(inserts, pa.Table):
        marked = _marked_on_driver(inserts, deletes, keys, columns)
    else:
        marked = _marked(inserts, deletes, keys, columns)
    q = _datafusion_identifier
    values = {q(c): f"s.{q(c)}" for c in columns}

    def clauses(merger):
        return merger.when_matched_delete().when_not_matched_insert(
            values, predicate=f"NOT s.{q(DELETE_MARK)}"
        )

    # No keys (a view of one row): the delete marker matches every row.
    _merge(marked, ref, dt, keys, clauses, metadata, txn, on_driver, guard=f"s.{q(DELETE_MARK)}")
    return True


def _marked(inserts: DataFrame, deletes: DataFrame, keys: Sequence[str], columns: list[str]) -> DataFrame:
    """The rows of a replace_rows MERGE: each distinct deleted key (DELETE_MARK true), then the inserts."""
    from pyspark.sql import functions as F

    return (
        deletes.select(*[F.col(quote_identifier(k)) for k in keys])
        .distinct()
        .select(
            *[
                F.col(quote_identifier(c))
                if c in keys
                else F.lit(None).cast(inserts.schema[c].dataType).alias(c)
                for c in columns
            ],
            F.lit(True).alias(DELETE_MARK),
        )
        .unionByName(
            inserts.select(*[F.col(quote_identifier(c)) for c in columns], F.lit(False).alias(DELETE_MARK))
        )
    )


def _marked_on_driver(
    inserts: pa.Table, deletes: pa.Table, keys: Sequence[str], columns: list[str]
) -> pa.Table:
    """`_marked` for rows on the driver."""
    types = {f.name: f.type for f in inserts.schema}
    gone = (
        deletes.select(list(keys)).group_by(list(keys), use_threads=False).aggregate([])
        if keys
        else pa.table({"_": [None]}).slice(0, min(deletes.num_rows, 1))
    )
    marked = pa.table(
        [gone.column(c) if c in keys else pa.nulls(gone.num_rows, types[c]) for c in columns]
        + [pa.repeat(pa.scalar(True), gone.num_rows)],
        names=[*columns, DELETE_MARK],
    )
    added = inserts.select(columns).append_column(DELETE_MARK, pa.repeat(pa.scalar(False), inserts.num_rows))
    return pa.concat_tables([marked, added.cast(marked.schema)])


def _merge(
    df: DataFrame,
    ref: TableRef,
    dt: Any,
    keys: Sequence[str],
    clauses: Any,
    metadata: dict[str, Any] | None,
    txn: tuple[str, int] | None,
    on_driver: bool,
    *,
    guard: str | None = None,
) -> dict[str, Any]:
    """MERGE `df` in, matching rows by `keys` (NULL matches NULL) and `guard`, with the given clauses in one
    commit: collected as Arrow (`on_driver`), or staged as Parquet under the table and streamed from there.

    A source in memory lets delta-rs skip the target files outside the source's key ranges, but its planning
    of that fails for a merge without keys. A key column the source holds no NULL in is matched by `=`, which
    delta-rs runs as a hash join, five times faster than the `IS NOT DISTINCT FROM` that NULL keys need (and
    equal to it: a NULL target key matches no source key either way)."""
    staging = TableRef(join_uri(ref.uri, STAGING_DIR, uuid.uuid4().hex), ref.storage_options)
    on_driver = on_driver or isinstance(df, pa.Table)
    try:
        if on_driver:
            source = _collected(df)
            nulls = {k: source.column(k).null_count > 0 for k in keys}
            if not keys:
                source = source.to_reader()
        else:
            write_table(df, staging)
            nulls = _null_columns(staging, keys)
            source = staging.open().to_pyarrow_dataset().scanner(batch_size=65_536).to_reader()
        q = _datafusion_identifier
        on = " AND ".join(
            [
                *([guard] if guard else []),
                *[
                    f"(t.{q(k)} IS NOT DISTINCT FROM s.{q(k)})" if nulls[k] else f"t.{q(k)} = s.{q(k)}"
                    for k in keys
                ],
            ]
        )
        options = WriteOptions(metadata=tuple(sorted((metadata or {}).items())), txn=txn)
        version = dt.version()
        merger = dt.merge(
            source,
            on,
            source_alias="s",
            target_alias="t",
            streamed_exec=not (on_driver and keys),
            commit_properties=options.commit_properties(),
        )
        ref.committed()
        try:
            metrics = clauses(merger).execute()
        except Exception as e:
            raise StorageError(
                f"cannot merge into {ref.label}: {ref.redact(str(e))}",
                hint="a common cause is a key that appears more than once in the merged data",
            ) from None
        ref.committed()
        if ref.open().version() == version:
            # delta-rs commits nothing for a MERGE that changes nothing; the write still commits, with its
            # metadata and transaction: a batch is a version, which the views downstream read (issue 43).
            commit_files(ref, pa.schema(ref.open().schema().to_arrow()), [], [], options)
        return metrics
    finally:
        if not on_driver:
            staging.forget()
            remove_staging(staging.uri, staging.storage_options)


def _null_columns(ref: TableRef, columns: Sequence[str]) -> dict[str, bool]:
    """Which of the columns may hold NULL in the table, by its files' statistics (True where they are missing)."""
    actions = pa.table(ref.open().get_add_actions(flatten=True))
    found = {}
    for column in columns:
        stat = f"null_count.{column}"
        counts = actions.column(stat) if stat in actions.column_names else None
        found[column] = counts is None or counts.null_count > 0 or (pc.sum(counts).as_py() or 0) > 0
    return found


def _arrow_schema(df: DataFrame | pa.Table) -> pa.Schema:
    return df.schema if isinstance(df, pa.Table) else spark_to_arrow_schema(df.schema)


def _collected(df: DataFrame | pa.Table) -> pa.Table:
    """The DataFrame's rows on the driver, with the Arrow types its writes and merges use."""
    if isinstance(df, pa.Table):
        return df
    schema = spark_to_arrow_schema(df.schema)
    return table_of_batches([conform_batch(b, schema) for b in df.toArrow().to_batches()], schema)


def remove_folder(ref: TableRef) -> None:
    """Delete a table's whole folder."""
    ref.forget()
    remove_tree(ref.uri, ref.storage_options)


def _datafusion_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


__all__ = [
    "STAGING_DIR",
    "ChangeFeed",
    "batch_ranges",
    "merge_into",
    "read_change_feed",
    "read_changes",
    "read_table",
    "replace_rows",
    "stream_version_ranges",
    "write_table",
]
