"""Which engine computes a batch (incremental/driver.py): small batches of views the driver computes run on the
driver without a Spark job; a batch whose values the driver cannot compute exactly as Spark (a non-ASCII
string in UPPER), a view outside its subset, or a batch above `[refresh] driver_max_changes` go to Spark; the batch
line says which, and every snapshot still equals its SQL."""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from mvengine.config import load_config
from mvengine.incremental.driver_expressions import set_session_time_zone
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from tests.spark.test_refresh_differential import check_view

SQL = """
CREATE TABLE m (k INT NOT NULL, x DOUBLE, s STRING, PRIMARY KEY (k) NOT ENFORCED);
CREATE MATERIALIZED VIEW positive AS SELECT k, x FROM m WHERE x > 0;
CREATE MATERIALIZED VIEW per_s AS SELECT s, COUNT(*) AS n, SUM(x) AS total FROM m GROUP BY s;
CREATE MATERIALIZED VIEW prefixes AS
SELECT regexp_replace(s, 'b', 'c') AS p, COUNT(*) AS n FROM m GROUP BY regexp_replace(s, 'b', 'c');
CREATE MATERIALIZED VIEW shout AS SELECT k, UPPER(s) AS u FROM m;
"""
SCHEMA = pa.schema([pa.field("k", pa.int32(), False), ("x", pa.float64()), ("s", pa.string())])


def project(root: Path, conf: str = "") -> tuple:
    (root / "views").mkdir(parents=True)
    (root / "views" / "all.sql").write_text(SQL)
    if conf:
        (root / "conf").mkdir()
        (root / "conf" / "mvengine.toml").write_text(conf)
    config = load_config(root)
    return config, load_catalog(config)


def commit(catalog, rows: list[tuple]) -> None:
    write_deltalake(
        catalog.sources["m"].path,
        pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA),
        mode="append",
    )


def refresh(spark, config, catalog) -> dict:
    reports = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    return {r.view: r for r in reports}


def test_small_batches_run_on_the_driver_and_others_in_spark(spark, tmp_path):
    config, catalog = project(tmp_path)
    Refresher(spark, config, catalog).refresh()
    commit(catalog, [(1, 2.5, "ab"), (2, -1.0, "b"), (3, None, None)])
    batches = refresh(spark, config, catalog)
    for view in ("positive", "per_s"):
        assert batches[view].engine == "driver", batches[view].line()
        assert batches[view].line().endswith("on the driver")
        assert all(p.jobs == 0 for p in batches[view].phases), batches[view].profile()
    # regexp_replace() is outside what the driver evaluates: `mv plan` says so, and Spark computes every batch.
    assert batches["prefixes"].engine == "spark" and "on the driver" not in batches["prefixes"].line()
    for view in catalog.plans:
        check_view(spark, catalog, view)


def test_a_batch_the_driver_would_compute_differently_goes_to_spark(spark, tmp_path):
    """Java upper-cases ß to SS, where Arrow's case mapping does not: a batch with a non-ASCII string goes to
    Spark, the line says why, and the snapshots follow Spark's semantics. A NaN, which Spark orders above every
    number (NaN > 0 is true) and Arrow's comparison does not, the driver compares as Spark does."""
    config, catalog = project(tmp_path)
    Refresher(spark, config, catalog).refresh()
    commit(catalog, [(1, math.nan, "straße"), (2, 1.0, "a")])
    batches = refresh(spark, config, catalog)
    assert batches["shout"].engine == "spark"
    assert "computed by Spark: UPPER/LOWER of a non-ASCII string" in batches["shout"].line()
    assert batches["positive"].engine == "driver", batches["positive"].line()
    for view in catalog.plans:
        check_view(spark, catalog, view)
    commit(catalog, [(3, 4.0, "c")])  # the next batch is ASCII: the driver again
    assert refresh(spark, config, catalog)["shout"].engine == "driver"
    check_view(spark, catalog, "shout")


def test_a_batch_above_driver_max_changes_goes_to_spark(spark, tmp_path):
    config, catalog = project(tmp_path, "[refresh]\ndriver_max_changes = 2\n")
    Refresher(spark, config, catalog).refresh()
    commit(catalog, [(1, 1.0, "a"), (2, 2.0, "b"), (3, 3.0, "c")])
    batches = refresh(spark, config, catalog)
    assert {v: b.engine for v, b in batches.items()} == {
        "positive": "spark",
        "per_s": "spark",
        "prefixes": "spark",
        "shout": "spark",
    }
    commit(catalog, [(4, 1.0, "a")])
    assert refresh(spark, config, catalog)["per_s"].engine == "driver"
    for view in catalog.plans:
        check_view(spark, catalog, view)


def test_timestamps_follow_a_session_time_zone_other_than_utc(spark, tmp_path):
    """Spark reads a TIMESTAMP literal and prints DATE_FORMAT in the session time zone; the driver computes both
    in UTC only. Under `spark.sql.session.timeZone = "Europe/Berlin"` their batches go to Spark (the line says
    why) and the views equal their SQL in Berlin time, across midnight and the change to summer time; a view
    that does not depend on the zone stays on the driver. (Before, the driver read them in UTC: wrong rows.)"""
    import datetime as dt

    root = tmp_path / "p"
    (root / "views").mkdir(parents=True)
    (root / "views" / "all.sql").write_text("""
CREATE TABLE ev (id INT NOT NULL, ts TIMESTAMP, PRIMARY KEY (id) NOT ENFORCED);
CREATE MATERIALIZED VIEW after AS SELECT id, ts FROM ev WHERE ts >= TIMESTAMP '2026-01-01 00:30:00';
CREATE MATERIALIZED VIEW hours AS
SELECT DATE_FORMAT(ts, 'yyyy-MM-dd HH') AS h, COUNT(*) AS n FROM ev GROUP BY DATE_FORMAT(ts, 'yyyy-MM-dd HH');
CREATE MATERIALIZED VIEW counted AS SELECT COUNT(*) AS n, MAX(ts) AS newest FROM ev;
CREATE MATERIALIZED VIEW days AS SELECT CAST(ts AS DATE) AS day, COUNT(*) AS n FROM ev GROUP BY CAST(ts AS DATE);
""")
    (root / "conf").mkdir()
    (root / "conf" / "mvengine.toml").write_text(
        '[spark.conf]\n"spark.sql.session.timeZone" = "Europe/Berlin"\n'
    )
    config = load_config(root)
    catalog = load_catalog(config)
    schema = pa.schema([pa.field("id", pa.int32(), False), ("ts", pa.timestamp("us", tz="UTC"))])
    instants = [  # 00:45 and 01:00 in Berlin on New Year's day; 01:30 and 03:30 across the spring change
        dt.datetime(2025, 12, 31, 23, 45, tzinfo=dt.UTC),
        dt.datetime(2026, 1, 1, 0, 0, tzinfo=dt.UTC),
        dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.UTC),
        dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC),
    ]
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "Europe/Berlin")  # the session the config would make
    try:
        Refresher(spark, config, catalog).refresh()
        write_deltalake(
            catalog.sources["ev"].path,
            pa.Table.from_pylist([{"id": i, "ts": t} for i, t in enumerate(instants)], schema=schema),
            mode="append",
        )
        batches = refresh(spark, config, catalog)
        assert batches["after"].engine == "spark"
        assert "the TIMESTAMP literal '2026-01-01 00:30:00' in the session time zone Europe/Berlin" in (
            batches["after"].line()
        )
        assert batches["hours"].engine == "spark"
        assert "DATE_FORMAT of a TIMESTAMP in the session time zone Europe/Berlin" in batches["hours"].line()
        assert batches["counted"].engine == "driver"
        assert batches["days"].engine == "spark"
        assert (  # in SQL's words, at the expression that stopped the driver
            "a cast from timestamp to date in the session time zone Europe/Berlin in CAST(ev.ts AS DATE)"
            in batches["days"].line()
        )
        for view in catalog.plans:
            check_view(spark, catalog, view)
        after = spark.read.format("delta").load(view_tables(catalog.plans["after"], {}).snapshot.uri)
        assert after.count() == 4  # in UTC, 2 (23:45 and 00:00 UTC are before 00:30)
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
        set_session_time_zone("UTC")  # for the driver rules the next tests run without a Refresher


def test_the_day_of_a_timestamp_and_decimal_money_run_on_the_driver(spark, tmp_path):
    """Revenue per customer per day over DECIMAL money: `CAST(ts AS DATE)` (in UTC, the session time zone),
    DECIMAL times INT, a CASE of a DECIMAL and an INT, and their SUMs are computed on the driver (each sent the
    batch to Spark before), around midnight and before 1970 (where the day is the floor), and the view equals
    its SQL after inserts, updates and deletes; so are months and quarters (DATE_TRUNC, TRUNC), EXTRACT, a
    decimal SUM divided by an integer and a decimal AVG; and a SUM of decimal SUMs cast back to SUM's type (the
    orders re-tested against their customer's average quantity, grouped by quantity first)."""
    import datetime as dt
    from decimal import Decimal

    root = tmp_path / "p"
    (root / "views").mkdir(parents=True)
    (root / "views" / "all.sql").write_text("""
CREATE TABLE orders (
  id INT NOT NULL, customer INT, quantity INT, amount DECIMAL(12,2), ts TIMESTAMP, PRIMARY KEY (id) NOT ENFORCED
);
CREATE MATERIALIZED VIEW revenue AS
SELECT customer, CAST(ts AS DATE) AS day, SUM(amount * quantity) AS revenue,
       SUM(CASE WHEN amount > 0 THEN amount ELSE 0 END) AS paid, COUNT(*) AS orders
FROM orders GROUP BY customer, CAST(ts AS DATE);
CREATE MATERIALIZED VIEW monthly AS
SELECT date_trunc('MONTH', ts) AS month, trunc(CAST(ts AS DATE), 'QUARTER') AS quarter,
       EXTRACT(HOUR FROM ts) AS hour, SUM(amount) / 3 AS third, AVG(amount) AS average, COUNT(*) AS orders
FROM orders WHERE ts IS NOT NULL
GROUP BY date_trunc('MONTH', ts), trunc(CAST(ts AS DATE), 'QUARTER'), EXTRACT(HOUR FROM ts);
CREATE MATERIALIZED VIEW small AS
SELECT o.customer, SUM(o.amount) AS revenue, SUM(o.amount) / 7 AS per_day, COUNT(*) AS orders
FROM orders o WHERE o.quantity < (SELECT 2 * AVG(i.quantity) FROM orders i WHERE i.customer = o.customer)
GROUP BY o.customer;
""")
    config = load_config(root)
    catalog = load_catalog(config)
    schema = pa.schema(
        [
            pa.field("id", pa.int32(), False),
            ("customer", pa.int32()),
            ("quantity", pa.int32()),
            ("amount", pa.decimal128(12, 2)),
            ("ts", pa.timestamp("us", tz="UTC")),
        ]
    )

    def write(rows: list[tuple], mode: str = "append") -> None:
        write_deltalake(
            catalog.sources["orders"].path,
            pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema),
            mode=mode,
        )

    def at(*args: int) -> dt.datetime:
        return dt.datetime(*args, tzinfo=dt.UTC)

    Refresher(spark, config, catalog).refresh()
    write(
        [
            (1, 7, 2**31 - 1, Decimal("9999999999.99"), at(2026, 11, 25, 23, 59, 59)),
            (2, 7, 3, Decimal("0.01"), at(2026, 11, 26, 0, 0)),
            (3, 8, -2, Decimal("-12.50"), at(1969, 12, 31, 23, 59, 59)),
            (4, 8, None, None, None),
        ]
    )
    batches = refresh(spark, config, catalog)
    for view in ("revenue", "monthly", "small__eager_1", "small"):
        assert batches[view].engine == "driver", batches[view].line()
        check_view(spark, catalog, view)
    # an update moves order 2 to the day before and another customer; order 3 goes
    table = pa.Table.from_pylist(
        [
            {
                "id": 1,
                "customer": 7,
                "quantity": 1,
                "amount": Decimal("9999999999.99"),
                "ts": at(2026, 11, 25),
            },
            {"id": 2, "customer": 8, "quantity": 5, "amount": Decimal("0.02"), "ts": at(2026, 11, 25, 12, 0)},
            {"id": 4, "customer": 8, "quantity": None, "amount": None, "ts": None},
        ],
        schema=schema,
    )
    write_deltalake(catalog.sources["orders"].path, table, mode="overwrite")
    batches = refresh(spark, config, catalog)
    for view in ("revenue", "monthly", "small__eager_1", "small"):
        assert batches[view].engine == "driver", batches[view].line()
        check_view(spark, catalog, view)
