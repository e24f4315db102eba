"""What a batch reads stays bounded on a stream with no end (issue 38's state-size tests). Interval joins, window
joins and temporal filters keep no state of their own: a batch reads the inputs as they were before it only at
the times its changes can meet (or the clock passed). Over a long stream of appends, computed on the driver, the
input rows each batch reads (BatchReport.rows_read) stay below a constant set by the rate and the bound, while
the streams grow past it many times; a regular join over the same streams reads more and more (the measure sees
growth). A GROUP BY with a state_ttl, whose keys are new every batch, keeps state rows below a constant set by
the rate and the TTL. At the end every view equals its SQL (the TTL view: over the keys touched within it). The
clock moves a second a batch (tests/conftest.py RefreshClock), as the streams' event times do."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.project.layout import view_tables
from mvengine.reading.describe import state_rows
from mvengine.runtime.batch_report import BatchReport
from mvengine.runtime.refresh import Refresher
from mvengine.storage.api import read_arrow, write_table
from mvengine.storage.tables import TableRef
from tests.spark.test_refresh_differential import check_view

SOURCES = """
CREATE TABLE clicks (id INT NOT NULL, u INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('append_only' = 'true');
CREATE TABLE shows (id INT NOT NULL, u INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH ('append_only' = 'true');
"""
VIEWS = """
CREATE MATERIALIZED VIEW interval_join AS
SELECT c.id AS click, s.id AS shown FROM clicks c JOIN shows s
ON c.u = s.u AND c.ts BETWEEN s.ts AND s.ts + INTERVAL '2' SECOND;
CREATE MATERIALIZED VIEW window_join AS
SELECT c.id AS click, s.id AS shown, c.window_start
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '2' SECOND)) c
JOIN TABLE(TUMBLE(TABLE shows, DESCRIPTOR(ts), INTERVAL '2' SECOND)) s
ON c.u = s.u AND c.window_start = s.window_start AND c.window_end = s.window_end;
CREATE MATERIALIZED VIEW recent_clicks AS
SELECT u, COUNT(*) AS n FROM clicks WHERE ts > NOW() - INTERVAL '2' SECOND GROUP BY u;
CREATE MATERIALIZED VIEW every_pair AS
SELECT c.id AS click, s.id AS shown FROM clicks c JOIN shows s ON c.u = s.u;
CREATE MATERIALIZED VIEW active_times WITH ('state_ttl' = '3 seconds') AS
SELECT ts, COUNT(*) AS n FROM clicks GROUP BY ts;
CREATE MATERIALIZED VIEW first_clicks WITH ('state_ttl' = '3 seconds') AS
SELECT ts, id FROM (SELECT ts, id, ROW_NUMBER() OVER (PARTITION BY ts ORDER BY id) AS rn FROM clicks) WHERE rn = 1;
"""
BOUNDED = ("interval_join", "window_join", "recent_clicks")
PER_BATCH = 10  # rows of each stream per batch, one second of event time
USERS = 3
# The batches of the stream: 100+ nightly (make test-nightly), fewer in the default run; either way the streams
# end at least four times larger than READ_BOUND.
BATCHES = 120 if os.environ.get("HYPOTHESIS_PROFILE") == "nightly" else 20
# Rows a batch may read: the other stream's rows of the two to three seconds around the batch's times (a
# window join: the two 2-second windows its rows fall in), with room to spare: over 20 batches the joins read at
# most 20 rows a batch, the temporal filter 11 (the streams are regular: later batches read as many).
READ_BOUND = 50
# State rows of the TTL views: per key, the GROUP BY's accumulators and changelog revision, the top-N's row,
# count and revision; and a bound on them for the keys touched in the last three to four batches (ten new keys
# a batch), with room to spare.
STATE_BOUNDS = {"active_times": (2, 100), "first_clicks": (3, 150)}


def test_a_long_stream_reads_a_bounded_number_of_rows_per_batch(spark, tmp_path, clock):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "sources.sql").write_text(SOURCES)
    (tmp_path / "views" / "views.sql").write_text(VIEWS)
    catalog = load_catalog(load_config(tmp_path))
    reports: list[BatchReport] = []
    refresher = Refresher(spark, load_config(tmp_path), catalog, report=reports.append)
    refresher.refresh()
    start = clock.START  # (event times near the clock NOW() reads)
    kept: dict[str, list[int]] = {name: [] for name in STATE_BOUNDS}
    for batch in range(BATCHES):
        clock.now += 1_000_000
        for stream in ("clicks", "shows"):
            first = batch * PER_BATCH
            rows = pa.table(
                {
                    "id": pa.array(range(first, first + PER_BATCH), pa.int32()),
                    "u": pa.array([(first + i) % USERS for i in range(PER_BATCH)], pa.int32()),
                    "ts": [start + dt.timedelta(seconds=batch + i / PER_BATCH) for i in range(PER_BATCH)],
                },
                schema=catalog.sources[stream].schema,
            )
            write_table(rows, TableRef(catalog.sources[stream].path))
        refresher.refresh()
        for name, rows_kept in kept.items():
            rows_kept.append(state_rows(view_tables(catalog.plans[name], {}).state, {}))
    streams = [r for r in reports if r.kind == "stream"]
    late = {v: [r for r in streams if r.view == v][-BATCHES // 2 :] for v in (*BOUNDED, "every_pair")}
    for view in BOUNDED:
        assert len(late[view]) == BATCHES // 2 and {r.engine for r in late[view]} == {"driver"}, late[view]
        most = max(r.rows_read or 0 for r in late[view])
        assert most <= READ_BOUND, f"{view} read {most} input rows in one batch"
    assert BATCHES * PER_BATCH >= 4 * READ_BOUND  # each stream: reading it whole would break the bound
    # A regular join reads every row of the users its changes carry: all of them, more with every batch.
    grown = [r.rows_read for r in late["every_pair"]]
    assert grown[-1] is not None and grown[-1] > 2 * READ_BOUND and grown[-1] > grown[0], grown
    # The TTL views' keys are new every batch: their state holds those of the last few batches.
    for name, (per_key, bound) in STATE_BOUNDS.items():
        assert max(kept[name][BATCHES // 2 :]) <= bound, (name, kept[name])
        assert BATCHES * PER_BATCH * per_key >= 4 * bound  # keeping every key would break the bound
        assert sum(r.expired for r in streams if r.view == name) >= BATCHES * PER_BATCH // 2
    # ...and hold the keys touched within their TTL: the clicks of the last three batches (a key touched at
    # clock c leaves once the clock reaches c + 3 s), each counted once.
    last = [
        start + dt.timedelta(seconds=b + i / PER_BATCH)
        for b in range(BATCHES - 3, BATCHES)
        for i in range(10)
    ]
    snapshot = read_arrow(view_tables(catalog.plans["active_times"], {}).snapshot).sort_by("ts")
    assert snapshot.column("ts").to_pylist() == last and set(snapshot.column("n").to_pylist()) == {1}
    snapshot = read_arrow(view_tables(catalog.plans["first_clicks"], {}).snapshot).sort_by("ts")
    assert snapshot.column("ts").to_pylist() == last
    assert snapshot.column("id").to_pylist() == list(range((BATCHES - 3) * PER_BATCH, BATCHES * PER_BATCH))
    for name in catalog.plans:
        if name not in STATE_BOUNDS:
            check_view(spark, catalog, name)
