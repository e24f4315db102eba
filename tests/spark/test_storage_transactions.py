"""Application transactions make writes idempotent; merges upsert and delete by key."""

from __future__ import annotations

import shutil

import pytest
from deltalake import DeltaTable

from mvengine.errors import StorageError
from mvengine.storage.api import merge_into, read_table, replace_rows, write_table
from mvengine.storage.tables import commit_history, is_committed
from tests.conftest import rows

# Writes and merges go through a Spark job, or (on_driver, for a small batch) through Arrow on the driver:
# both paths must commit the same.
BOTH_PATHS = pytest.mark.parametrize("on_driver", [False, True], ids=["spark", "driver"])


@BOTH_PATHS
def test_a_committed_transaction_is_not_written_again(spark, table, on_driver):
    ref = table()
    assert not is_committed(ref, "view-1", 0)
    assert write_table(spark.range(3), ref, txn=("view-1", 0), on_driver=on_driver)
    assert is_committed(ref, "view-1", 0) and not is_committed(ref, "view-1", 1)
    assert not write_table(spark.range(3), ref, txn=("view-1", 0), on_driver=on_driver)
    assert write_table(spark.range(3, 4), ref, txn=("view-1", 1), on_driver=on_driver)
    assert DeltaTable(ref.uri).version() == 1
    assert read_table(spark, ref).count() == 4


def test_a_table_made_anew_at_its_path_has_its_transactions_read_anew(spark, table):
    """Its versions start again from 0: what the old table's version 0 said of a transaction must not serve
    (delta-rs is asked once per table version)."""
    ref = table()
    write_table(spark.range(3), ref, txn=("view-1", 0), on_driver=True)
    assert is_committed(ref, "view-1", 0)
    shutil.rmtree(ref.uri.removeprefix("file://"))
    write_table(spark.range(3), ref, on_driver=True)
    assert DeltaTable(ref.uri).version() == 0
    assert not is_committed(ref, "view-1", 0)


def test_the_data_source_itself_skips_a_committed_transaction(spark, table):
    ref = table()
    write_table(spark.range(3), ref, txn=("v", 5))
    files_before = set(DeltaTable(ref.uri).file_uris())
    # A replayed batch that bypasses write_table's check: the data source skips the commit on its own.
    (
        spark.range(10)
        .write.format("mvdelta")
        .mode("append")
        .option("txnAppId", "v")
        .option("txnVersion", 5)
        .save(ref.uri)
    )
    assert DeltaTable(ref.uri).version() == 0
    assert set(DeltaTable(ref.uri).file_uris()) == files_before
    import os

    assert sorted(f for f in os.listdir(ref.uri) if f.endswith(".parquet")) == sorted(
        os.path.basename(f) for f in files_before
    )


@BOTH_PATHS
def test_merge_upserts_and_deletes_by_key_with_null_keys(spark, table, on_driver):
    ref = table()
    write_table(spark.createDataFrame([(1, "a"), (2, "b"), (None, "n")], "k long, v string"), ref)
    delta = spark.createDataFrame(
        [(1, "A", False), (2, None, True), (3, "C", False), (None, "N", False), (4, "gone", True)],
        "k long, v string, deleted boolean",
    )
    metrics = merge_into(
        delta,
        ref,
        ["k"],
        delete_column="deleted",
        metadata={"mvengine.batch_id": "1"},
        txn=("m", 1),
        on_driver=on_driver,
    )
    assert metrics["num_target_rows_updated"] == 2 and metrics["num_target_rows_deleted"] == 1
    assert rows(read_table(spark, ref)) == [(1, "A"), (3, "C"), (None, "N")]
    assert DeltaTable(ref.uri).history(1)[0]["mvengine.batch_id"] == "1"
    assert merge_into(delta, ref, ["k"], delete_column="deleted", txn=("m", 1), on_driver=on_driver) is None
    assert DeltaTable(ref.uri).version() == 1
    assert "_mvengine_staging" not in __import__("os").listdir(ref.uri)  # (nor the folder staging was in)


@BOTH_PATHS
def test_merge_matches_null_keys_column_by_column(spark, table, on_driver):
    """A key column without NULL in the merged rows is matched by `=` (fast), one with NULL by IS NOT DISTINCT
    FROM: the target's NULL keys must neither match a non-NULL key nor be lost."""
    ref = table()
    write_table(
        spark.createDataFrame(
            [(1, None, "a"), (1, 1, "b"), (None, None, "c"), (None, 2, "d")], "a long, b long, v string"
        ),
        ref,
    )
    delta = spark.createDataFrame([(1, None, "A"), (1, 1, "B"), (5, None, "E")], "a long, b long, v string")
    merge_into(delta, ref, ["a", "b"], on_driver=on_driver)
    assert rows(read_table(spark, ref)) == [
        (1, 1, "B"),
        (1, None, "A"),
        (5, None, "E"),
        (None, 2, "d"),
        (None, None, "c"),
    ]


@BOTH_PATHS
def test_merge_with_duplicate_keys_is_refused_and_writes_nothing(spark, table, on_driver):
    ref = table()
    write_table(spark.createDataFrame([(1, "a")], "k long, v string"), ref)
    with pytest.raises(StorageError, match="cannot merge into"):
        merge_into(
            spark.createDataFrame([(1, "x"), (1, "y")], "k long, v string"), ref, ["k"], on_driver=on_driver
        )
    assert DeltaTable(ref.uri).version() == 0


def test_merge_of_wrong_columns_is_refused(spark, table):
    ref = table()
    write_table(spark.createDataFrame([(1, "a")], "k long, v string"), ref)
    with pytest.raises(StorageError, match=r"the data's columns \['k'\] must be the table's"):
        merge_into(spark.createDataFrame([(1,)], "k long"), ref, ["k"])


@BOTH_PATHS
@pytest.mark.parametrize("keys", [["k"], []], ids=["keyed", "one-row"])
def test_replace_rows_removes_every_copy_of_the_keys_then_inserts(spark, table, on_driver, keys):
    ref = table()
    before = [(1, "a"), (1, "a"), (2, "b"), (None, "n")] if keys else [(7, "x")]
    write_table(spark.createDataFrame(before, "k long, v string"), ref)
    deletes = spark.createDataFrame([(1, None), (None, None)] if keys else [(7, None)], "k long, v string")
    inserts = spark.createDataFrame([(1, "A"), (5, "e")] if keys else [(8, "y")], "k long, v string")
    assert replace_rows(
        inserts, ref, keys, deletes, metadata={"mvengine.batch_id": "3"}, txn=("r", 3), on_driver=on_driver
    )
    assert rows(read_table(spark, ref)) == ([(1, "A"), (2, "b"), (5, "e")] if keys else [(8, "y")])
    assert DeltaTable(ref.uri).history(1)[0]["mvengine.batch_id"] == "3"
    assert not replace_rows(inserts, ref, keys, deletes, txn=("r", 3), on_driver=on_driver)
    assert DeltaTable(ref.uri).version() == 1


def test_commit_history_numbers_the_versions_right_when_a_commit_lands_after_the_table_was_loaded(table):
    """delta-rs numbers history() down from the version it loaded but reads the log as it is then: a commit in
    between (a view refreshing while it is described) would shift every label by one."""
    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake

    ref = table()

    def commit(n: int) -> None:
        write_deltalake(
            ref.uri,
            pa.table({"n": [n]}),
            mode="append",
            commit_properties=CommitProperties(custom_metadata={"n": str(n)}),
        )

    for n in range(3):
        commit(n)
    loaded = ref.open()
    commit(3)  # lands after `loaded` was read
    entries = commit_history(loaded)
    assert sorted((h["version"], h["n"]) for h in entries) == [(v, str(v)) for v in range(4)]
