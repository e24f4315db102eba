"""Writes and batch reads of Delta tables from Spark: every supported type, time travel, partitions. A local table
is written by Spark's own Parquet writer and committed by delta-rs with statistics from the files' footers
(storage/spark_files.py); a partitioned one, and one on an object store Spark cannot reach, by the mvdelta data
source."""

from __future__ import annotations

import datetime as dt
import os
import time
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable

from mvengine.errors import KeyWrittenTwice, StorageError
from mvengine.storage.api import read_table, write_table
from mvengine.storage.tables import commit_history, commit_metadata
from tests.conftest import bag, rows

ALL_TYPES = (
    "b boolean, i8 tinyint, i16 smallint, i32 int, i64 bigint, f float, d double, dec decimal(20,4), "
    "s string, bin binary, day date, ts timestamp, ntz timestamp_ntz, "
    "st struct<x: int, y: string>, arr array<bigint>, m map<string, int>"
)
ALL_TYPE_ROWS = [
    (
        True,
        1,
        2,
        3,
        4,
        1.5,
        2.25,
        Decimal("12345678901234.5678"),
        "héllo ☃",
        b"\x00\xff",
        dt.date(2026, 11, 21),
        dt.datetime(2026, 11, 21, 12, 3, 0, 123456),
        dt.datetime(2026, 1, 2, 3, 4, 5),
        (7, "s"),
        [1, None, 3],
        {"k": 1},
    ),
    (None,) * 16,
    (
        False,
        -128,
        -32768,
        -(2**31),
        -(2**63),
        float("inf"),
        float("nan"),
        Decimal("-0.0001"),
        "",
        b"",
        dt.date(1, 1, 1),
        dt.datetime(1970, 1, 1),
        dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        (None, None),
        [],
        {},
    ),
]


def test_every_supported_type_round_trips_with_nulls(spark, table):
    ref = table()
    df = spark.createDataFrame(ALL_TYPE_ROWS, ALL_TYPES)
    assert write_table(df, ref)
    back = read_table(spark, ref)
    assert back.schema == df.schema
    assert bag(back) == bag(df)
    # Other Delta readers see a standard table: delta-rs reads it on its own.
    assert DeltaTable(ref.uri).to_pyarrow_table().num_rows == len(ALL_TYPE_ROWS)


def test_table_is_created_with_change_data_feed(spark, table):
    ref = table()
    write_table(spark.range(3), ref)
    assert DeltaTable(ref.uri).metadata().configuration["delta.enableChangeDataFeed"] == "true"


def test_time_travel_by_version_and_timestamp(spark, table):
    ref = table()
    write_table(spark.range(0, 3), ref)
    time.sleep(0.05)
    between = dt.datetime.now(dt.UTC)
    time.sleep(0.05)
    write_table(spark.range(3, 5), ref)
    assert read_table(spark, ref, version=0).count() == 3
    assert read_table(spark, ref, version=1).count() == 5
    assert read_table(spark, ref).count() == 5
    assert read_table(spark, ref, timestamp=between).count() == 3
    assert read_table(spark, ref, timestamp=between.strftime("%Y-%m-%d %H:%M:%S.%f")).count() == 3
    with pytest.raises(StorageError, match="has no version 7; versions are 0..1"):
        read_table(spark, ref, version=7)
    with pytest.raises(StorageError, match="has no version as of"):
        read_table(spark, ref, timestamp="2001-01-01 00:00:00")


def test_overwrite_replaces_rows_and_keeps_history(spark, table):
    ref = table()
    write_table(spark.range(0, 10), ref)
    write_table(spark.range(100, 102), ref, mode="overwrite")
    assert rows(read_table(spark, ref)) == [(100,), (101,)]
    assert read_table(spark, ref, version=0).count() == 10


def test_commit_metadata_is_recorded(spark, table):
    ref = table()
    write_table(spark.range(1), ref, metadata={"mvengine.inputs": '{"a": 3}', "mvengine.batch_id": "4"})
    info = commit_metadata(DeltaTable(ref.uri), 0)
    assert info["mvengine.inputs"] == '{"a": 3}' and info["mvengine.batch_id"] == "4"


def test_commit_metadata_of_a_version_that_landed_after_the_table_was_opened(tmp_path):
    """`mv changes --follow` opens a table, then asks for a version that landed since, while more commits land:
    the history must reach back to it from the newest version, not from the one the table was opened at."""
    import pyarrow as pa
    from deltalake import write_deltalake

    uri = str(tmp_path / "t")
    for i in range(2):
        write_deltalake(uri, pa.table({"x": [i]}), mode="append")
    opened = DeltaTable(uri)  # at version 1
    for i in range(2, 4):
        write_deltalake(
            uri,
            pa.table({"x": [i]}),
            mode="append",
            commit_properties=CommitProperties(custom_metadata={"n": str(i)}),
        )
    assert commit_metadata(opened, 2)["n"] == "2"
    assert [e["version"] for e in commit_history(DeltaTable(uri), since=2)] == [3, 2]


def test_projection_reads_only_the_requested_columns(spark, table):
    ref = table()
    write_table(spark.range(5).selectExpr("id", "id * 2 as twice", "'x' as s"), ref)
    df = read_table(spark, ref, columns=["twice"])
    assert df.columns == ["twice"]
    assert rows(df) == [(0,), (2,), (4,), (6,), (8,)]
    with pytest.raises(StorageError, match=r"has no column\(s\) \['nope'\]"):
        read_table(spark, ref, columns=["nope"])


def test_partitioned_write_lays_out_hive_folders(spark, table):
    ref = table()
    df = spark.range(20).selectExpr("id", "cast(id % 3 as int) as part", "if(id = 0, null, 'x') as s")
    write_table(df, ref, partition_by=["part"])
    dt_ = DeltaTable(ref.uri)
    assert dt_.metadata().partition_columns == ["part"]
    assert {p["part"] for p in dt_.partitions()} == {"0", "1", "2"}
    assert rows(read_table(spark, ref)) == rows(df)
    with pytest.raises(StorageError, match="is partitioned by"):
        write_table(df, ref, partition_by=["s"])


def test_reads_are_split_into_one_partition_per_file_group(spark, table):
    ref = table()
    for i in range(6):
        write_table(spark.range(i * 10, i * 10 + 10).coalesce(1), ref)
    assert len(DeltaTable(ref.uri).file_uris()) == 6
    df = read_table(spark, ref)  # minPartitions = the session's default parallelism (2)
    assert df.rdd.getNumPartitions() == 2
    one_per_file = spark.read.format("mvdelta").option("maxPartitionBytes", 1).load(ref.uri)
    assert one_per_file.rdd.getNumPartitions() == 6
    assert rows(one_per_file) == [(i,) for i in range(60)]


@pytest.mark.parametrize("on_driver", [False, True], ids=["spark", "driver"])
def test_a_clustered_write_gives_each_file_its_own_key_range(spark, table, on_driver):
    """So that a later MERGE of a few keys rewrites only the files of their range (delta-rs skips the others)."""
    import pyarrow as pa

    ref = table()
    shuffled = spark.range(30000).selectExpr("(id * 7919) % 30000 AS k", "id AS v").repartition(3)
    write_table(shuffled, ref, cluster_by=["k"], target_file_rows=10000, on_driver=on_driver)
    files = pa.table(DeltaTable(ref.uri).get_add_actions(flatten=True)).sort_by("min.k")
    lows, highs = files.column("min.k").to_pylist(), files.column("max.k").to_pylist()
    assert len(lows) >= 3 and all(high < low for high, low in zip(highs, lows[1:]))
    assert read_table(spark, ref).count() == 30000


def test_write_with_other_columns_is_refused_and_writes_nothing(spark, table):
    ref = table()
    write_table(spark.range(3), ref)
    with pytest.raises(StorageError, match="does not match its schema"):
        write_table(spark.range(3).selectExpr("cast(id as string) as id"), ref)
    assert DeltaTable(ref.uri).version() == 0


def test_missing_table_is_a_clear_error(spark, table):
    ref = table("missing")
    with pytest.raises(StorageError, match=f"no Delta table at {ref.uri}"):
        read_table(spark, ref)


def test_empty_table_reads_as_no_rows(spark, table):
    ref = table()
    write_table(spark.range(0), ref)
    assert read_table(spark, ref).count() == 0


def test_a_spark_write_records_each_files_statistics_as_delta_does(spark, table):
    """The statistics Spark's own writer leaves in each file's footer, in the log as Delta records them: the
    row count, NULLs per column, and the least and greatest value of integers, strings (none where the
    greatest is longer than 32 characters), dates and timestamps (to the millisecond, rounded outwards); a
    column of NULLs only, and a nested one, without a range."""
    ref = table()
    longer = "z" * 40
    df = spark.range(40).selectExpr(
        "id",
        "CAST(id - 20 AS INT) AS i",
        f"CASE WHEN id % 4 = 0 THEN NULL WHEN id = 39 THEN '{longer}' ELSE concat('s', id) END AS s",
        "date_add(DATE '2026-01-01', CAST(id AS INT)) AS day",
        "timestamp_micros(1767225600000000 + id * 1001) AS ts",
        "CAST(NULL AS BIGINT) AS nothing",
        "array(id) AS arr",
    )
    assert write_table(df.repartition(2), ref, target_file_rows=15)
    assert not os.path.exists(f"{ref.uri}/_mvengine_staging")  # (Spark's files staged there, moved out)
    table_ = DeltaTable(ref.uri)
    logged = pa.table(table_.get_add_actions(flatten=True)).to_pylist()
    assert len(logged) >= 4 and sum(f["num_records"] for f in logged) == 40
    for f in logged:
        rows_ = pq.read_table(f"{ref.uri}/{f['path']}")
        assert f["num_records"] == rows_.num_rows
        for name in ("id", "i", "s", "day", "ts", "nothing"):
            assert f[f"null_count.{name}"] == rows_.column(name).null_count, (name, f)
        for name in ("id", "i", "day"):
            low, high = pc.min_max(rows_.column(name)).values()
            assert (f[f"min.{name}"], f[f"max.{name}"]) == (low.as_py(), high.as_py()), (name, f)
        low, high = (v.as_py() for v in pc.min_max(rows_.column("ts")).values())
        assert f["min.ts"] <= low and high <= f["max.ts"] and (f["max.ts"] - f["min.ts"]).total_seconds() < 1
        strings = [v for v in rows_.column("s").to_pylist() if v is not None]
        if strings and max(strings) == longer:  # (no greatest value to record, and so no range)
            assert f["min.s"] is None and f["max.s"] is None
        elif strings:
            assert (f["min.s"], f["max.s"]) == (min(strings), max(strings))
        assert f["min.nothing"] is None and "min.arr" not in f
    assert bag(read_table(spark, ref)) == bag(df)


def test_a_spark_write_whose_key_repeats_commits_nothing(spark, table):
    """A write whose key must be unique (a view's first snapshot) fails at a key met twice, NULL as a key too,
    before anything is committed, and leaves no file behind."""
    ref = table()
    for key in ("7", "NULL"):
        df = spark.range(5000).selectExpr(f"IF(id IN (0, 4321), {key}, id) AS k", "id AS v").repartition(3)
        with pytest.raises(KeyWrittenTwice, match=f"k={'7' if key == '7' else 'None'}"):
            write_table(df, ref, cluster_by=["k"], unique=True)
        assert not ref.exists()
        written = [
            p.name
            for p in (pa.fs.LocalFileSystem().get_file_info(pa.fs.FileSelector(ref.uri, recursive=True)))
            if p.type == pa.fs.FileType.File
        ]
        assert written == [] and not os.path.exists(f"{ref.uri}/_mvengine_staging")
    unique = spark.range(5000).selectExpr("IF(id = 0, NULL, id) AS k", "id AS v").repartition(3)
    assert write_table(unique, ref, cluster_by=["k"], unique=True)
    assert read_table(spark, ref).count() == 5000


@pytest.mark.parametrize("on_driver", [False, True], ids=["spark", "driver"])
def test_a_table_clustered_by_a_key_with_a_time_keeps_a_batchs_keys_in_its_newest_files(
    spark, table, on_driver
):
    """A key of a time and something else (a window's start and an auction) is clustered by the time first: a
    batch's keys, of the latest windows, fall in the newest files, and a MERGE of them rewrites those files only,
    not every file (as clustering by the auction first would); the table asks delta-rs's MERGE for small files
    too (delta.targetFileSize)."""
    from mvengine.storage.api import CLUSTERED_FILE_BYTES, merge_into

    ref = table()
    windows = spark.range(40 * 500).selectExpr(
        "(id * 7919) % 500 AS auction", "timestamp_micros((id DIV 500) * 2000000) AS start", "id AS n"
    )
    write_table(windows, ref, cluster_by=["auction", "start"], target_file_rows=2000, on_driver=on_driver)
    table_ = DeltaTable(ref.uri)
    assert table_.metadata().configuration["delta.targetFileSize"] == str(CLUSTERED_FILE_BYTES)
    files = pa.table(table_.get_add_actions(flatten=True)).sort_by("min.start")
    lows, highs = files.column("min.start").to_pylist(), files.column("max.start").to_pylist()
    assert len(lows) >= 10 and all(high <= low for high, low in zip(highs, lows[1:]))
    latest = pa.table(
        {
            "auction": pa.array([1, 2, 3], pa.int64()),
            "start": pa.array([39 * 2_000_000, 39 * 2_000_000, 40 * 2_000_000], pa.timestamp("us", tz="UTC")),
            "n": pa.array([-1, -2, -3], pa.int64()),
        }
    )
    merge_into(latest, ref, ["auction", "start"])
    copied = DeltaTable(ref.uri).history(1)[0]["operationMetrics"]["num_target_rows_copied"]
    assert copied <= 2000, copied  # (one file's rows at most, of 20,000)
    assert read_table(spark, ref).count() == 20001
