"""Seed 002's running example (Streaming Systems, ch. 8), refreshed batch by batch: the STREAM rendering of
SUM(Score) per user must be exactly the book's `+I / -U / +U` sequence (the book's undo rows show the time of
the change, which is our `_mtime`; the row itself carries the values it retracts), and the TeamAndScore ->
LargeTeamTotals chain with HAVING must insert a team when it passes the threshold and delete it when a
retraction takes it back under."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from deltalake import DeltaTable

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_table, write_table
from mvengine.storage.tables import TableRef

SQL = """
CREATE TABLE user_scores (name STRING NOT NULL, team STRING, score INT, ts TIMESTAMP);
CREATE MATERIALIZED VIEW user_totals AS
SELECT name, SUM(score) AS total, MAX(ts) AS time FROM user_scores GROUP BY name;
CREATE MATERIALIZED VIEW team_and_score AS SELECT team, score FROM user_scores;
CREATE MATERIALIZED VIEW large_team_totals AS
SELECT team, SUM(score) AS total FROM team_and_score GROUP BY team HAVING SUM(score) > 10;
"""
ORDER = {"-D": 0, "-U": 1, "+U": 2, "+I": 3}


def at(hhmm: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-22 {hhmm}:00")


def changelog(spark, catalog, view: str) -> list[tuple]:
    """(batch, op, values...) in emission order: by batch, then retractions before insertions, then key."""
    plan = catalog.plans[view]
    rows = read_table(spark, view_tables(plan, {}).changelog).collect()
    columns = [c.name for c in plan.columns]
    out = [(r["_version"], r["_op"], *[r[c] for c in columns]) for r in rows]
    return sorted(out, key=lambda t: (t[0], ORDER[t[1]], str(t[2:])))


def test_seed_002_user_scores_stream_and_large_team_totals(spark, tmp_path: Path):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "seed.sql").write_text(SQL)
    config = load_config(tmp_path)
    catalog = load_catalog(config)
    refresher = Refresher(spark, config, catalog)
    scores = TableRef(catalog.sources["user_scores"].path)
    schema = "name string, team string, score int, ts timestamp"
    refresher.refresh()  # the views start empty (version 0)

    batches = [
        [("Julie", "red", 7, at("12:01"))],
        [("Frank", "blue", 3, at("12:03")), ("Julie", "red", 1, at("12:03"))],
        [("Julie", "red", 4, at("12:07"))],
    ]
    for rows in batches:
        write_table(spark.createDataFrame(rows, schema), scores)
        refresher.refresh()
    # A retraction: Julie's 12:07 score is withdrawn.
    DeltaTable(scores.uri).delete("name = 'Julie' AND score = 4")
    refresher.refresh()

    assert [t[1:] for t in changelog(spark, catalog, "user_totals")] == [
        ("+I", "Julie", 7, at("12:01")),
        ("-U", "Julie", 7, at("12:01")),
        ("+U", "Julie", 8, at("12:03")),
        ("+I", "Frank", 3, at("12:03")),
        ("-U", "Julie", 8, at("12:03")),
        ("+U", "Julie", 12, at("12:07")),
        ("-U", "Julie", 12, at("12:07")),
        ("+U", "Julie", 8, at("12:03")),
    ]
    by_batch = changelog(spark, catalog, "user_totals")
    assert [t[0] for t in by_batch] == [1, 2, 2, 2, 3, 3, 4, 4]  # one snapshot version per refresh
    assert [t[1:] for t in changelog(spark, catalog, "large_team_totals")] == [
        ("+I", "red", 12),  # red passes 10 with Julie's 4
        ("-D", "red", 12),  # and falls back to 8 when it is withdrawn
    ]
    emit_index = [
        r["_emit_index"]
        for r in read_table(spark, view_tables(catalog.plans["user_totals"], {}).changelog)
        .where("name = 'Julie'")
        .orderBy("_version", "_undo")
        .collect()
    ]
    assert emit_index == [0, 1, 0, 2, 1, 3, 2]  # +I 0; (-U 0, +U 1); (-U 1, +U 2); (-U 2, +U 3) per revision
