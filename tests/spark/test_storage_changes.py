"""Change data feed reads (batch) after inserts, updates, deletes and merges, by each reader."""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mvengine.errors import CdfDisabledError, StorageError
from mvengine.storage.api import merge_into, read_change_feed, read_changes, write_table
from mvengine.storage.datasource import FORMAT
from mvengine.storage.tables import TableRef
from tests.conftest import bag, examples, rows


def changes(spark, ref, first, last=None):
    df = read_changes(spark, ref, first, last)
    return rows(df.select("id", "v", "_change_type", "_commit_version"))


def test_cdf_of_insert_update_delete_and_merge(spark, table):
    ref = table()
    write_table(spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "id long, v string"), ref)  # v0
    DeltaTable(ref.uri).update(updates={"v": "'B'"}, predicate="id = 2")  # v1
    DeltaTable(ref.uri).delete("id = 3")  # v2
    merge_into(spark.createDataFrame([(1, "A"), (4, "d")], "id long, v string"), ref, ["id"])  # v3
    assert changes(spark, ref, 0) == sorted(
        [
            (1, "a", "insert", 0),
            (2, "b", "insert", 0),
            (3, "c", "insert", 0),
            (2, "b", "update_preimage", 1),
            (2, "B", "update_postimage", 1),
            (3, "c", "delete", 2),
            (1, "a", "update_preimage", 3),
            (1, "A", "update_postimage", 3),
            (4, "d", "insert", 3),
        ],
        key=lambda t: (t[0], t[3], t[2]) and t,
    )
    assert changes(spark, ref, 2, 2) == [(3, "c", "delete", 2)]
    df = read_changes(spark, ref, 1, 1)
    assert [f.name for f in df.schema.fields][-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    assert (
        dict((f.name, f.dataType.simpleString()) for f in df.schema.fields)["_commit_timestamp"]
        == "timestamp"
    )


def test_overwrite_shows_deletes_and_inserts(spark, table):
    ref = table()
    write_table(spark.createDataFrame([(1, "a")], "id long, v string"), ref)
    write_table(spark.createDataFrame([(2, "b")], "id long, v string"), ref, mode="overwrite")
    assert changes(spark, ref, 1) == [(1, "a", "delete", 1), (2, "b", "insert", 1)]


def test_long_ranges_are_split_into_several_partitions(spark, table):
    ref = table()
    for i in range(40):
        write_table(spark.createDataFrame([(i, str(i))], "id long, v string").coalesce(1), ref)
    df = (
        spark.read.format("mvdelta")
        .option("readChangeFeed", "true")
        .option("filesPerPartition", 8)
        .load(ref.uri)
    )
    assert df.rdd.getNumPartitions() == 5
    assert rows(df.select("id", "_commit_version")) == [(i, i) for i in range(40)]


def test_table_without_cdf_is_refused_with_the_fix(spark, table):
    import pyarrow as pa
    from deltalake import write_deltalake

    ref = table("plain")
    write_deltalake(ref.uri, pa.table({"id": [1]}))
    with pytest.raises(CdfDisabledError) as info:
        read_changes(spark, ref, 0)
    message = str(info.value)
    assert f"table 'plain' at {ref.uri} does not have the change data feed enabled" in message
    assert "set_table_properties({'delta.enableChangeDataFeed': 'true'})" in message


def test_invalid_range_is_refused(spark, table):
    ref = table()
    write_table(spark.range(1), ref)
    with pytest.raises(StorageError, match=r"invalid change range 0..5 .* versions are 0..0"):
        read_changes(spark, ref, 0, 5)


COMMITS = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.lists(st.integers(0, 9), min_size=1, max_size=4)),
        st.tuples(st.just("merge"), st.lists(st.integers(0, 9), min_size=1, max_size=4, unique=True)),
        st.tuples(st.just("spark_update"), st.integers(0, 9)),
        st.tuples(st.just("spark_delete"), st.integers(0, 9)),
    ),
    min_size=1,
    max_size=5,
)


@settings(
    max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(commits=COMMITS, data=st.data())
def test_every_reader_of_a_feed_gives_the_same_rows_and_commit_times(spark, tmp_path_factory, commits, data):
    """delta-rs on the driver (`driver_rows`), Delta's connector, and mvdelta read the same feed, with the same
    commit times, over commits by both engines."""
    ref = TableRef(str(tmp_path_factory.mktemp("feeds") / "t"))
    write_table(spark.createDataFrame([(0, "a")], "id long, v string"), ref)
    for kind, arg in commits:
        if kind == "insert":
            write_table(spark.createDataFrame([(i, "i") for i in arg], "id long, v string"), ref)
        elif kind == "merge":
            merge_into(spark.createDataFrame([(i, "m") for i in arg], "id long, v string"), ref, ["id"])
        else:
            _update_or_delete(spark, ref, kind, arg)
    last = DeltaTable(ref.uri).version()
    first = data.draw(st.integers(0, last))
    feed = read_change_feed(spark, ref, first, last, driver_rows=1_000)
    assert feed.arrow is not None and feed.counts()[0] == feed.arrow.num_rows
    on_driver = feed.rows
    by_connector = read_changes(spark, ref, first, last)
    by_mvdelta = _by_mvdelta(spark, ref, first, last)
    assert on_driver.schema.simpleString() == by_mvdelta.schema.simpleString()
    assert bag(on_driver) == bag(by_connector) == bag(by_mvdelta)


@settings(
    max_examples=examples(2), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(commits=COMMITS, data=st.data())
def test_the_feed_of_a_table_with_column_mapping_is_the_same_by_every_reader(
    spark, tmp_path_factory, commits, data
):
    """A table Spark made with column mapping (and deletion vectors): its files name the columns `col-<uuid>`,
    and delta-rs does not read its feed. delta-kernel-rs reads it on the driver and in mvdelta's workers, with
    the rows and commit times of Delta's connector."""
    ref = TableRef(str(tmp_path_factory.mktemp("mapped") / "t"))
    spark.sql(f"""CREATE TABLE delta.`{ref.uri}` (id BIGINT, v STRING) USING delta TBLPROPERTIES (
                  'delta.columnMapping.mode' = 'name', 'delta.enableChangeDataFeed' = 'true',
                  'delta.enableDeletionVectors' = 'true')""")
    spark.sql(f"INSERT INTO delta.`{ref.uri}` VALUES (0, 'a')")
    for kind, arg in commits:
        if kind == "insert":
            spark.sql(f"INSERT INTO delta.`{ref.uri}` VALUES " + ", ".join(f"({i}, 'i')" for i in arg))
        elif kind == "merge":
            rows = " UNION ALL ".join(f"SELECT CAST({i} AS BIGINT) AS id" for i in arg)
            spark.sql(f"""MERGE INTO delta.`{ref.uri}` AS t USING ({rows}) AS s ON t.id = s.id
                          WHEN MATCHED THEN UPDATE SET v = 'm'
                          WHEN NOT MATCHED THEN INSERT (id, v) VALUES (s.id, 'm')""")
        else:
            _update_or_delete(spark, ref, kind, arg)
    last = DeltaTable(ref.uri).version()
    first = data.draw(st.integers(1, last))
    feed = read_change_feed(spark, ref, first, last, driver_rows=1_000)
    assert feed.arrow is not None  # read on the driver
    by_mvdelta = _by_mvdelta(spark, ref, first, last)
    assert bag(feed.rows) == bag(read_changes(spark, ref, first, last)) == bag(by_mvdelta)


def _update_or_delete(spark, ref: TableRef, kind: str, id_: int) -> None:
    """A COMMITS step of Spark SQL's: an UPDATE or a DELETE of the rows of one id."""
    if kind == "spark_update":
        spark.sql(f"UPDATE delta.`{ref.uri}` SET v = 'u' WHERE id = {id_}")
    else:
        spark.sql(f"DELETE FROM delta.`{ref.uri}` WHERE id = {id_}")


def _by_mvdelta(spark, ref: TableRef, first: int, last: int):
    """The feed of versions first..last read by mvdelta, in Spark's Python workers."""
    return (
        spark.read.format(FORMAT)
        .option("readChangeFeed", "true")
        .option("startingVersion", first)
        .option("endingVersion", last)
        .load(ref.uri)
    )
