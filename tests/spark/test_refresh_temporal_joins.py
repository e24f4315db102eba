"""Temporal joins, differentially: `JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur` joins each order
to the rate of its currency valid at the order's time (the latest rate at or before it). After random inserts,
updates (moving a rate's time, an order's currency) and deletes on both sides, with NULL times and currencies,
ties of two rates at one time, rates arriving after the orders of their time, NaN and ±inf rates and DECIMAL
amounts, every view equals its SQL run from scratch (spelled by plan/temporal_sql.py) over the sources at the
versions it records; on the driver and in Spark by turns."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from tests.conftest import refresh_settings
from tests.spark import test_refresh_differential as differential
from tests.spark.test_refresh_differential import refresh_steps
from tests.spark.test_refresh_interval_joins import apply

SOURCES = """
CREATE TABLE orders (id INT NOT NULL, cur STRING, ts TIMESTAMP, amount DECIMAL(12, 2),
                     WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE rates (id INT NOT NULL, cur STRING, ts TIMESTAMP, rate DOUBLE,
                    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED);
"""
VIEWS = """
CREATE MATERIALIZED VIEW tj_inner AS
SELECT o.id, o.amount, r.rate, r.ts AS rate_ts
FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;
-- every column of both sides, an order with no rate at its time padded with NULLs
CREATE MATERIALIZED VIEW tj_left AS
SELECT * FROM (SELECT id AS oid, cur AS c, ts AS ots, amount FROM orders) AS o
LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ots AS r ON r.cur = o.c;
-- an aggregate over a temporal join, the version's time shifted
CREATE MATERIALIZED VIEW tj_totals AS
SELECT r.cur, COUNT(*) AS n, SUM(o.amount) AS total, MAX(r.id) AS last_rate
FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.ts - INTERVAL '2' SECOND AS r ON o.cur = r.cur
GROUP BY r.cur;
"""
BASE = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)
TIMES = st.one_of(st.none(), st.integers(0, 20).map(lambda s: BASE + dt.timedelta(seconds=s)))
CURRENCIES = st.sampled_from(["eur", "gbp", None])
AMOUNTS = st.one_of(st.none(), st.decimals("-1000", "1000", places=2, allow_nan=False))
RATES = st.one_of(st.none(), st.sampled_from([1.5, 0.25, math.nan, math.inf, -math.inf, 2.0**53 + 1]))
COMMIT = st.one_of(
    st.tuples(
        st.just("upsert orders"),
        st.lists(st.tuples(st.integers(0, 8), CURRENCIES, TIMES, AMOUNTS), min_size=1, max_size=4),
    ),
    st.tuples(
        st.just("upsert rates"),
        st.lists(st.tuples(st.integers(0, 6), CURRENCIES, TIMES, RATES), min_size=1, max_size=3),
    ),
    st.tuples(
        st.sampled_from(["delete orders", "delete rates"]),
        st.lists(st.integers(0, 8), min_size=1, max_size=3),
    ),
)
STEPS = st.lists(st.lists(COMMIT, min_size=1, max_size=3), min_size=2, max_size=3)


def _at(seconds: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=seconds)


# Always run: orders before any rate (padded), at a rate's own time, and after it; two rates of one time; a rate
# arriving later than the orders of its time (they move to it), its time moved, then deleted (they move back);
# an order's currency changed; NULL currencies and times on both sides.
EXPLICIT = [
    [
        ("upsert orders", [(1, "eur", _at(5), Decimal("10.00")), (2, "eur", _at(10), Decimal("-3.50"))]),
        ("upsert orders", [(3, None, _at(10), None), (4, "eur", None, Decimal("1.00"))]),
        (
            "upsert rates",
            [(1, "eur", _at(4), 1.5), (2, "eur", _at(10), math.nan), (3, None, _at(1), 1.0)],
        ),
    ],
    [
        ("upsert rates", [(4, "eur", _at(7), 0.25), (5, "eur", _at(7), math.inf), (6, "gbp", None, 2.0)]),
        ("upsert orders", [(5, "gbp", _at(20), Decimal("7.25")), (2, "gbp", _at(10), Decimal("-3.50"))]),
    ],
    [("upsert rates", [(4, "eur", _at(12), 0.25)]), ("delete rates", [2, 5])],
]


def make_project(root: Path) -> Path:
    return differential.make_project(root, VIEWS, SOURCES)


@refresh_settings(1)
@given(steps=STEPS)
@example(steps=EXPLICIT)
def test_temporal_joins_equal_their_sql_after_random_changes(spark, tmp_path_factory, steps):
    ran = refresh_steps(
        spark, make_project(tmp_path_factory.mktemp("temporal")), steps, all_incremental=True, apply=apply
    )
    if steps == EXPLICIT:  # (a generated step may change nothing, and run no batch on its engine)
        assert {"stream/driver", "stream/spark"} <= set().union(*ran.values()), ran


def test_a_temporal_join_is_planned_incremental_and_bounded(tmp_path):
    plans = load_catalog(load_config(make_project(tmp_path))).plans
    for name in ("tj_inner", "tj_left", "tj_totals"):
        assert plans[name].strategy == "incremental"
        assert "temporal join" in plans[name].state
    assert plans["tj_left"].bounded_state
    assert "_mv_valid_to" in plans["tj_left"].spark_sql
