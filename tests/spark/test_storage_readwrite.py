"""Writes and batch reads through the mvdelta data source: every supported type, time travel, partitions."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import pytest
from deltalake import CommitProperties, DeltaTable

from mvengine.errors import StorageError
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
