"""Interval and window joins, differentially: a join whose ON condition bounds the difference of the two sides'
event times, or equates their windows' bounds (plan/time_bounds.py), reads each side before a batch only within
the times the other side's changes can meet; an outer one pads the rows that meet none (counted row by row).
After random inserts, updates (moving a row's time or user) and deletes on both sides, with NULL and
out-of-order times, every view equals its SQL run from scratch over the sources at the versions it records; on
the driver and in Spark by turns."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.storage.api import merge_into
from mvengine.storage.tables import TableRef
from tests.conftest import examples, phases_of_costly
from tests.spark import test_refresh_differential as differential
from tests.spark.test_refresh_differential import refresh_steps, source_rows

SOURCES = """
CREATE TABLE clicks (id INT NOT NULL, u STRING, ts TIMESTAMP,
                     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE shows (id INT NOT NULL, u STRING, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED);
"""
VIEWS = """
CREATE MATERIALIZED VIEW ij_between AS
SELECT c.id AS click, s.id AS shown, c.ts FROM clicks c JOIN shows s
ON c.u = s.u AND c.ts BETWEEN s.ts - INTERVAL '5' SECOND AND s.ts + INTERVAL '2' SECOND;
-- strict comparisons, written the other way round, the bound's columns not in the output
CREATE MATERIALIZED VIEW ij_strict AS
SELECT s.u, c.id AS click FROM shows s, clicks c
WHERE s.u = c.u AND s.ts < c.ts + INTERVAL '3' SECOND AND c.ts - INTERVAL '1' SECOND < s.ts;
-- an aggregate over an interval join
CREATE MATERIALIZED VIEW ij_counts AS
SELECT c.u, COUNT(*) AS n, MAX(s.ts) AS last_shown FROM clicks c JOIN shows s
ON c.u = s.u AND s.ts BETWEEN c.ts - INTERVAL '10' SECOND AND c.ts GROUP BY c.u;
-- outer interval joins: a click with no show of its user in the 5 seconds before it, padded (the padding comes
-- and goes as shows arrive, move and leave); every row of both sides
CREATE MATERIALIZED VIEW ij_left AS
SELECT c.id AS click, c.u, s.id AS shown FROM clicks c LEFT JOIN shows s
ON c.u = s.u AND s.ts BETWEEN c.ts - INTERVAL '5' SECOND AND c.ts;
CREATE MATERIALIZED VIEW ij_full AS
SELECT c.id AS click, s.id AS shown, s.ts FROM shows s FULL JOIN clicks c
ON s.u = c.u AND c.ts > s.ts AND c.ts < s.ts + INTERVAL '3' SECOND;
-- an outer join whose condition compares the two sides other than by time (no bound: read by key)
CREATE MATERIALIZED VIEW oj_ids AS
SELECT s.id AS shown, c.id AS click FROM clicks c RIGHT JOIN shows s ON c.u = s.u AND c.id < s.id;
-- window joins: the rows of one user and one 10-second window (equal window bounds bound the two times)
CREATE MATERIALIZED VIEW wj_rows AS
SELECT c.id AS click, s.id AS shown, c.window_start
FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) c
JOIN TABLE(TUMBLE(TABLE shows, DESCRIPTOR(ts), INTERVAL '10' SECOND)) s
ON c.u = s.u AND c.window_start = s.window_start AND c.window_end = s.window_end;
-- ... and of two hopping windowed aggregates, by their ends (each input maintained as a view of its own)
CREATE MATERIALIZED VIEW wj_counts AS
SELECT c.u, c.window_end, c.n AS clicks, s.n AS shows
FROM (SELECT u, window_end, COUNT(*) AS n
      FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
      GROUP BY u, window_start, window_end) c
JOIN (SELECT u, window_end, COUNT(*) AS n
      FROM TABLE(HOP(TABLE shows, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
      GROUP BY u, window_start, window_end) s
ON c.u = s.u AND c.window_end = s.window_end;
"""
BASE = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)
TIMES = st.one_of(
    st.none(),
    st.integers(0, 40).map(lambda s: BASE + dt.timedelta(seconds=s)),
    st.integers(0, 40_000).map(lambda ms: BASE + dt.timedelta(milliseconds=ms)),
)
ROW = st.tuples(st.integers(0, 8), st.sampled_from(["a", "b", None]), TIMES)
COMMIT = st.one_of(
    st.tuples(st.sampled_from(["upsert clicks", "upsert shows"]), st.lists(ROW, min_size=1, max_size=5)),
    st.tuples(
        st.sampled_from(["delete clicks", "delete shows"]),
        st.lists(st.integers(0, 8), min_size=1, max_size=3),
    ),
)
STEPS = st.lists(st.lists(COMMIT, min_size=1, max_size=3), min_size=2, max_size=3)


def make_project(root: Path) -> Path:
    return differential.make_project(root, VIEWS, SOURCES)


def apply(spark, catalog, commit) -> None:
    """An upsert of rows (tuples, `id` first) or a delete of ids, in a source keyed by `id`."""
    kind, payload = commit
    verb, name = kind.split()
    source = catalog.sources[name]
    if verb == "upsert":
        latest = {row[0]: row for row in payload}
        merge_into(source_rows(source.schema, latest.values()), TableRef(source.path), ["id"])
    else:
        rows = [(i, *[None] * (len(source.schema) - 1), True) for i in sorted(set(payload))]
        gone = source.schema.append(pa.field("gone", pa.bool_()))
        merge_into(source_rows(gone, rows), TableRef(source.path), ["id"], delete_column="gone")


def _at(seconds: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=seconds)


@settings(  # generated examples too in make test-nightly (each example refreshes eight views a few times)
    max_examples=examples(1),
    deadline=None,
    phases=phases_of_costly(),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
# Always run: pairs at both ends of the range and just outside it, NULL times and users, a row moved out of
# its partner's range and back, rows deleted on both sides in one batch, and a batch on one side only.
@example(
    steps=[
        [
            ("upsert shows", [(1, "a", _at(10)), (2, "a", _at(20)), (3, None, _at(10)), (4, "a", None)]),
            ("upsert clicks", [(1, "a", _at(5)), (2, "a", _at(12)), (3, "a", _at(4.999)), (4, "b", _at(10))]),
        ],
        [("upsert clicks", [(5, "a", _at(15)), (2, "a", _at(30))]), ("upsert shows", [(5, "b", _at(9))])],
        [("delete shows", [1]), ("delete clicks", [5]), ("upsert shows", [(2, "a", _at(12))])],
    ]
)
# Always run too: batches of one side only that bring a second match to a row that had one (no flip), take one
# of its two (no flip), then its last (padded again); a click moved out of range and back.
@example(
    steps=[
        [("upsert shows", [(1, "a", _at(10))]), ("upsert clicks", [(1, "a", _at(12)), (2, "a", _at(30))])],
        [("upsert shows", [(2, "a", _at(11))])],
        [("delete shows", [1])],
        [("upsert shows", [(2, "a", _at(40))])],
        [("upsert clicks", [(1, "a", _at(39))]), ("upsert shows", [(3, "b", _at(29))])],
    ]
)
def test_interval_joins_equal_their_sql_after_random_changes(spark, tmp_path_factory, steps):
    ran = refresh_steps(
        spark, make_project(tmp_path_factory.mktemp("interval")), steps, all_incremental=True, apply=apply
    )
    assert {"stream/driver", "stream/spark"} <= set().union(*ran.values())


def test_an_interval_join_is_planned_as_reading_each_side_by_time(tmp_path):
    plans = load_catalog(load_config(make_project(tmp_path))).plans
    assert "interval join" in plans["ij_between"].state
    assert "interval join" in plans["ij_strict"].state
    assert (
        "left interval join (`c`.`ts` - `s`.`ts` BETWEEN 0 AND INTERVAL '5' SECOND)" in plans["ij_left"].state
    )
    assert "full interval join" in plans["ij_full"].state and plans["ij_full"].bounded_state
    assert {plans[v].strategy for v in ("ij_left", "ij_full", "oj_ids")} == {"incremental"}
    assert plans["ij_between"].bounded_state
    assert "window join (`c`.`window_start` = `s`.`window_start`)" in plans["wj_rows"].state
    assert "window join (`c`.`window_end` = `s`.`window_end`)" in plans["wj_counts"].state
