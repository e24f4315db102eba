"""Lookup joins, differentially: `JOIN rates FOR SYSTEM_TIME AS OF o.proc AS r ON o.cur = r.cur`, where o.proc is
PROCTIME(), joins each new order to the rates as they are at the batch that brings it, and a later change of the
rates revises nothing. The oracle replays the batches: at every version of a view, its changelog's rows are the
view's SQL (the lookup spelled as a plain join) over the orders that version added and the rates at the version
its commit records; and the changelog replays to the snapshot. After random appends of orders and upserts and
deletes of rates (NULL and unknown currencies, NaN and ±inf rates, DECIMAL amounts, a dimension that is a view);
on the driver and in Spark by turns."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import example, given
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import view_tables
from mvengine.storage.api import merge_into, read_arrow, read_table, write_table
from mvengine.storage.tables import TableRef, commit_metadata
from tests.conftest import refresh_settings
from tests.spark import test_refresh_differential as differential
from tests.spark.test_refresh_differential import (
    _assert_equal,
    check_changelog,
    check_view,
    refresh_steps,
    source_rows,
)

SOURCES = """
CREATE TABLE orders (id INT NOT NULL, cur STRING, amount DECIMAL(12, 2)) WITH ('append_only' = 'true');
CREATE TABLE rates (cur STRING NOT NULL, rate DOUBLE, PRIMARY KEY (cur) NOT ENFORCED);
"""
VIEWS = """
CREATE MATERIALIZED VIEW lj_inner AS
SELECT o.id, o.amount, r.rate, o.amount * r.rate AS converted
FROM (SELECT *, PROCTIME() AS proc FROM orders) o
JOIN rates FOR SYSTEM_TIME AS OF o.proc AS r ON o.cur = r.cur;
-- an order with no rate for its currency when it arrives is padded with NULLs, and stays so
CREATE MATERIALIZED VIEW lj_left AS
SELECT o.id, o.cur AS order_cur, r.*
FROM (SELECT id, cur, PROCTIME() AS arrived FROM orders WHERE id >= 0) AS o
LEFT JOIN rates FOR SYSTEM_TIME AS OF o.arrived AS r ON r.cur = o.cur;
-- a view as the dimension (a currency's rate rounded), as of PROCTIME() itself
CREATE MATERIALIZED VIEW rounded AS SELECT cur, ROUND(rate, 1) AS rate FROM rates;
CREATE MATERIALIZED VIEW lj_view AS
SELECT o.id, d.rate FROM orders o JOIN rounded FOR SYSTEM_TIME AS OF PROCTIME() AS d ON d.cur = o.cur;
"""
LOOKUP_VIEWS = ("lj_inner", "lj_left", "lj_view")
CURRENCIES = st.sampled_from(["eur", "gbp", "usd", None])
AMOUNTS = st.one_of(st.none(), st.decimals("-1000", "1000", places=2, allow_nan=False))
RATES = st.one_of(st.none(), st.sampled_from([1.5, 0.25, math.nan, math.inf, -math.inf, 2.0**53 + 1]))
COMMIT = st.one_of(
    st.tuples(
        st.just("append orders"),
        st.lists(st.tuples(st.integers(-2, 50), CURRENCIES, AMOUNTS), min_size=1, max_size=4),
    ),
    st.tuples(
        st.just("upsert rates"),
        st.lists(st.tuples(st.sampled_from(["eur", "gbp", "usd"]), RATES), min_size=1, max_size=3),
    ),
    st.tuples(
        st.just("delete rates"), st.lists(st.sampled_from(["eur", "gbp", "usd"]), min_size=1, max_size=2)
    ),
)
STEPS = st.lists(st.lists(COMMIT, min_size=1, max_size=3), min_size=2, max_size=3)

# Always run: orders before any rate (padded, and kept padded when the rate comes), orders in the batch that
# brings their rate, a rate changed and deleted after its orders joined (they keep the old one), an order of a
# deleted rate (padded), a batch on the rates only (no change), a NULL currency.
EXPLICIT = [
    [("append orders", [(1, "eur", Decimal("10.00")), (2, None, Decimal("1.00"))])],
    [
        ("upsert rates", [("eur", 1.5), ("gbp", math.nan)]),
        ("append orders", [(3, "eur", Decimal("-3.50")), (4, "gbp", None)]),
    ],
    [("upsert rates", [("eur", 0.25)]), ("delete rates", ["gbp"])],
    [("append orders", [(5, "gbp", Decimal("7.25")), (6, "eur", Decimal("2.00"))])],
]


def make_project(root: Path) -> Path:
    return differential.make_project(root, VIEWS, SOURCES)


def apply(spark, catalog, commit) -> None:
    kind, payload = commit
    if kind == "append orders":
        source = catalog.sources["orders"]
        write_table(source_rows(source.schema, payload), TableRef(source.path))
        return
    source = catalog.sources["rates"]
    if kind == "upsert rates":
        latest = {row[0]: row for row in payload}
        merge_into(source_rows(source.schema, latest.values()), TableRef(source.path), ["cur"])
    else:
        gone = source.schema.append(pa.field("gone", pa.bool_()))
        rows = [(c, None, True) for c in sorted(set(payload))]
        merge_into(source_rows(gone, rows), TableRef(source.path), ["cur"], delete_column="gone")


def check_lookup(spark, catalog, name: str) -> None:
    """At every version of a lookup join's view, the rows its changelog added are its SQL over the orders that
    version added and the dimension at the version it records (and it only ever adds rows); the changelog
    replays to the snapshot."""
    if name not in LOOKUP_VIEWS:
        check_view(spark, catalog, name)
        return
    check_changelog(spark, catalog, name)
    plan = catalog.plans[name]
    tables = view_tables(plan, {})
    dt = tables.snapshot.open()
    log = read_arrow(tables.changelog)
    assert set(log.column("_op").to_pylist()) <= {"+I"}, f"{name} retracted a row"
    orders = TableRef(catalog.sources["orders"].path)
    seen = None  # the orders version the previous batch read
    for version in range(dt.version() + 1):
        recorded = commit_metadata(dt, version).get("mvengine.inputs")
        if recorded is None:
            continue
        inputs = json.loads(recorded)
        new = read_table(spark, orders, version=inputs["orders"])
        if seen is not None:
            new = new.exceptAll(read_table(spark, orders, version=seen))
        new.createOrReplaceTempView("orders")
        dimension = next(i for i in inputs if i != "orders")
        ref = TableRef(catalog.sources["rates"].path) if dimension == "rates" else None
        ref = ref or view_tables(catalog.plans[dimension], {}).snapshot
        read_table(spark, ref, version=inputs[dimension]).createOrReplaceTempView(dimension)
        added = log.filter(pc.equal(log.column("_version"), version)).select([c.name for c in plan.columns])
        _assert_equal(
            f"{name}@{version}",
            "its SQL over the orders it added",
            added,
            spark.sql(plan.spark_sql).toArrow(),
        )
        seen = inputs["orders"]


@refresh_settings(1)
@given(steps=STEPS)
@example(steps=EXPLICIT)
def test_lookup_joins_join_each_order_to_the_rates_of_its_batch(spark, tmp_path_factory, steps):
    root = make_project(tmp_path_factory.mktemp("lookup"))
    ran = refresh_steps(spark, root, steps, all_incremental=True, apply=apply, check=check_lookup)
    if steps == EXPLICIT:
        assert {"stream/driver", "stream/spark"} <= set().union(*ran.values()), ran
        catalog = load_catalog(load_config(root))
        rows = read_table(spark, view_tables(catalog.plans["lj_left"], {}).snapshot).toArrow().to_pylist()
        found = {r["id"]: r["rate"] for r in rows}
        # 1 came before any rate, 3 at 1.5 (then the rate moved to 0.25), 4 at NaN, 5 after gbp was deleted.
        assert found[1] is None and found[3] == 1.5 and math.isnan(found[4]) and found[5] is None, found
        assert found[6] == 0.25 and sorted(r["id"] for r in rows) == list(range(1, 7)), rows


def test_a_lookup_join_is_planned_append_only_and_bounded(tmp_path):
    plans = load_catalog(load_config(make_project(tmp_path))).plans
    for name in LOOKUP_VIEWS:
        assert plans[name].strategy == "incremental"
        assert plans[name].changelog == "append-only"
        assert "lookup join (the dimension as of each batch)" in plans[name].state
        assert plans[name].bounded_state
    assert "FOR SYSTEM_TIME" not in plans["lj_left"].spark_sql  # a recomputation joins the rates as they are
