"""Views with a state_ttl, differentially: a key (a group, a distinct row, a top-N's partition) untouched by
its input for the TTL, by the batches' clock, leaves the view and its state; when its input changes again it is
counted again from all its input rows. After random upserts and deletes, and the clock moved with no input
changed, every view's snapshot equals its SQL over the inputs at the versions it records, less the keys whose
input rows last changed (net) at or before the latest batch's clock minus the TTL: the oracle replays the
snapshot's history (each version's input versions and clock, as its commit records them) over the sources. On
the driver and in Spark by turns; the clock is the refresh's own, set by the test (tests/conftest.py:
RefreshClock)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from decimal import Decimal
from functools import partial
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.project.layout import last_commit, recorded_at, view_tables
from mvengine.reading.describe import describe
from mvengine.reading.versions import Versions
from mvengine.runtime import commit as commit_module
from mvengine.runtime.expiry import next_expiry
from mvengine.runtime.refresh import BatchReport, Refresher
from mvengine.runtime.refresh_plan import timers_due
from mvengine.storage.api import read_arrow, read_table
from mvengine.storage.tables import TableRef, commit_metadata
from tests.conftest import refresh_settings
from tests.spark import test_refresh_differential as differential
from tests.spark.test_refresh_differential import _assert_equal, refresh_steps
from tests.spark.test_refresh_interval_joins import apply as apply_rows
from tests.spark.test_refresh_temporal_filters import applier

SOURCES = """
CREATE TABLE events (id INT NOT NULL, u STRING, x DECIMAL(10,2), PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE flags (id INT NOT NULL, u STRING, PRIMARY KEY (id) NOT ENFORCED);
"""
VIEWS = """
-- per user, for the users active in the last ten seconds (MAX under deletes keeps its values in a multiset)
CREATE MATERIALIZED VIEW ttl_totals WITH ('state_ttl' = '10 seconds') AS
SELECT u, COUNT(*) AS n, SUM(x) AS total, MAX(x) AS top FROM events GROUP BY u HAVING COUNT(*) > 0;
-- distinct rows, each kept while touched within five seconds
CREATE MATERIALIZED VIEW ttl_pairs WITH ('state_ttl' = '5 seconds') AS
SELECT DISTINCT u, x > 0 AS positive FROM events;
-- a join's groups: a user's group is touched by changes of either side
CREATE MATERIALIZED VIEW ttl_flagged WITH ('state_ttl' = '8 seconds') AS
SELECT e.u, f.id AS flag, COUNT(*) AS n FROM events e JOIN flags f ON e.u = f.u GROUP BY e.u, f.id;
-- the two largest amounts of each user touched within seven seconds (a top-N's partitions expire)
CREATE MATERIALIZED VIEW ttl_top WITH ('state_ttl' = '7 seconds') AS
SELECT u, id, x, rn FROM (SELECT u, id, x, ROW_NUMBER() OVER (PARTITION BY u ORDER BY x DESC, id) AS rn
FROM events) AS r WHERE rn <= 2;
-- each event with its user's running total, for the users touched within six seconds (a window function's)
CREATE MATERIALIZED VIEW ttl_running WITH ('state_ttl' = '6 seconds') AS
SELECT u, id, x, SUM(x) OVER (PARTITION BY u ORDER BY id) AS running, COUNT(*) OVER (PARTITION BY u) AS n
FROM events;
"""
# Per view: the rows its GROUP BY or DISTINCT reads (SQL over the sources) and which of them make its key.
INPUT_ROWS = {
    "ttl_totals": ("SELECT u, x FROM events", ["u"]),
    "ttl_pairs": ("SELECT u, x > 0 AS positive FROM events", ["u", "positive"]),
    "ttl_flagged": ("SELECT e.u, f.id AS flag FROM events e JOIN flags f ON e.u = f.u", ["u", "flag"]),
    "ttl_top": ("SELECT u, id, x FROM events", ["u"]),
    "ttl_running": ("SELECT u, id, x FROM events", ["u"]),
}
AMOUNTS = st.one_of(st.none(), st.decimals(-5, 5, places=2, allow_nan=False, allow_infinity=False))
ROW = st.tuples(st.integers(0, 7), st.sampled_from(["a", "b", "c", None]), AMOUNTS)
COMMIT = st.one_of(
    st.tuples(st.just("upsert events"), st.lists(ROW, min_size=1, max_size=4)),
    st.tuples(st.just("delete events"), st.lists(st.integers(0, 7), min_size=1, max_size=3)),
    st.tuples(st.just("upsert flags"), st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"])))),
    st.tuples(st.just("tick"), st.integers(0, 12_000)),  # the clock moves on, in milliseconds
)
STEPS = st.lists(st.lists(COMMIT, min_size=1, max_size=3), min_size=2, max_size=5)


def make_project(root: Path, views: str = VIEWS) -> Path:
    return differential.make_project(root, views, SOURCES)


def check_live_keys(
    spark, catalog, name: str, input_rows: dict[str, tuple[str, list[str]]] = INPUT_ROWS
) -> None:
    """The view's snapshot equals its SQL over the inputs at the versions it records, less the rows of the
    keys its state_ttl expired: those whose input rows last changed at or before its clock minus the TTL.
    `input_rows`: per view, the rows its GROUP BY or DISTINCT reads (SQL) and which of them make its key."""
    plan = catalog.plans[name]
    snapshot_ref = view_tables(plan, {}).snapshot
    table = snapshot_ref.open()
    sql, key = input_rows[name]
    touched: dict[tuple, int] = {}
    before: Counter = Counter()
    for version in range(table.version() + 1):
        recorded = commit_metadata(table, version)
        clock = int(recorded["mvengine.clock"])
        rows = Counter(_rows(spark, catalog, json.loads(recorded["mvengine.inputs"]), sql, key))
        for changed in (rows - before) + (before - rows):
            touched[changed[: len(key)]] = clock
        before = rows
    expected = _query(spark, catalog, plan, json.loads(recorded["mvengine.inputs"]))
    since = clock - plan.view.state_ttl
    keys = [tuple(map(_value, row.values())) for row in expected.select(key).to_pylist()]
    live = [i for i, k in enumerate(keys) if touched.get(k, since) > since]
    what = "its SQL over the keys touched within its state_ttl"
    _assert_equal(name, what, read_arrow(snapshot_ref), expected.take(pa.array(live, pa.int64())))


def _rows(spark, catalog, inputs: dict[str, int], sql: str, key: list[str]) -> list[tuple]:
    """The keys of the rows the view's GROUP BY or DISTINCT reads, one per row, at these input versions (read
    once per versions and SQL: a table's version never changes, and every check replays the whole history)."""
    at = tuple((name, catalog.sources[name].path, version) for name, version in sorted(inputs.items()))
    if (at, sql, tuple(key)) not in _ROWS_READ:
        for name, path, version in at:
            read_table(spark, TableRef(path), version=version).createOrReplaceTempView(name)
        found = spark.sql(sql).toArrow().to_pylist()
        _ROWS_READ[at, sql, tuple(key)] = [
            tuple(_value(r[k]) for k in key) + tuple(map(_value, r.values())) for r in found
        ]
    return _ROWS_READ[at, sql, tuple(key)]


_ROWS_READ: dict[tuple, list[tuple]] = {}


def _value(v):
    """A value as the oracle compares it: a float by its spelling (NaN equal to NaN, -0.0 apart from 0.0)."""
    return repr(v) if isinstance(v, float) else v


def _query(spark, catalog, plan, inputs: dict[str, int]):
    for name, version in inputs.items():
        read_table(spark, TableRef(catalog.sources[name].path), version=version).createOrReplaceTempView(name)
    return spark.sql(plan.spark_sql).toArrow()


# Always run: keys touched and left alone, the clock alone expiring them (a batch of its own), keys back after
# they expired (counted again from all their rows), a delete of an expired key's row, NULL users and amounts;
# steps by turns on the driver and in Spark, from the driver.
EXPLICIT = [
    [
        ("upsert events", [(1, "a", 1), (2, "a", 2), (3, "b", -1), (4, None, None)]),
        ("upsert flags", [(0, "a"), (1, "b")]),
    ],
    # 6 s: every distinct row expires (Spark); a new flag touches b's groups of ttl_flagged
    [("upsert flags", [(2, "b")]), ("tick", 6_000)],
    # 11 s, the clock alone: ttl_totals' groups (with MAX's values), ttl_top's partitions and two of
    # ttl_flagged's groups expire (driver)
    [("tick", 5_000)],
    # a comes back, counted from its old rows too; b's only row is deleted after b expired (Spark)
    [("upsert events", [(6, "a", 4)]), ("delete events", [3])],
    # 20 s: the NULL group comes back, and so does the distinct row (a, true) (driver)
    [("tick", 9_000), ("upsert events", [(7, None, 2), (8, "a", 9)])],
    # 21 s: a's expired group of ttl_flagged comes back through the join (Spark)
    [("tick", 1_000), ("upsert events", [(9, "a", 1)])],
]


@refresh_settings(1)
@given(steps=STEPS)
@example(steps=EXPLICIT)
def test_views_with_a_state_ttl_hold_the_keys_touched_within_it(spark, tmp_path_factory, clock, steps):
    ran = refresh_steps(
        spark,
        make_project(tmp_path_factory.mktemp("ttl")),
        steps,
        all_incremental=True,
        apply=applier(clock),
        check=check_live_keys,
    )
    if steps == EXPLICIT:
        assert {"stream/driver", "stream/spark"} <= set().union(*ran.values())


def test_the_clock_alone_expires_keys_and_describe_counts_them(spark, tmp_path, clock):
    root = make_project(tmp_path)
    config = load_config(root)
    catalog = load_catalog(config)
    plan = catalog.plans["ttl_totals"]
    assert plan.bounded_state and "expires (state_ttl)" in plan.state
    rows = [("upsert events", [(1, "a", 1), (2, "b", 2)])]
    # batches: the bootstrap (clock at 0 s), the insert (2 s), a touch of a alone (9 s); at 13 s b, untouched
    # for 11 s, is due to leave; a, touched 4 s before, is not
    steps = [[("tick", 2_000), *rows], [("tick", 7_000), ("upsert events", [(3, "a", 5)])], [("tick", 4_000)]]
    refresh_steps(spark, root, steps[:2], apply=applier(clock), check=check_live_keys)
    clock.now += 4_000_000
    assert timers_due(plan, catalog, last_commit(view_tables(plan, {}).snapshot), {}) is not None
    # ttl_top (7 s) dropped b's partition at 9 s; a's, touched then, is due at 16 s, not yet
    top = catalog.plans["ttl_top"]
    assert next_expiry(top, view_tables(top, {}).state, {}) == clock.now + 3_000_000
    assert timers_due(top, catalog, last_commit(view_tables(top, {}).snapshot), {}) is None
    reports: list[BatchReport] = []
    Refresher(spark, config, catalog, report=reports.append).refresh()
    check_live_keys(spark, catalog, "ttl_totals")
    tables = view_tables(plan, {})
    assert read_arrow(tables.snapshot).column("u").to_pylist() == ["a"]
    changelog = read_arrow(tables.changelog).to_pylist()
    assert [(r["u"], r["_op"]) for r in changelog if r["_op"] == "-D"] == [("b", "-D")]
    line = next(r.line() for r in reports if r.view == "ttl_totals")
    assert "1 key expired" in line, line
    described = describe(Versions(config, catalog), "ttl_totals")
    assert described["state_ttl"] == "10 seconds"
    assert described["rows_expired"] == 1
    # a's accumulators, its two values in MAX's multiset, and its changelog revision: nothing of b
    assert described["state_rows"] == 1 + 2 + 1
    changelog = read_arrow(view_tables(top, {}).changelog).to_pylist()
    assert [(r["u"], r["_op"]) for r in changelog if r["_op"] == "-D"] == [("b", "-D")]
    assert describe(Versions(config, catalog), "ttl_top")["rows_expired"] == 1


def test_a_batch_replayed_after_its_state_committed_expires_what_its_first_attempt_did(
    spark, tmp_path, clock, monkeypatch
):
    """The first attempt's clock, which its state commit records, is the replay's: another clock would expire
    other keys than those the committed state dropped."""
    root = make_project(tmp_path)
    config = load_config(root)
    catalog = load_catalog(config)
    tables = view_tables(catalog.plans["ttl_totals"], {})
    refresh_steps(spark, root, [[("upsert events", [(1, "a", 1), (2, "b", 2)])]], apply=applier(clock))
    clock.now += 11_000_000  # b is due to leave; a is touched in the batch
    apply_rows(spark, catalog, ("upsert events", [(3, "a", 5)]))
    first = clock.now

    def crash(view: str, commit: str, when: str) -> None:
        if (view, commit, when) == ("ttl_totals", "snapshot", "before"):
            raise RuntimeError("the process dies between the view's state commit and its snapshot commit")

    monkeypatch.setattr(commit_module, "boundary", crash)
    with pytest.raises(RuntimeError, match="the process dies"):
        Refresher(spark, config, catalog).refresh()
    monkeypatch.setattr(commit_module, "boundary", lambda *_: None)
    clock.now += 20_000_000
    Refresher(spark, config, catalog).refresh()
    replayed = [recorded_at(tables.snapshot, v) for v in range(tables.snapshot.open().version() + 1)]
    # the replayed batch (the first at events@2), then one of a's expiry, by the clock alone
    assert [r.clock for r in replayed if r.inputs.get("events") == 2] == [first, clock.now]
    check_live_keys(spark, catalog, "ttl_totals")


SESSION_SOURCES = """
CREATE TABLE visits (id INT NOT NULL, u STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND,
                     PRIMARY KEY (id) NOT ENFORCED);
"""
SESSION_VIEWS = """
CREATE MATERIALIZED VIEW ttl_sessions WITH ('state_ttl' = '6 seconds') AS
SELECT u, session_window.start AS s0, session_window.end AS s1, COUNT(*) AS n FROM visits
GROUP BY u, session_window(ts, '5 seconds');
"""


def test_session_windows_expire_their_partitions(spark, tmp_path, clock):
    """A user's sessions leave together when the user's visits are untouched for the TTL, and come back formed
    from all of the user's visits, deleted ones aside."""
    root = differential.make_project(tmp_path, SESSION_VIEWS, SESSION_SOURCES)
    at = partial(dt.datetime.fromtimestamp, tz=dt.UTC)
    start = 1_700_000_000
    steps = [
        [
            (
                "upsert visits",
                [(1, "a", at(start)), (2, "a", at(start + 3)), (3, "b", at(start)), (4, None, at(start + 1))],
            )
        ],
        # 7 s: a and the NULL user expire; b gets a second session
        [("tick", 7_000), ("upsert visits", [(5, "b", at(start + 20))])],
        # a comes back: one session of its three visits (gaps under 5 s)
        [("upsert visits", [(6, "a", at(start + 6))])],
        # 14 s, the clock alone: a and b expire
        [("tick", 7_000)],
        # a visit of a, which expired, is deleted: a comes back with the two others; so does NULL
        [("delete visits", [1]), ("upsert visits", [(7, None, at(start + 2))])],
    ]
    check = partial(check_live_keys, input_rows={"ttl_sessions": ("SELECT u, id, ts FROM visits", ["u"])})
    refresh_steps(spark, root, steps, all_incremental=True, apply=applier(clock), check=check)
    catalog = load_catalog(load_config(root))
    tables = view_tables(catalog.plans["ttl_sessions"], {})
    records = [recorded_at(tables.snapshot, v) for v in range(tables.snapshot.open().version() + 1)]
    # the clock alone (14 s) ran a batch of its own, with no visit changed
    assert any(r.inputs == p.inputs and r.clock > p.clock for p, r in zip(records, records[1:]))
    changelog = read_arrow(tables.changelog).to_pylist()
    assert sorted((r["u"] or "", r["n"]) for r in changelog if r["_op"] == "-D") == [
        ("", 1),
        ("a", 2),
        ("a", 3),
        ("b", 1),
        ("b", 1),
    ]


EXTREME_SOURCES = """
CREATE TABLE amounts (
  id INT NOT NULL, u STRING, d DOUBLE, big BIGINT, money DECIMAL(38, 2), PRIMARY KEY (id) NOT ENFORCED
);
"""
EXTREME_VIEWS = """
CREATE MATERIALIZED VIEW ttl_extremes WITH ('state_ttl' = '5 seconds') AS
SELECT u, COUNT(*) AS n, SUM(big) AS s, MAX(d) AS hi, MIN(d) AS lo, SUM(money) AS total, MIN(money) AS least
FROM amounts GROUP BY u;
CREATE MATERIALIZED VIEW ttl_extreme_rows WITH ('state_ttl' = '5 seconds') AS
SELECT DISTINCT u, big, money FROM amounts;
CREATE MATERIALIZED VIEW ttl_extreme_top WITH ('state_ttl' = '5 seconds') AS
SELECT u, id, d, big, money FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY u ORDER BY d DESC, money, id) AS rn FROM amounts
) AS r WHERE rn <= 2;
"""
EXTREME_INPUTS = {
    "ttl_extremes": ("SELECT u, d, big, money FROM amounts", ["u"]),
    "ttl_extreme_rows": ("SELECT u, big, money FROM amounts", ["u", "big", "money"]),
    "ttl_extreme_top": ("SELECT u, id, d, big, money FROM amounts", ["u"]),
}
BIG, MONEY = 2**53 + 1, Decimal("1" + "0" * 35)  # (a DECIMAL(38, 2) holds 36 digits before its point)


def test_expiry_and_return_keep_extreme_values_exact_on_both_engines(spark, tmp_path, clock):
    """NaN, ±inf and -0.0 under MAX/MIN and in a top-N's order, BIGINTs beyond 2^53 and DECIMALs near their
    limit, through keys expiring and coming back, in batches on the driver and in Spark by turns."""
    root = differential.make_project(tmp_path, EXTREME_VIEWS, EXTREME_SOURCES)
    nan, inf = float("nan"), float("inf")
    rows = [
        (1, "a", nan, BIG, MONEY),
        (2, "a", inf, 2**62, -MONEY),
        (3, "b", -inf, -(2**62), Decimal("0.01")),
        (4, "b", -0.0, 1, None),
        (5, None, 0.0, None, MONEY - Decimal("0.01")),
    ]
    steps = [
        [("upsert amounts", rows)],  # driver
        [("tick", 6_000), ("upsert amounts", [(6, "c", 1.0, 1, Decimal("1"))])],  # Spark: a, b, NULL expire
        [("upsert amounts", [(7, "a", 1.5, BIG - 2, Decimal("1"))])],  # driver: a back, from all its rows
        [("tick", 6_000), ("upsert amounts", [(8, "b", nan, 3, MONEY)])],  # Spark: b back; a and c expire
        [("delete amounts", [1]), ("upsert amounts", [(9, None, -inf, 2**63 - 1, -MONEY)])],  # driver
        [("tick", 1_000), ("upsert amounts", [(10, "a", -0.0, -(2**63), Decimal("0.01"))])],  # Spark
    ]
    check = partial(check_live_keys, input_rows=EXTREME_INPUTS)
    ran = refresh_steps(spark, root, steps, all_incremental=True, apply=applier(clock), check=check)
    assert {"stream/driver", "stream/spark"} <= set().union(*ran.values())
    catalog = load_catalog(load_config(root))
    changelog = read_arrow(view_tables(catalog.plans["ttl_extremes"], {}).changelog).to_pylist()
    assert {r["u"] for r in changelog if r["_op"] == "-D"} >= {"a", "b", None}  # each expired once at least
    changelog = read_arrow(view_tables(catalog.plans["ttl_extreme_top"], {}).changelog).to_pylist()
    assert {r["u"] for r in changelog if r["_op"] == "-D"} >= {"a", "b", None}
