"""Golden tests: seed 002's windowed examples (Streaming Systems, ch. 8) row by row, from the book's data.

Nine scores of team X arrive in processing-time order, one source commit and one refresh each; the watermark is
the largest event time seen less one minute (`WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE`). The seed's own
tables are images the text does not carry: the rows expected here are the book's dataset worked through by hand
with this watermark (each step is commented), and they show the book's shapes: per-record early updates, one
on-time row per window under `EMIT WHEN WATERMARK PAST`, the late correction of the first window (Frank's 9)
as a `-U`/`+U` pair marked `late` under `AND THEN AFTER 0 SECONDS`, and session windows whose late row bridges
two sessions, retracting both and inserting the merged one (sessions of 36 and 12 at the end, as in the book).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from deltalake import write_deltalake

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_arrow
from mvengine.storage.tables import TableRef

SOURCES = """
CREATE TABLE user_scores (name STRING NOT NULL, team STRING, score INT, ts TIMESTAMP,
                          WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE)
WITH ('append_only' = 'true');
"""
VIEWS = """
CREATE MATERIALIZED VIEW per_record AS
SELECT team, window.end AS window_end, SUM(score) AS total
FROM user_scores GROUP BY team, window(ts, '2 minutes');

CREATE MATERIALIZED VIEW on_time AS
SELECT team, TUMBLE_END(ts, INTERVAL '2' MINUTE) AS window_end, SUM(score) AS total
FROM user_scores GROUP BY team, TUMBLE(ts, INTERVAL '2' MINUTE)
EMIT WHEN WATERMARK PAST window_end;

CREATE MATERIALIZED VIEW on_time_and_late AS
SELECT team, window_end, SUM(score) AS total
FROM TABLE(TUMBLE(TABLE user_scores, DESCRIPTOR(ts), INTERVAL '2' MINUTE)) GROUP BY team, window_end
EMIT WHEN WATERMARK PAST window_end AND THEN AFTER 0 SECONDS;

CREATE MATERIALIZED VIEW sessions AS
SELECT team, session_window.start AS session_start, session_window.end AS session_end, SUM(score) AS total
FROM user_scores GROUP BY team, session_window(ts, '1 minute');
"""
# (name, score, event time), in processing-time order (12:05:19, 12:05:39, 12:06:13, ... 12:09:00).
SCORES = [
    ("Julie", 5, "12:00:26"),
    ("Ed", 7, "12:02:26"),
    ("Amy", 3, "12:03:39"),
    ("Fred", 4, "12:04:19"),
    ("Julie", 8, "12:03:06"),
    ("Naomi", 3, "12:06:39"),
    ("Frank", 9, "12:01:26"),
    ("Becky", 8, "12:07:26"),
    ("Naomi", 1, "12:07:46"),
]

# Per batch (one score each): the changelog rows (_op, window end or session bounds, total, _emit_timing).
# The watermark after each batch: 11:59:26, 12:01:26, 12:02:39, 12:03:19, 12:03:19, 12:05:39, 12:05:39,
# 12:06:26, 12:06:46.
PER_RECORD = [
    [("+I", "12:02", 5, "early")],
    [("+I", "12:04", 7, "early")],
    [("-U", "12:04", 7, "early"), ("+U", "12:04", 10, "early")],
    [("+I", "12:06", 4, "early")],
    [("-U", "12:04", 10, "early"), ("+U", "12:04", 18, "early")],
    [("+I", "12:08", 3, "early")],
    # Frank's 9 arrives after the watermark passed 12:02: the first window's update is late
    [("-U", "12:02", 5, "late"), ("+U", "12:02", 14, "late")],
    [("-U", "12:08", 3, "early"), ("+U", "12:08", 11, "early")],
    [("-U", "12:08", 11, "early"), ("+U", "12:08", 12, "early")],
]
ON_TIME = [
    [],
    [],
    [("+I", "12:02", 5, "on_time")],  # the watermark reaches 12:02:39: the first window is final at 5
    [],
    [],
    [("+I", "12:04", 18, "on_time")],  # 12:05:39 passes 12:04
    [],  # Frank's 9 is late: dropped
    [("+I", "12:06", 4, "on_time")],  # 12:06:26 passes 12:06
    [],  # the last window waits for a watermark past 12:08
]
ON_TIME_AND_LATE = [
    [],
    [],
    [("+I", "12:02", 5, "on_time")],
    [],
    [],
    [("+I", "12:04", 18, "on_time")],
    [("-U", "12:02", 5, "late"), ("+U", "12:02", 14, "late")],  # the late firing, at once (AFTER 0 SECONDS)
    [("+I", "12:06", 4, "on_time")],
    [],
]
# Sessions (gap 1 minute) are keyed by their bounds: a session that grows or merges is retracted (-D) and the
# new one inserted (+I).
SESSIONS = [
    [("+I", "12:00:26", "12:01:26", 5)],
    [("+I", "12:02:26", "12:03:26", 7)],
    [("+I", "12:03:39", "12:04:39", 3)],
    [("-D", "12:03:39", "12:04:39", 3), ("+I", "12:03:39", "12:05:19", 7)],
    # Julie's 8 at 12:03:06 bridges Ed's session and Amy's and Fred's
    [
        ("-D", "12:02:26", "12:03:26", 7),
        ("-D", "12:03:39", "12:05:19", 7),
        ("+I", "12:02:26", "12:05:19", 22),
    ],
    [("+I", "12:06:39", "12:07:39", 3)],
    # Frank's late 9 at 12:01:26 bridges Julie's first session and the merged one: one session of 36
    [
        ("-D", "12:00:26", "12:01:26", 5),
        ("-D", "12:02:26", "12:05:19", 22),
        ("+I", "12:00:26", "12:05:19", 36),
    ],
    [("-D", "12:06:39", "12:07:39", 3), ("+I", "12:06:39", "12:08:26", 11)],
    [("-D", "12:06:39", "12:08:26", 11), ("+I", "12:06:39", "12:08:46", 12)],
]
DAY = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)


def _at(clock: str) -> dt.datetime:
    h, m, *s = (int(p) for p in clock.split(":"))
    return DAY.replace(hour=h, minute=m, second=s[0] if s else 0)


def _clock(value: dt.datetime) -> str:
    return value.strftime("%H:%M:%S").removesuffix(":00") if value.second == 0 else value.strftime("%H:%M:%S")


@pytest.fixture(scope="module", params=["driver", "spark"])
def batches(spark, tmp_path_factory, request) -> dict[str, list[list[tuple]]]:
    """Every view's changelog rows, per batch, after each score's commit and refresh: every batch on the driver,
    or every batch in Spark (`driver_max_changes = 0`: the EMIT policies' held rows never collected)."""
    root: Path = tmp_path_factory.mktemp("seed002")
    (root / "views").mkdir()
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "views.sql").write_text(VIEWS)
    if request.param == "spark":
        (root / "conf").mkdir()
        (root / "conf" / "mvengine.toml").write_text("[refresh]\ndriver_max_changes = 0\n")
    config = load_config(root)
    catalog = load_catalog(config)
    reports = []
    refresher = Refresher(spark, config, catalog, report=reports.append)
    source = TableRef(catalog.sources["user_scores"].path)
    refresher.refresh()  # the views start empty
    for name, score, clock in SCORES:
        write_deltalake(source.uri, _score_row(name, score, _at(clock)), mode="append")
        refresher.refresh()
    assert {r.engine for r in reports} == {request.param}
    found: dict[str, list[list[tuple]]] = {}
    for view in catalog.plans:
        log = read_arrow(view_tables(catalog.plans[view], {}).changelog).to_pylist()
        per_batch: list[list[tuple]] = [[] for _ in SCORES]
        for row in log:
            if row["_batch_id"] == 0:
                continue
            if view == "sessions":
                shown = (row["_op"], _clock(row["session_start"]), _clock(row["session_end"]), row["total"])
            else:
                shown = (row["_op"], _clock(row["window_end"]), row["total"], row["_emit_timing"])
            per_batch[row["_batch_id"] - 1].append(shown)
        found[view] = [sorted(b, key=_order) for b in per_batch]
    return found


def _order(row: tuple) -> tuple:
    return ({"-D": 0, "-U": 0, "+U": 1, "+I": 1}[row[0]], row[1:])


def _score_row(name: str, score: int, ts: dt.datetime):
    import pyarrow as pa

    return pa.table(
        {
            "name": pa.array([name], pa.string()),
            "team": pa.array(["TeamX"], pa.string()),
            "score": pa.array([score], pa.int32()),
            "ts": pa.array([ts], pa.timestamp("us", tz="UTC")),
        }
    )


def _strip_team(expected: list[list[tuple]]) -> list[list[tuple]]:
    return [sorted(b, key=_order) for b in expected]


def test_per_record_windowed_sums_are_early_then_late(batches):
    assert batches["per_record"] == _strip_team(PER_RECORD)


def test_the_watermark_trigger_emits_each_window_once_on_time(batches):
    assert batches["on_time"] == _strip_team(ON_TIME)


def test_late_firings_update_the_on_time_row(batches):
    assert batches["on_time_and_late"] == _strip_team(ON_TIME_AND_LATE)


def test_session_windows_merge_with_retractions(batches):
    assert batches["sessions"] == _strip_team(SESSIONS)
