"""The version-range stream: exact per-table version ranges per batch (whose changes read_changes reads), and
replay after a restart."""

from __future__ import annotations

import os

from mvengine.storage.api import batch_ranges, read_changes, stream_version_ranges, write_table
from tests.conftest import rows


def run_available_now(spark, refs, checkpoint, starting=None):
    """Run the stream until it has reached everything committed now; return [(batch_id, ranges, rows)], the rows
    being (table, change type, version, id or k) of the changes in the ranges."""
    seen = []

    def consume(df, batch_id):
        assert df.isEmpty()  # the stream carries ranges, not rows
        ranges = batch_ranges(checkpoint, batch_id)
        changes = []
        for name, (lo, hi) in ranges.items():
            feed = read_changes(spark, refs[name], lo + 1, hi)
            changes += [
                (name, *r) for r in rows(feed.select("_change_type", "_commit_version", feed.columns[0]))
            ]
        seen.append((batch_id, ranges, sorted(changes)))

    query = (
        stream_version_ranges(spark, refs, starting)
        .writeStream.foreachBatch(consume)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return seen


def test_batches_know_every_input_range_and_replay_after_restart(spark, table, tmp_path):
    a, b = table("a"), table("b")
    write_table(spark.range(2), a)  # a v0
    write_table(spark.range(1).selectExpr("id as k"), b)  # b v0
    write_table(spark.range(2, 3), a)  # a v1
    checkpoint = str(tmp_path / "checkpoint")
    refs = {"a": a, "b": b}

    first = run_available_now(spark, refs, checkpoint, {"a": -1, "b": 0})
    assert [(bid, ranges) for bid, ranges, _ in first] == [(0, {"a": (-1, 1), "b": (0, 0)})]
    assert first[0][2] == [("a", "insert", 0, 0), ("a", "insert", 0, 1), ("a", "insert", 1, 2)]

    assert run_available_now(spark, refs, checkpoint) == []  # nothing new: no batch

    write_table(spark.range(5, 6).selectExpr("id as k"), b)  # b v1
    second = run_available_now(spark, refs, checkpoint)
    assert [(bid, ranges) for bid, ranges, _ in second] == [(1, {"a": (1, 1), "b": (0, 1)})]
    assert second[0][2] == [("b", "insert", 1, 5)]

    # A crash after the batch ran but before Spark recorded it: the same batch is replayed, with the same rows.
    for name in ("1", ".1.crc"):
        os.remove(os.path.join(checkpoint, "commits", name))
    write_table(spark.range(9, 10), a)  # a v2, after the logged offsets
    replay = run_available_now(spark, refs, checkpoint)
    assert replay[0] == second[0]
    assert [(bid, ranges) for bid, ranges, _ in replay[1:]] == [(2, {"a": (1, 2), "b": (1, 1)})]


def test_default_start_is_the_current_version(spark, table, tmp_path):
    a, b = table("a"), table("b")
    write_table(spark.range(3), a)
    write_table(spark.range(1).selectExpr("id as k"), b)
    checkpoint = str(tmp_path / "checkpoint")
    # Spark runs a first, empty batch at the initial offset of a new query: it covers no versions.
    assert run_available_now(spark, {"a": a, "b": b}, checkpoint) == [(0, {"a": (0, 0), "b": (0, 0)}, [])]
    write_table(spark.range(7, 8), a)
    (batch,) = run_available_now(spark, {"a": a, "b": b}, checkpoint)
    assert batch == (1, {"a": (0, 1), "b": (0, 0)}, [("a", "insert", 1, 7)])
