"""EMIT policies that wait on processing time (seed 002's example 8-6 and late firings with a delay): the rows are
held in the view's state and come out once due, by a refresh with no new input, and by `--continuous` on its own
(a watermark moves only with data; a timer must fire without it)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mvengine.api import Project
from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_arrow
from mvengine.storage.tables import TableRef
from tests.conftest import add_scores

SOURCES = """
CREATE TABLE scores (team STRING, score INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)
WITH ('append_only' = 'true');
"""
VIEWS = """
CREATE MATERIALIZED VIEW delayed AS
SELECT team, window.end AS window_end, SUM(score) AS total FROM scores GROUP BY team, window(ts, '1 minute')
EMIT AFTER INTERVAL '2' SECOND;

CREATE MATERIALIZED VIEW late_delayed AS
SELECT team, window.end AS window_end, SUM(score) AS total FROM scores GROUP BY team, window(ts, '1 minute')
EMIT WHEN WATERMARK PAST window_end AND THEN AFTER INTERVAL '2' SECOND;
"""


def _project(root: Path) -> Path:
    (root / "views").mkdir()
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "views.sql").write_text(VIEWS)
    return root


def _snapshot(catalog, view: str) -> list[tuple]:
    rows = read_arrow(view_tables(catalog.plans[view], {}).snapshot).to_pylist()
    return sorted((r["team"], r["window_end"].strftime("%H:%M"), r["total"]) for r in rows)


def _changelog(catalog, view: str) -> list[tuple]:
    rows = read_arrow(view_tables(catalog.plans[view], {}).changelog).to_pylist()
    return sorted((r["_batch_id"], r["_op"], r["total"], r["_emit_timing"]) for r in rows)


def test_held_rows_come_out_when_due_by_a_refresh_without_new_input(spark, tmp_path):
    config = load_config(_project(tmp_path))
    catalog = load_catalog(config)
    assert catalog.plans["late_delayed"].changelog == "upsert"
    reports = []
    refresher = Refresher(spark, config, catalog, report=reports.append)
    refresher.refresh()  # the source, and the views, empty
    add_scores(catalog, [("x", 5, 10), ("x", 7, 80)])  # watermark 12:01:10: the 12:00-12:01 window is on time
    refresher.refresh()
    assert _snapshot(catalog, "delayed") == []  # held two seconds
    assert _snapshot(catalog, "late_delayed") == [("x", "12:01", 5)]
    add_scores(catalog, [("x", 3, 20)])  # late for 12:00-12:01: held two seconds too
    refresher.refresh()
    assert _snapshot(catalog, "late_delayed") == [("x", "12:01", 5)]
    time.sleep(2.2)
    reports.clear()
    refresher.refresh()  # no input moved
    assert {r.view: r.note for r in reports} == {
        "delayed": "rows held by its EMIT policy are due",
        "late_delayed": "rows held by its EMIT policy are due",
    }
    assert _snapshot(catalog, "delayed") == [("x", "12:01", 8), ("x", "12:02", 7)]
    assert _snapshot(catalog, "late_delayed") == [("x", "12:01", 8)]
    assert _changelog(catalog, "late_delayed")[-2:] == [(3, "+U", 8, "late"), (3, "-U", 5, "late")]
    reports.clear()
    refresher.refresh()  # nothing due any more: no batch
    assert reports == []


def test_continuous_fires_a_due_timer_without_new_input(spark, tmp_path):
    config = load_config(_project(tmp_path))
    catalog = load_catalog(config)
    project = Project(config, spark=spark)
    reports = []
    stop = threading.Event()
    failure: list[BaseException] = []
    Refresher(spark, config, catalog).refresh()
    add_scores(catalog, [("y", 4, 5)])

    def keep_fresh() -> None:
        try:
            project.refresh(interval_s=0.2, stopping=stop.is_set, on_batch=reports.append)
        except BaseException as e:  # reported by the test thread
            failure.append(e)

    runner = threading.Thread(target=keep_fresh, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not failure and time.monotonic() < deadline and not _emitted(catalog):
            time.sleep(0.2)
    finally:
        stop.set()
        runner.join(timeout=120)
    assert not failure, failure
    assert _snapshot(catalog, "delayed") == [("y", "12:01", 4)]
    assert any(r.view == "delayed" and r.note == "rows held by its EMIT policy are due" for r in reports)


def test_proctime_is_the_commit_time_of_the_change_that_brought_the_row(spark, tmp_path):
    views = """CREATE MATERIALIZED VIEW arrivals AS SELECT team, score, PROCTIME() AS arrived FROM scores;
               CREATE MATERIALIZED VIEW last_arrival AS
               SELECT team, MAX(PROCTIME()) AS latest FROM scores GROUP BY team;
               CREATE MATERIALIZED VIEW of_keyed AS SELECT team, PROCTIME() AS seen FROM teams;"""
    root = _project(tmp_path)
    (root / "views" / "views.sql").write_text(views)
    (root / "views" / "teams.sql").write_text(
        "CREATE TABLE teams (team STRING NOT NULL, PRIMARY KEY (team) NOT ENFORCED);"
    )
    config = load_config(root)
    catalog = load_catalog(config)
    assert catalog.plans["arrivals"].changelog == "append-only"
    assert "PROCTIME() over an input that updates or deletes rows" in catalog.plans["of_keyed"].reason
    refresher = Refresher(spark, config, catalog)
    refresher.refresh()
    source = TableRef(catalog.sources["scores"].path)
    committed = {}
    for score in (1, 2):
        add_scores(catalog, [("z", score, score)])
        committed[score] = source.open().history(1)[0]["timestamp"]
        refresher.refresh()
    arrivals = read_arrow(view_tables(catalog.plans["arrivals"], {}).snapshot).to_pylist()
    assert {r["score"]: int(r["arrived"].timestamp() * 1000) for r in arrivals} == committed
    latest = read_arrow(view_tables(catalog.plans["last_arrival"], {}).snapshot).to_pylist()
    assert [int(r["latest"].timestamp() * 1000) for r in latest] == [committed[2]]


def _emitted(catalog) -> bool:
    ref = view_tables(catalog.plans["delayed"], {}).snapshot
    return ref.exists() and read_arrow(ref).num_rows > 0
