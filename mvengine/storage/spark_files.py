"""Large writes of a local table by Spark's own Parquet writer, committed by delta-rs.

The Python data source's writer (storage/writer.py) moves every row from Spark's JVM to a Python worker and
encodes it with pyarrow: a bootstrap's 90M-row snapshot and changelog took 65 s each, where Spark's CTAS of the
whole query took 13 to 26 (benchmarks/README.md, "Issue 39, point 4"). Here Spark's JVM writes the Parquet files
into a staging folder, the driver moves them into the table's folder, reads each file's Delta statistics off its
footer (storage/files.footer_stats) and commits them all in one delta-rs commit, with mvengine's commit metadata
and application transaction, as storage/writer.commit_files commits the Python writer's files. A key that must
be unique is checked as the rows are written: a window over the key, which the rows' range partitioning by it
already places and sorts (no shuffle more), fails the job at a key counted twice, before anything is committed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from mvengine.names import quote_identifier
from mvengine.storage.files import DUPLICATE_KEY, STAGING_DIR, WrittenFile, delete_files, footer_stats
from mvengine.storage.objects import local_path, remove_staging
from mvengine.storage.tables import TableRef, is_committed
from mvengine.storage.writer import WriteOptions, commit_files


def write_files(
    df: DataFrame,
    ref: TableRef,
    schema: pa.Schema,
    options: WriteOptions,
    cluster_by: Sequence[str] = (),
) -> bool:
    """Write `df` (in `schema`, the table's Arrow columns) into local table `ref` in one commit, in files of at
    most `options.target_file_rows` rows; with `cluster_by`, range-partitioned and sorted by those columns, and
    (`options.unique`) failing with DUPLICATE_KEY, writing nothing, where they repeat. Returns False, writing
    nothing, when the application transaction is committed by the time the files are."""
    root = local_path(ref.uri)
    staging = os.path.join(root, STAGING_DIR, uuid.uuid4().hex)
    if cluster_by:
        columns = [quote_identifier(c) for c in cluster_by]
        df = df.repartitionByRange(_ranges(df), *columns).sortWithinPartitions(*columns)
        if options.unique:
            df = _unique(df, cluster_by)
    try:
        df.write.option("maxRecordsPerFile", options.target_file_rows).parquet(staging)
        prefix = f"{uuid.uuid4().hex[:8]}-"
        files = []
        for name in sorted(os.listdir(staging)):
            if name.endswith(".parquet"):
                path = f"{prefix}{name}"
                os.replace(os.path.join(staging, name), os.path.join(root, path))
                files.append(WrittenFile(path, os.path.getsize(os.path.join(root, path)), {}, ""))
    finally:
        remove_staging(staging, ref.storage_options)
    if options.txn is not None and is_committed(ref, *options.txn):
        delete_files(ref, [f.path for f in files])
        return False
    for f in files:
        f.stats = footer_stats(os.path.join(root, f.path), schema)
    empty = [
        f for f in files if json.loads(f.stats)["numRecords"] == 0
    ]  # (a task that had no rows wrote one)
    delete_files(ref, [f.path for f in empty])
    commit_files(ref, schema, [f for f in files if f not in empty], [], options)
    return True


# Bytes (as Spark estimates a plan's output) per range of a clustered write, and the most ranges: a range is one
# task's sort, which past a few hundred MB spills to disk (90M rows of three BIGINTs in the session's 4 ranges
# took 67 s, in 32 ranges 47 s: benchmarks/README.md, "Issue 39, point 4", run I).
RANGE_BYTES = 32 * 1024 * 1024
MOST_RANGES = 64


def _ranges(df: DataFrame) -> int:
    """How many key ranges a clustered write sorts apart: by the size Spark estimates the rows at, at least the
    session's shuffle partitions (an estimate it cannot make, a checkpoint's, takes those)."""
    default = int(df.sparkSession.conf.get("spark.sql.shuffle.partitions") or 4)
    estimate = int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
    if estimate >= 2**62:  # (no estimate: Spark's default is Long.MaxValue)
        return default
    return max(default, min(MOST_RANGES, -(-estimate // RANGE_BYTES)))


def _unique(df: DataFrame, keys: Sequence[str]) -> DataFrame:
    """`df`, range-partitioned and sorted by `keys`, failing at a row whose key another row has (NULL equal to
    NULL, as unique_rows compares), with DUPLICATE_KEY and the key's values."""
    columns = [F.col(quote_identifier(k)) for k in keys]
    copies = F.count(F.lit(1)).over(Window.partitionBy(*columns))
    shown = F.concat_ws(
        ", ",
        *[
            F.concat(F.lit(f"{k}="), F.coalesce(c.cast("string"), F.lit("None")))
            for k, c in zip(keys, columns)
        ],
    )
    failed = F.raise_error(F.concat(F.lit(f"{DUPLICATE_KEY} ("), shown, F.lit(")")))
    once = F.when(F.col("_mvengine_copies") > 1, failed).otherwise(F.lit(True))
    return df.withColumn("_mvengine_copies", copies).where(once).drop("_mvengine_copies")
