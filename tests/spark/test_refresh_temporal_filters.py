"""Temporal filters, differentially: a WHERE that compares a row's time with NOW() reads NOW() as the batch's
clock, recorded by its snapshot commit. After random inserts, updates (moving a row's time) and deletes, and the
clock moved forward with no input changed, every view equals its SQL with NOW() replaced by the clock its latest
batch recorded, over the sources at the versions it records (check_snapshot), and its changelog replays to its
snapshot at every version; on the driver and in Spark by turns. The clock is the refresh's own, set by the test
(tests/conftest.py: RefreshClock, 12 s after BASE)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from mvengine.api import Project
from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.project.layout import last_commit, view_tables
from mvengine.runtime.refresh import BatchReport, Refresher
from mvengine.storage.api import read_arrow
from mvengine.storage.tables import TableRef
from tests.conftest import RefreshClock, refresh_settings
from tests.spark import test_refresh_differential as differential
from tests.spark.test_refresh_differential import refresh_steps
from tests.spark.test_refresh_interval_joins import apply as apply_rows

SOURCES = """
CREATE TABLE events (id INT NOT NULL, u STRING, ts TIMESTAMP, PRIMARY KEY (id) NOT ENFORCED);
CREATE TABLE flags (id INT NOT NULL, u STRING, PRIMARY KEY (id) NOT ENFORCED);
"""
VIEWS = """
-- the last ten seconds: a row leaves ten seconds after its time
CREATE MATERIALIZED VIEW tf_recent AS
SELECT id, u, ts FROM events WHERE ts > NOW() - INTERVAL '10' SECOND AND u IS NOT NULL;
-- rows enter when the clock reaches their time and leave five seconds later, counted per user
CREATE MATERIALIZED VIEW tf_open AS
SELECT u, COUNT(*) AS n, MAX(ts) AS latest FROM events
WHERE NOW() BETWEEN ts AND ts + INTERVAL '5' SECOND GROUP BY u;
-- a temporal filter on one side of a join (the planner moves it onto that side, under the join)
CREATE MATERIALIZED VIEW tf_joined AS
SELECT e.id, f.id AS flag FROM events e JOIN flags f ON e.u = f.u
WHERE e.ts + INTERVAL '3' SECOND >= CURRENT_TIMESTAMP;
-- ...and in a subquery in FROM
CREATE MATERIALIZED VIEW tf_joined_sub AS
SELECT e.id, f.id AS flag
FROM flags f JOIN (SELECT * FROM events WHERE ts BETWEEN NOW() - INTERVAL '4' SECOND AND NOW()) e ON e.u = f.u;
"""
BASE = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)
TIMES = st.one_of(
    st.none(),
    st.integers(0, 40).map(lambda s: BASE + dt.timedelta(seconds=s)),
    st.integers(0, 40_000).map(lambda ms: BASE + dt.timedelta(milliseconds=ms)),
)
ROW = st.tuples(st.integers(0, 8), st.sampled_from(["a", "b", None]), TIMES)
COMMIT = st.one_of(
    st.tuples(st.just("upsert events"), st.lists(ROW, min_size=1, max_size=5)),
    st.tuples(st.just("delete events"), st.lists(st.integers(0, 8), min_size=1, max_size=3)),
    st.tuples(st.just("upsert flags"), st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"])))),
    st.tuples(st.just("tick"), st.integers(0, 8_000)),  # the clock moves on, in milliseconds
)
STEPS = st.lists(st.lists(COMMIT, min_size=1, max_size=3), min_size=2, max_size=4)


def make_project(root: Path) -> Path:
    return differential.make_project(root, VIEWS, SOURCES)


def applier(clock: RefreshClock):
    """Commits as test_refresh_interval_joins applies them, and `tick`, which moves the clock on."""

    def apply(spark, catalog, commit) -> None:
        kind, payload = commit
        if kind == "tick":
            clock.now += payload * 1_000
        else:
            apply_rows(spark, catalog, commit)

    return apply


def _at(seconds: float) -> dt.datetime:
    return BASE + dt.timedelta(seconds=seconds)


@refresh_settings(1)
@given(steps=STEPS)
# Always run: rows at the filters' ends and a microsecond past them, NULL times and users, a row whose time moves
# back into the window, the clock moving with no input changed (rows leave, and rows enter), and a delete of a
# row that the clock already took out.
@example(
    steps=[
        [
            ("upsert events", [(1, "a", _at(3)), (2, "a", _at(12)), (3, None, _at(11)), (4, "b", None)]),
            ("upsert events", [(5, "b", _at(13)), (6, "a", _at(2.000001)), (7, "a", _at(20))]),
            ("upsert flags", [(0, "a"), (1, "b")]),
        ],
        [("tick", 1_500)],
        [("tick", 6_000)],
        [("delete events", [1, 5]), ("upsert events", [(2, "a", _at(19)), (8, "b", _at(7))]), ("tick", 0)],
        [("tick", 2_000)],
    ]
)
def test_temporal_filters_equal_their_sql_at_each_batch_clock(spark, tmp_path_factory, clock, steps):
    ran = refresh_steps(
        spark,
        make_project(tmp_path_factory.mktemp("temporal")),
        steps,
        all_incremental=True,
        apply=applier(clock),
    )
    assert {"stream/driver", "stream/spark"} <= set().union(*ran.values())


def test_the_clock_alone_retracts_rows_in_a_batch_of_its_own(spark, tmp_path, clock):
    root = make_project(tmp_path)
    catalog = load_catalog(load_config(root))
    assert "temporal filter" in catalog.plans["tf_recent"].state
    assert catalog.plans["tf_recent"].bounded_state
    rows = [("upsert events", [(1, "a", _at(10)), (2, "a", _at(14)), (3, "b", _at(30))])]
    refresh_steps(spark, root, [rows, [("tick", 9_000)], [("tick", 1_000)]], apply=applier(clock))
    recent = view_tables(catalog.plans["tf_recent"], {})
    last = last_commit(recent.snapshot)
    assert last is not None and last.clock == clock.now
    # batches: the bootstrap, the insert (1, 2 and 3 in), then the clock at 21 s (1 out) and at 22 s (none moves)
    assert sorted(read_arrow(recent.snapshot).column("id").to_pylist()) == [2, 3]
    changelog = read_arrow(recent.changelog)
    removed = [
        i
        for i, op in zip(changelog.column("id").to_pylist(), changelog.column("_op").to_pylist())
        if op == "-D"
    ]
    assert removed == [1]


def test_continuous_retracts_a_row_when_the_wall_clock_passes_it(spark, tmp_path):
    """`--continuous` wakes up when the clock passes a row's expiry, with no new commit (the machine's clock)."""
    config = load_config(make_project(tmp_path))
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    now = dt.datetime.now(dt.UTC)
    apply_rows(spark, catalog, ("upsert events", [(1, "a", now - dt.timedelta(seconds=8))]))  # 2 s left
    recent = view_tables(catalog.plans["tf_recent"], {})
    reports: list[BatchReport] = []
    stop = threading.Event()
    failure: list[BaseException] = []

    def keep_fresh() -> None:
        try:
            Project(config, spark=spark).refresh(
                interval_s=0.2, stopping=stop.is_set, on_batch=reports.append
            )
        except BaseException as e:  # reported by the test thread
            failure.append(e)

    runner = threading.Thread(target=keep_fresh, daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 60
        while not failure and time.monotonic() < deadline and not _ops(recent.changelog).count("-D"):
            time.sleep(0.2)
    finally:
        stop.set()
        runner.join(timeout=120)
    assert not failure, failure
    assert _ops(recent.changelog) == ["+I", "-D"]  # in by the commit, out by the clock alone
    assert read_arrow(recent.snapshot).num_rows == 0
    assert any(r.view == "tf_recent" and r.note.startswith("the clock passed") for r in reports)


def _ops(changelog: TableRef) -> list[str]:
    """The changelog's operations, in version order."""
    if not changelog.exists():
        return []
    log = read_arrow(changelog)
    return [op for _, op in sorted(zip(log.column("_version").to_pylist(), log.column("_op").to_pylist()))]
