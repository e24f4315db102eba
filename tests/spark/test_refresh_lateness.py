"""Allowed lateness (seed 001's bounded state): a row later than the lateness behind the watermark is not applied
but kept in the view's `late` table; windows past it are dropped from the view's state, so `mv plan` calls the
state bounded and `require_bounded_state` accepts the view. On the driver and in Spark."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from mvengine.config import load_config
from mvengine.errors import SqlError
from mvengine.incremental.exact_sum import arrow_udf
from mvengine.project.catalog import load_catalog
from mvengine.reading.describe import describe
from mvengine.reading.versions import Versions
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_arrow
from mvengine.storage.row_json import rows_json
from mvengine.storage.tables import TableRef
from tests.conftest import SCORES_DAY, add_scores, examples, phases_of_costly
from tests.spark.test_refresh_interval_joins import apply as apply_rows

SOURCES = """
CREATE TABLE scores (team STRING, score INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)
WITH ('append_only' = 'true');
"""
VIEW = """
CREATE MATERIALIZED VIEW per_minute WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, window.end AS window_end, SUM(score) AS total, MAX(score) AS top
FROM scores GROUP BY team, window(ts, '1 minute');

-- a view of the view follows its watermark (recorded in each of per_minute's snapshot commits)
CREATE MATERIALIZED VIEW big_minutes AS SELECT window_end, total FROM per_minute WHERE total > 1;
"""


def _project(
    root: Path,
    views: str = VIEW,
    conf: str = "[plan]\nrequire_bounded_state = true\n",
    sources: str = SOURCES,
) -> Path:
    (root / "views").mkdir()
    (root / "conf").mkdir()
    (root / "views" / "sources.sql").write_text(sources)
    (root / "views" / "views.sql").write_text(views)
    (root / "conf" / "mvengine.toml").write_text(conf)
    return root


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_rows_later_than_the_lateness_are_kept_aside_and_old_windows_leave_state(spark, tmp_path, engine):
    conf = "[plan]\nrequire_bounded_state = true\n" + (
        "" if engine == "driver" else "[refresh]\ndriver_max_changes = 0\n"
    )
    config = load_config(_project(tmp_path, conf=conf))
    catalog = load_catalog(config)  # require_bounded_state accepts it
    plan = catalog.plans["per_minute"]
    assert plan.bounded_state and "dropped once the watermark is past" in plan.state
    reports = []
    refresher = Refresher(spark, config, catalog, report=reports.append)
    refresher.refresh()
    add_scores(catalog, [("x", 1, 10), ("x", 2, 150)])  # the watermark reaches 12:02:20
    refresher.refresh()
    add_scores(
        catalog, [("x", 4, 100), ("x", 8, 115), ("x", 16, 30)]
    )  # before 12:01:50: 4 and 16 are too late
    reports.clear()
    refresher.refresh()
    assert {r.engine for r in reports if r.view == "per_minute"} == {engine}
    tables = view_tables(plan, {})
    snapshot = sorted(
        (r["window_end"].strftime("%H:%M"), r["total"], r["top"])
        for r in read_arrow(tables.snapshot).to_pylist()
    )
    assert snapshot == [("12:01", 1, 1), ("12:02", 8, 8), ("12:03", 2, 2)]
    late = read_arrow(tables.late).to_pylist()
    assert sorted(
        (
            r["row"],  # the same text from both engines (lateness.rows_json)
            r["event_time"].strftime("%H:%M:%S"),
            r["_w"],
            r["watermark"].strftime("%H:%M:%S"),
            r["batch_id"],
        )
        for r in late
    ) == [
        ('{"team":"x","score":16,"ts":"2026-11-23T12:00:30Z"}', "12:00:30", 1, "12:02:20", 2),
        ('{"team":"x","score":4,"ts":"2026-11-23T12:01:40Z"}', "12:01:40", 1, "12:02:20", 2),
    ]
    assert json.loads(late[0]["inputs"]) == {"scores": 2}
    # The 12:00-12:01 window ended before 12:01:50: its accumulators and key revisions are gone from state.
    for name in ("n1_acc", "emit"):
        kept = read_arrow(TableRef(f"{tables.state}/{name}")).to_pylist()
        ends = sorted(r.get("end", r.get("window_end")).strftime("%H:%M") for r in kept)
        assert "12:01" not in ends and "12:02" in ends, (name, ends)
    described = {v: describe(Versions(config, catalog), v) for v in ("per_minute", "big_minutes")}
    assert described["per_minute"]["late_rows"] == 2
    assert (
        described["per_minute"]["watermark"] == described["big_minutes"]["watermark"] == "2026-11-23 12:02:20"
    )


def test_lateness_needs_a_window_an_aggregate_groups_by(tmp_path):
    views = """CREATE MATERIALIZED VIEW v WITH ('allowed_lateness' = '1 minute') AS
               SELECT team, score FROM scores;"""
    with pytest.raises(SqlError, match="allowed_lateness is for views that group by an event-time window"):
        load_catalog(load_config(_project(tmp_path, views, conf="")))


def test_a_windowed_view_without_lateness_has_unbounded_state(tmp_path):
    views = VIEW.replace(" WITH ('allowed_lateness' = '30 seconds')", "")
    with pytest.raises(SqlError, match="state"):
        load_catalog(load_config(_project(tmp_path, views)))


def test_a_late_row_reads_the_same_from_both_engines_whatever_its_types(spark):
    """Spark runs `rows_json` as an Arrow UDF over its rows; the driver over the rows as delta-rs reads them."""
    rows = spark.sql(
        """SELECT s, d, m, day, ts, ntz, b, l, kv, IF(a IS NULL, NULL, named_struct('a', a, 'b', sb)) AS st, big
        FROM VALUES
        ('x', CAST('NaN' AS DOUBLE), CAST(1.5 AS DECIMAL(10, 2)), DATE'2026-11-23',
         TIMESTAMP'2026-11-23 12:01:40.5', TIMESTAMP_NTZ'2026-11-23 12:01:40', X'CAFE',
         array(1, NULL), map('k', 2), CAST('-Infinity' AS DOUBLE), 'é"', 9007199254740993L),
        (NULL, 1e20, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, CAST(NULL AS BIGINT))
        AS t(s, d, m, day, ts, ntz, b, l, kv, a, sb, big)"""
    )
    in_spark = [r[0] for r in rows.select(arrow_udf(rows_json, "string")(F.struct(*rows.columns))).collect()]
    table = rows.toArrow()
    on_driver = rows_json(
        pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], names=table.column_names)
    ).to_pylist()
    assert (
        in_spark
        == on_driver
        == [
            '{"s":"x","d":"NaN","m":1.50,"day":"2026-11-23","ts":"2026-11-23T12:01:40.500000Z",'
            '"ntz":"2026-11-23T12:01:40","b":"yv4=","l":[1,null],"kv":{"k":2},"st":{"a":"-Infinity","b":"é\\""},"big":9007199254740993}',
            '{"s":null,"d":1e+20,"m":null,"day":null,"ts":null,"ntz":null,"b":null,"l":null,"kv":null,"st":null,"big":null}',
        ]
    )


SESSION_VIEW = """
CREATE MATERIALIZED VIEW visits WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, session_window.start AS s, session_window.end AS e, COUNT(*) AS n, SUM(score) AS total
FROM scores GROUP BY team, session_window(ts, '20 seconds');
"""
# Each batch's scores (team, score, seconds after 12:00). The watermark is the latest time less 10 s; a batch's
# rows before the watermark recorded before it less 30 s are late. A row is held with its session's end plus the
# gap, written again only when its session's end passes that.
SESSION_BATCHES = [
    [("x", 1, 0), ("x", 2, 10), ("x", 4, 40), ("x", 8, 55), ("x", 16, 70), ("y", 1, 5)],  # watermark 60
    [("x", 32, 85), ("z", 1, 130)],  # cutoff 30: y's [5, 25) and x's [0, 30) end before it, held to 45 and 50
    # cutoff 90: y's [5, 25) and x's [0, 30) leave state; 26 and 6 are late; 100 joins [40, 105), whose first
    # rows are before the cutoff and stay with it
    [("x", 64, 100), ("x", 128, 26), ("y", 2, 6), ("z", 2, 160)],
    [("x", 256, 120)],  # cutoff 120: x's [40, 120) ends at it: 120 joins it
    [("z", 4, 300)],
    [("z", 8, 301)],  # cutoff 260: every session but z's last has left state
]


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_session_windows_rows_leave_state_once_the_watermark_passes_their_session(spark, tmp_path, engine):
    """Its state keeps each row with its session's end (plus the gap, written again only when the end passes
    that), and drops the rows held to before the late cutoff: a session open across it keeps all its rows."""
    plan, tables, states = _refreshed(spark, tmp_path, SESSION_VIEW, "visits", engine, SESSION_BATCHES)
    assert plan.bounded_state and "each with its session's end" in plan.state
    held = [sorted(r["_c2"].second + 60 * r["_c2"].minute for r in rows) for rows in states]
    assert held == [
        [0, 5, 10, 40, 55, 70],
        [0, 5, 10, 40, 55, 70, 85, 130],
        [40, 55, 70, 85, 100, 130, 160],
        [40, 55, 70, 85, 100, 120, 130, 160],
        [40, 55, 70, 85, 100, 120, 130, 160, 300],
        [300, 301],
    ]

    def second(t):
        return int((t - SCORES_DAY).total_seconds())

    snapshot = sorted(
        (r["team"], second(r["s"]), second(r["e"]), r["n"], r["total"])
        for r in read_arrow(tables.snapshot).to_pylist()
    )
    assert snapshot == [
        ("x", 0, 30, 2, 3),
        ("x", 40, 140, 6, 4 + 8 + 16 + 32 + 64 + 256),
        ("y", 5, 25, 1, 1),
        ("z", 130, 150, 1, 1),
        ("z", 160, 180, 1, 2),
        ("z", 300, 321, 2, 12),
    ]
    late = sorted(json.loads(r["row"])["score"] for r in read_arrow(tables.late).to_pylist())
    assert late == [2, 128]
    revised = [second(r["e"]) for r in read_arrow(TableRef(f"{tables.state}/emit")).to_pylist()]
    assert all(end >= 260 for end in revised), revised


PLAYS = """
CREATE TABLE plays (id INT NOT NULL, team STRING, score INT, ts TIMESTAMP,
                    WATERMARK FOR ts AS ts - INTERVAL '10' SECOND, PRIMARY KEY (id) NOT ENFORCED);
"""
PLAY_SESSIONS = """
CREATE MATERIALIZED VIEW play_sessions WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, session_window.start AS s, session_window.end AS e, COUNT(*) AS n, SUM(score) AS total
FROM plays GROUP BY team, session_window(ts, '20 seconds');
"""
PLAY_SESSIONS_SQL = """SELECT team, unix_micros(session_window.start), unix_micros(session_window.end), COUNT(*),
       SUM(score) FROM plays_on_time GROUP BY team, session_window(ts, '20 seconds')"""
# A batch: how far its time moves on (s), then upserts (id, team, score, seconds before that time, or None: no
# time) and deletes (id, None, None, None) of the source `plays`.
PLAY = st.one_of(
    st.tuples(
        st.integers(1, 12),
        st.sampled_from(["a", "b", None]),
        st.integers(-3, 50),
        st.one_of(st.none(), st.integers(0, 70)),
    ),
    st.tuples(st.integers(1, 12), st.none(), st.none(), st.none()),
)
# Generated examples too in make test-nightly (each example refreshes a few times).
COSTLY = settings(
    max_examples=examples(1),
    deadline=None,
    phases=phases_of_costly(),
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


def batches_of(changes: st.SearchStrategy) -> st.SearchStrategy:
    """Three to six batches: how far time moves on (s), then one to six changes."""
    return st.lists(
        st.tuples(st.integers(0, 40), st.lists(changes, min_size=1, max_size=6)), min_size=3, max_size=6
    )


PLAY_STEPS = batches_of(PLAY)


@pytest.mark.parametrize("engine", ["driver", "spark"])
@COSTLY
@given(steps=PLAY_STEPS)
# Always run: a session open across the cutoff taking an on-time row, a row updated from on time to late and
# one deleted late (both still counted), a late row that would bridge two closed sessions, NULL times and teams,
# a row without a time deleted after it left state beside one inserted (delta-rs's MERGE of the two failed).
@example(
    steps=[
        (60, [(1, "a", 1, 60), (2, "a", 2, 45), (3, "a", 4, 30), (4, "a", 8, 15), (5, None, 16, 0)]),
        (40, [(6, "a", 32, 20), (7, "b", 64, None), (8, "b", 1, 0)]),
        (30, [(9, "a", 2, 10), (3, None, None, None), (4, "a", 9, 95), (10, "a", 5, 85)]),
        (
            40,
            [
                (11, "b", 3, 0),
                (1, None, None, None),
                (12, None, 7, 35),
                (7, None, None, None),
                (13, "b", 5, None),
            ],
        ),
    ]
)
def test_a_session_window_with_lateness_equals_its_sql_over_the_rows_on_time(
    spark, tmp_path_factory, engine, steps
):
    """After random upserts and deletes, the view equals its SQL over the source's rows less the changes it set
    aside as late (their inserts taken out, their deletes put back): every other change was applied, though the
    rows of closed sessions left state."""
    conf = "[plan]\nrequire_bounded_state = true\n" + (
        "" if engine == "driver" else "[refresh]\ndriver_max_changes = 0\n"
    )
    root = tmp_path_factory.mktemp("plays")
    config = load_config(_project(root, views=PLAY_SESSIONS, conf=conf, sources=PLAYS))
    catalog = load_catalog(config)
    refresher = Refresher(spark, config, catalog, report=(reports := []).append)
    refresher.refresh()  # (the source made, empty)
    now = SCORES_DAY
    for advance, plays in steps:
        now += dt.timedelta(seconds=advance)
        upserts = [
            (i, team, score, None if ago is None else now - dt.timedelta(seconds=ago))
            for i, team, score, ago in plays
            if score is not None
        ]
        deletes = [i for i, _, score, _ in plays if score is None]
        if upserts:
            apply_rows(spark, catalog, ("upsert plays", upserts))
        if deletes:
            apply_rows(spark, catalog, ("delete plays", deletes))
        refresher.refresh()
    assert {r.engine for r in reports[1:] if r.view == "play_sessions" and r.rows_in} == {engine}
    tables = view_tables(catalog.plans["play_sessions"], {})
    _assert_on_time(spark, catalog, tables, "plays", PLAY_SESSIONS_SQL)


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


LAST_SCORES = """
CREATE MATERIALIZED VIEW last_scores WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, ts, score,
       SUM(score) OVER (PARTITION BY team ORDER BY ts, score ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS last3,
       LAG(score) OVER (PARTITION BY team ORDER BY ts, score) AS prev
FROM scores;
"""
LAST_SCORES_SQL = """SELECT team, unix_micros(ts), score,
       SUM(score) OVER (PARTITION BY team ORDER BY ts, score ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),
       LAG(score) OVER (PARTITION BY team ORDER BY ts, score) FROM scores_on_time"""
# As SESSION_BATCHES: cutoffs -10, 20 (45 comes between rows it changes, 15 is late), 20, 80 (x's rows before 50
# leave state: two rows after each are before it), 80 (90 comes before 100: its frame reads 50 and 60), 80, 160.
OVER_BATCHES = [
    [("x", 1, 0), ("x", 2, 10), ("x", 4, 20), ("x", 8, 30), ("x", 16, 40), ("x", 32, 50)],
    [("x", 64, 60)],
    [("x", 128, 45), ("x", 256, 15)],
    [("y", 1, 120)],
    [("x", 512, 100)],
    [("x", 1024, 90)],
    [("y", 2, 200)],
    [("y", 4, 201)],
]


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_window_functions_reading_n_rows_back_keep_n_rows_before_the_late_cutoff(spark, tmp_path, engine):
    """ROWS BETWEEN 2 PRECEDING AND CURRENT ROW and LAG over rows ordered by event time: a row whose second row
    after is before the late cutoff is read by no row to come and leaves state; the last rows of a partition
    stay, however old. The view equals its SQL over the rows on time throughout."""
    plan, tables, states = _refreshed(
        spark,
        tmp_path,
        LAST_SCORES,
        "last_scores",
        engine,
        OVER_BATCHES,
        lambda catalog, tables: _assert_on_time(spark, catalog, tables, "scores", LAST_SCORES_SQL),
    )
    assert plan.bounded_state and "the time of the row 2 after it" in plan.state
    x = [
        sorted(int((r["ts"] - SCORES_DAY).total_seconds()) for r in rows if r["team"] == "x")
        for rows in states
    ]
    assert x == [
        [0, 10, 20, 30, 40, 50],
        [0, 10, 20, 30, 40, 50, 60],
        [0, 10, 20, 30, 40, 45, 50, 60],
        [0, 10, 20, 30, 40, 45, 50, 60],
        [50, 60, 100],
        [50, 60, 90, 100],
        [50, 60, 90, 100],
        [90, 100],
    ]
    late = [json.loads(r["row"])["score"] for r in read_arrow(tables.late).to_pylist()]
    assert late == [256]


RUNNING_TOTALS = """
CREATE MATERIALIZED VIEW running_totals WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, ts, score,
       SUM(score) OVER (PARTITION BY team ORDER BY ts, score) AS so_far,
       COUNT(*) OVER (PARTITION BY team ORDER BY ts, score ROWS UNBOUNDED PRECEDING) AS n,
       AVG(score) OVER (PARTITION BY team ORDER BY ts, score) AS mean,
       MIN(score) OVER (PARTITION BY team ORDER BY ts, score) AS least,
       ROW_NUMBER() OVER (PARTITION BY team ORDER BY ts, score) AS nth,
       RANK() OVER (PARTITION BY team ORDER BY ts, score) AS r,
       DENSE_RANK() OVER (PARTITION BY team ORDER BY ts, score) AS dr
FROM scores;
"""
RUNNING_ALL = """
CREATE MATERIALIZED VIEW running_all WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, ts, score, SUM(score) OVER (ORDER BY ts, score) AS so_far,
       ROW_NUMBER() OVER (ORDER BY ts, score) AS nth
FROM scores;
"""
RUNNING_ALL_SQL = """SELECT team, unix_micros(ts), score, SUM(score) OVER (ORDER BY ts, score),
       ROW_NUMBER() OVER (ORDER BY ts, score) FROM scores_on_time"""
RUNNING_TOTALS_SQL = """SELECT team, unix_micros(ts), score,
       SUM(score) OVER (PARTITION BY team ORDER BY ts, score),
       COUNT(*) OVER (PARTITION BY team ORDER BY ts, score ROWS UNBOUNDED PRECEDING),
       AVG(score) OVER (PARTITION BY team ORDER BY ts, score),
       MIN(score) OVER (PARTITION BY team ORDER BY ts, score),
       ROW_NUMBER() OVER (PARTITION BY team ORDER BY ts, score),
       RANK() OVER (PARTITION BY team ORDER BY ts, score),
       DENSE_RANK() OVER (PARTITION BY team ORDER BY ts, score) FROM scores_on_time"""


@pytest.mark.parametrize("engine", ["driver", "spark", "mixed"])
def test_running_windows_fold_the_rows_behind_the_late_cutoff_into_one_row(spark, tmp_path, engine):
    """Running sums, counts, averages, extremes and ranks over rows ordered by event time: a sweep (here
    whenever a state file is wholly behind the late cutoff) folds the rows behind it into their partition's one
    carry row, whether the batch touches the partition (x in the fifth batch) or not (x in the last); the rows
    since stay. The view equals its SQL over the rows on time throughout."""

    everyone = {}

    def both_equal_their_sql(catalog, tables):
        _assert_on_time(spark, catalog, tables, "scores", RUNNING_TOTALS_SQL)
        everyone["tables"] = view_tables(catalog.plans["running_all"], {})
        _assert_on_time(spark, catalog, everyone["tables"], "scores", RUNNING_ALL_SQL)

    plan, tables, states = _refreshed(
        spark,
        tmp_path,
        RUNNING_TOTALS + RUNNING_ALL,
        "running_totals",
        engine,
        OVER_BATCHES,
        both_equal_their_sql,
        fold_sweep_rows=1,  # (a sweep as soon as a state file is wholly behind the cutoff)
    )
    assert plan.bounded_state and "folded into one row of its windows' running values" in plan.state
    x = [
        sorted(int((r["ts"] - SCORES_DAY).total_seconds()) for r in rows if r["team"] == "x")
        for rows in states
    ]
    print("STATES", x)
    print(
        "CARRIES",
        [
            tuple(c.values())
            for c in read_arrow(TableRef(str(next(Path(tables.state).glob("n*_carry"))))).to_pylist()
        ]
        if list(Path(tables.state).glob("n*_carry"))
        else None,
    )
    assert x == [
        [0, 10, 20, 30, 40, 50],
        [0, 10, 20, 30, 40, 50, 60],  # (no file wholly behind the cutoff, 10, yet: no sweep)
        [0, 10, 20, 30, 40, 45, 50, 60],
        [0, 10, 20, 30, 40, 45, 50, 60],
        [100],
        [90, 100],
        [90, 100],
        [],
    ]
    carries = read_arrow(TableRef(str(next(Path(tables.state).glob("n*_carry"))))).to_pylist()
    # (per window: the sum, the count, an average's sum and count, the least, then the rows for ROW_NUMBER and
    # RANK, the peer groups for DENSE_RANK, all of the rows folded: all of x's, y's at 120)
    assert {tuple(c.values()) for c in carries} == {
        ("x", 1791, 10, 1791.0, 10, 1, 10, 10, 10),
        ("y", 1, 1, 1.0, 1, 1, 1, 1, 1),
    }
    # Without PARTITION BY every batch touches the one partition: it keeps the rows since the last cutoff, 160.
    state = Path(everyone["tables"].state)
    kept = read_arrow(TableRef(str(next(state.glob("n*_rows"))))).to_pylist()
    assert sorted(int((r["ts"] - SCORES_DAY).total_seconds()) for r in kept) == [200, 201]


def _refreshed(spark, root: Path, views: str, name: str, engine: str, batches, after_each=None, **policy):
    """View `name` of `views` (its state bounded, as `require_bounded_state` checks), refreshed on `engine` after
    each batch of scores is added; its plan, its tables, and the rows of its `n<i>_rows` state after each batch.
    `after_each(catalog, tables)` checks more after each; `policy`, thresholds of the execution policy."""
    conf = "[plan]\nrequire_bounded_state = true\n" + _ENGINE_CONF[engine]
    config = load_config(_project(root, views=views, conf=conf))
    config = replace(config, policy=replace(config.policy, **policy))
    catalog = load_catalog(config)
    plan = catalog.plans[name]
    tables = view_tables(plan, {})
    refresher = Refresher(spark, config, catalog, report=(reports := []).append)
    refresher.refresh()  # (the source made, empty)
    states = []
    for rows in batches:
        add_scores(catalog, rows)
        refresher.refresh()
        states.append(read_arrow(TableRef(str(next(Path(tables.state).glob("n*_rows"))))).to_pylist())
        if after_each is not None:
            after_each(catalog, tables)
    used = {r.engine for r in reports[1:] if r.view == name and r.rows_in}
    assert used == ({"driver", "spark"} if engine == "mixed" else {engine})
    return plan, tables, states


# (mixed: batches of more than one row in Spark, the others on the driver, each reading what the other wrote)
_ENGINE_CONF = {
    "driver": "",
    "spark": "[refresh]\ndriver_max_changes = 0\n",
    "mixed": "[refresh]\ndriver_max_changes = 1\n",
}


SCORE_COLUMNS = "team STRING, score INT, ts TIMESTAMP"


def _assert_on_time(spark, catalog, tables, source: str, sql: str, columns: str = SCORE_COLUMNS) -> None:
    """The view's snapshot equals `sql` over `<source>_on_time`: the rows (`columns`, a Spark schema) of the
    source `source` less the changes the view set aside as late (their inserts taken out, their deletes put
    back). NaN equals NaN here, as Spark's own comparisons have it."""
    names = [c.split()[0] for c in columns.split(", ")]
    types = dict(c.split(" ", 1) for c in columns.split(", "))
    on_time = Counter(
        tuple(_same(r[n]) for n in names)
        for r in read_arrow(TableRef(catalog.sources[source].path)).to_pylist()
    )
    for r in read_arrow(tables.late).to_pylist() if tables.late.exists() else []:
        row = json.loads(r["row"], parse_float=Decimal)  # (DECIMAL exact; a DOUBLE made a float below)
        on_time[tuple(_same(_from_json(row[n], types[n])) for n in names)] -= r["_w"]
    assert all(n >= 0 for n in on_time.values()), on_time
    rows = [tuple(_NAN_BACK.get(v, v) for v in key) for key, n in on_time.items() for _ in range(n)]
    spark.createDataFrame(rows, columns).createOrReplaceTempView(f"{source}_on_time")
    expected = Counter(tuple(_same(v) for v in r) for r in spark.sql(sql).collect())
    micros = dt.timedelta(microseconds=1)
    got = Counter(
        tuple(_same((v - EPOCH) // micros if isinstance(v, dt.datetime) else v) for v in r.values())
        for r in read_arrow(tables.snapshot).to_pylist()
    )
    assert got == expected


_NAN = "NaN (a double)"  # a NaN compared by value: float('nan') equals only itself
_NAN_BACK = {_NAN: math.nan}


def _same(value):
    return _NAN if isinstance(value, float) and math.isnan(value) else value


def _from_json(value, sql_type: str):
    """A value of a late row's JSON (storage/row_json.py) as the source holds it."""
    if value is None:
        return None
    if sql_type == "TIMESTAMP":
        return dt.datetime.fromisoformat(value)
    if sql_type == "DOUBLE":
        return float(value)  # ("NaN", "Infinity", "-Infinity", or a number)
    return value


RUNNING_SCORES = """
CREATE MATERIALIZED VIEW running_scores WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, ts, score, SUM(score) OVER (PARTITION BY team ORDER BY ts, score) AS so_far,
       AVG(score) OVER (PARTITION BY team ORDER BY ts, score ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS before3
FROM scores;
"""
RUNNING_SCORES_SQL = """SELECT team, unix_micros(ts), score, SUM(score) OVER (PARTITION BY team ORDER BY ts, score),
       AVG(score) OVER (PARTITION BY team ORDER BY ts, score ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING)
       FROM scores_on_time"""
# A batch: how far its time moves on (s), then scores (team, score, seconds before that time, or None: no time).
SCORE = st.tuples(
    st.sampled_from(["a", "b", None]), st.integers(-3, 50), st.one_of(st.none(), st.integers(0, 70))
)
SCORE_STEPS = batches_of(SCORE)


@pytest.mark.parametrize("engine", ["driver", "spark"])
@COSTLY
@given(steps=SCORE_STEPS)
# Always run: rows out of order but on time among rows whose frames they enter, late ones, ties in time, rows
# without a time (applied before the first watermark, late after it), NULL teams.
@example(
    steps=[
        (60, [("a", 1, 60), ("a", 2, 45), ("a", 4, 30), ("b", 8, None), (None, 16, 0)]),
        (40, [("a", 32, 20), ("a", 5, 30), ("b", 64, None), ("a", 9, 0)]),
        (30, [("a", 2, 10), ("a", 3, 95), ("a", 7, 25), ("b", 1, 0)]),
        (40, [("a", 11, 0), ("a", 6, 35), (None, 7, 35), ("a", 12, 0)]),
    ]
)
def test_window_functions_with_lateness_equal_their_sql_over_the_rows_on_time(
    spark, tmp_path_factory, engine, steps
):
    """After random appends, in and out of order, each view equals its SQL over the rows it did not set aside as
    late: one whose windows read three rows back (its state bounded), one with running windows only (bounded:
    rows behind the cutoff fold into a carry), one with a running sum beside a frame that ends before the
    current row (unbounded)."""
    conf = "" if engine == "driver" else "[refresh]\ndriver_max_changes = 0\n"
    root = tmp_path_factory.mktemp("scores")
    config = load_config(_project(root, views=LAST_SCORES + RUNNING_TOTALS + RUNNING_SCORES, conf=conf))
    config = replace(config, policy=replace(config.policy, fold_sweep_rows=1))  # (sweeping whenever it can)
    catalog = load_catalog(config)
    assert catalog.plans["last_scores"].bounded_state and catalog.plans["running_totals"].bounded_state
    assert not catalog.plans["running_scores"].bounded_state
    refresher = Refresher(spark, config, catalog, report=(reports := []).append)
    refresher.refresh()  # (the source made, empty)
    now = 0
    for advance, scores in steps:
        now += advance
        add_scores(
            catalog, [(team, score, None if ago is None else now - ago) for team, score, ago in scores]
        )
        refresher.refresh()
    assert {r.engine for r in reports[2:] if r.rows_in} == {engine}
    for name, sql in (
        ("last_scores", LAST_SCORES_SQL),
        ("running_totals", RUNNING_TOTALS_SQL),
        ("running_scores", RUNNING_SCORES_SQL),
    ):
        _assert_on_time(spark, catalog, view_tables(catalog.plans[name], {}), "scores", sql)


READINGS = """
CREATE TABLE readings (team STRING, x DOUBLE, big BIGINT, money DECIMAL(12, 2), ts TIMESTAMP,
                       WATERMARK FOR ts AS ts - INTERVAL '10' SECOND)
WITH ('append_only' = 'true');
"""
READINGS_COLUMNS = "team STRING, x DOUBLE, big BIGINT, money DECIMAL(12,2), ts TIMESTAMP"
READING_VIEWS = """
CREATE MATERIALIZED VIEW reading_sessions WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, session_window.start AS s, session_window.end AS e, COUNT(*) AS n, SUM(big) AS bigs,
       MAX(money) AS money, MIN(big) AS least, COUNT(x) AS xn
FROM readings GROUP BY team, session_window(ts, '20 seconds');

CREATE MATERIALIZED VIEW last_readings WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, ts, big, x,
       SUM(big) OVER (PARTITION BY team ORDER BY ts, big ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS big3,
       LAG(x, 2) OVER (PARTITION BY team ORDER BY ts, big) AS x2,
       LAG(money) OVER (PARTITION BY team ORDER BY ts, big) AS prev_money
FROM readings;
"""
RUNNING_READINGS = """
CREATE MATERIALIZED VIEW running_readings WITH ('allowed_lateness' = '30 seconds') AS
SELECT team, ts, big, x,
       SUM(x) OVER (PARTITION BY team ORDER BY ts, big) AS xs,
       SUM(big) OVER (PARTITION BY team ORDER BY ts, big ROWS UNBOUNDED PRECEDING) AS bigs,
       AVG(big) OVER (PARTITION BY team ORDER BY ts, big) AS mean_big,
       COUNT(x) OVER (PARTITION BY team ORDER BY ts, big) AS xn,
       MAX(money) OVER (PARTITION BY team ORDER BY ts, big) AS top_money,
       DENSE_RANK() OVER (PARTITION BY team ORDER BY ts, big) AS dr
FROM readings;
"""
RUNNING_READINGS_SQL = """SELECT team, unix_micros(ts), big, x,
       SUM(x) OVER (PARTITION BY team ORDER BY ts, big),
       SUM(big) OVER (PARTITION BY team ORDER BY ts, big ROWS UNBOUNDED PRECEDING),
       AVG(big) OVER (PARTITION BY team ORDER BY ts, big),
       COUNT(x) OVER (PARTITION BY team ORDER BY ts, big),
       MAX(money) OVER (PARTITION BY team ORDER BY ts, big),
       DENSE_RANK() OVER (PARTITION BY team ORDER BY ts, big) FROM readings_on_time"""
READING_SESSIONS_SQL = """SELECT team, unix_micros(session_window.start), unix_micros(session_window.end),
       COUNT(*), SUM(big), MAX(money), MIN(big), COUNT(x)
       FROM readings_on_time GROUP BY team, session_window(ts, '20 seconds')"""
LAST_READINGS_SQL = """SELECT team, unix_micros(ts), big, x,
       SUM(big) OVER (PARTITION BY team ORDER BY ts, big ROWS BETWEEN 2 PRECEDING AND CURRENT ROW),
       LAG(x, 2) OVER (PARTITION BY team ORDER BY ts, big),
       LAG(money) OVER (PARTITION BY team ORDER BY ts, big) FROM readings_on_time"""
BIG = 2**53 + 1
MONEY = Decimal("9999999999.99")  # DECIMAL(12, 2)'s largest
# Each batch's readings (team, x, big, money, seconds after 12:00, or None: no time), as SESSION_BATCHES: the
# watermark is the latest time less 10 s, a row before it less 30 s is late. Late rows carry NaN, -inf, a BIGINT
# past 2^53 and the largest DECIMAL too; ties in time are ordered by big.
READING_BATCHES = [
    [
        ("x", 1.5, BIG, MONEY, 0),
        ("x", math.nan, -BIG - 2, Decimal("-0.01"), 10),
        ("x", math.inf, 2**58, None, 40),
        ("x", -0.0, 7, MONEY, 55),
        ("y", -math.inf, BIG, Decimal("0.10"), 5),
        ("y", None, None, None, None),
    ],
    [
        ("x", 0.1, 2**58, MONEY, 85),
        ("x", 1e16, -(2**58), Decimal("-9999999999.99"), 85),
        ("z", 2.0, 1, None, 130),
    ],
    [
        ("x", math.nan, BIG, MONEY, 100),
        ("x", -math.inf, 2**58, MONEY, 26),  # late
        ("y", math.nan, -BIG, Decimal("1.00"), 6),  # late
        ("z", math.inf, 3, Decimal("0.01"), 160),
    ],
    [  # cutoff 120: 120 is on time, 110 and the row without a time are late
        ("x", -1.0, BIG + 2, None, 120),
        ("y", math.nan, 0, MONEY, None),
        ("z", 0.0, 2**58, MONEY, 300),
        ("x", math.nan, 1, None, 110),
    ],
]


def _add_readings(catalog, rows) -> None:
    write_deltalake(
        TableRef(catalog.sources["readings"].path).uri,
        pa.table(
            {
                "team": pa.array([r[0] for r in rows], pa.string()),
                "x": pa.array([r[1] for r in rows], pa.float64()),
                "big": pa.array([r[2] for r in rows], pa.int64()),
                "money": pa.array([r[3] for r in rows], pa.decimal128(12, 2)),
                "ts": pa.array(
                    [None if r[4] is None else SCORES_DAY + dt.timedelta(seconds=r[4]) for r in rows],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        ),
        mode="append",
    )


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_lateness_over_the_values_real_tables_hold(spark, tmp_path, engine):
    """Sessions and window functions with a lateness over doubles with NaN, ±inf and -0.0, BIGINTs past 2^53 and
    DECIMALs at their limit, NULL among them, late rows among them: after each batch both views equal their SQL
    over the rows on time, and the late rows read back from their JSON as they were written. (The aggregates
    are the ones the driver computes: a session's DOUBLE aggregates and DECIMAL sums are Spark's, and the
    driver's refusal is what sends such a view there.)"""
    conf = "[plan]\nrequire_bounded_state = true\n" + (
        "" if engine == "driver" else "[refresh]\ndriver_max_changes = 0\n"
    )
    config = load_config(
        _project(tmp_path, views=READING_VIEWS + RUNNING_READINGS, conf=conf, sources=READINGS)
    )
    config = replace(config, policy=replace(config.policy, fold_sweep_rows=1))  # (the running view folds)
    catalog = load_catalog(config)
    refresher = Refresher(spark, config, catalog, report=(reports := []).append)
    refresher.refresh()  # (the source made, empty)
    for rows in READING_BATCHES:
        _add_readings(catalog, rows)
        refresher.refresh()
        for name, sql in (
            ("reading_sessions", READING_SESSIONS_SQL),
            ("last_readings", LAST_READINGS_SQL),
            ("running_readings", RUNNING_READINGS_SQL),
        ):
            tables = view_tables(catalog.plans[name], {})
            _assert_on_time(spark, catalog, tables, "readings", sql, READINGS_COLUMNS)
    assert {r.engine for r in reports[2:] if r.rows_in} == {engine}
    late = Counter(
        r["row"] for r in read_arrow(view_tables(catalog.plans["last_readings"], {}).late).to_pylist()
    )
    assert sum(late.values()) == 4, late
