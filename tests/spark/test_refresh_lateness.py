"""Allowed lateness (seed 001's bounded state): a row later than the lateness behind the watermark is not applied
but kept in the view's `late` table; windows past it are dropped from the view's state, so `mv plan` calls the
state bounded and `require_bounded_state` accepts the view. On the driver and in Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
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
from tests.conftest import add_scores

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


def _project(root: Path, views: str = VIEW, conf: str = "[plan]\nrequire_bounded_state = true\n") -> Path:
    (root / "views").mkdir()
    (root / "conf").mkdir()
    (root / "views" / "sources.sql").write_text(SOURCES)
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
