"""Differential tests of refresh (DESIGN.md §1): after random inserts, updates and deletes on the sources and a
refresh, every view's snapshot equals its SQL run from scratch by Spark over its inputs at the versions the
snapshot's commit records; and replaying the changelog from empty gives the snapshot at every version.

The views cover every incremental operator (filter, projection, GROUP BY with each aggregate, HAVING, global
aggregate, DISTINCT, UNION ALL, a subquery in FROM, a view over a view) over a keyed source (updates and
deletes by key) and a bag source (duplicate rows, deletes by value, NULLs).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlglot
from deltalake import DeltaTable
from hypothesis import example, given
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.plan.time_bounds import at_clock
from mvengine.project.catalog import load_catalog
from mvengine.project.layout import source_table
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.runtime.refresh_plan import snapshot_columns_differ
from mvengine.storage.api import merge_into, read_arrow, read_table, write_table
from mvengine.storage.tables import TableRef, commit_metadata
from tests.conftest import oracle, refresh_settings

SOURCES = """
CREATE TABLE t (k INT NOT NULL, g STRING, v INT, PRIMARY KEY (k) NOT ENFORCED);
CREATE TABLE b (g STRING, v INT);
"""
VIEWS = """
-- filter + projection over a keyed source: keyed (upsert) changelog
CREATE MATERIALIZED VIEW v_proj AS SELECT k, g, v * 2 AS v2 FROM t WHERE v > 0 OR v IS NULL;
-- every aggregate over a source with updates and deletes (MIN/MAX from a multiset), with HAVING
CREATE MATERIALIZED VIEW v_agg AS
SELECT g, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS s, AVG(v) AS a, MIN(v) AS lo, MAX(v) AS hi,
       COUNT(DISTINCT v) AS dv, SUM(DISTINCT v) AS sdv
FROM t GROUP BY g HAVING COUNT(*) > 0;
-- a view over a view, aggregating an aggregate; and a global aggregate over a bag
CREATE MATERIALIZED VIEW v_chain AS SELECT n, COUNT(*) AS groups, MAX(s) AS top FROM v_agg GROUP BY n;
CREATE MATERIALIZED VIEW v_global AS SELECT COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM b;
-- DISTINCT over UNION ALL of a bag and a keyed source, and a bag view over a subquery in FROM
CREATE MATERIALIZED VIEW v_distinct AS
SELECT DISTINCT g, v FROM (SELECT g, v FROM b UNION ALL SELECT g, v FROM t WHERE k % 2 = 0) AS u;
CREATE MATERIALIZED VIEW v_bag AS SELECT s FROM (SELECT g, SUM(v) AS s FROM b GROUP BY g) AS x WHERE s > 0
UNION ALL SELECT v AS s FROM b WHERE g = 'a';
"""

HANDED = "finished on the driver"  # (the note of a Spark bootstrap handed to the driver)
GROUPS = st.sampled_from(["a", "b", "c", None])
VALUES = st.one_of(st.none(), st.integers(-3, 5))
KEYS = st.integers(0, 6)
COMMIT = st.one_of(
    st.tuples(st.just("upsert_t"), st.lists(st.tuples(KEYS, GROUPS, VALUES), min_size=1, max_size=4)),
    st.tuples(st.just("delete_t"), st.lists(KEYS, min_size=1, max_size=3)),
    st.tuples(st.just("insert_b"), st.lists(st.tuples(GROUPS, VALUES), min_size=1, max_size=5)),
    st.tuples(st.just("delete_b"), st.tuples(GROUPS, VALUES)),
)
# A step is a few commits (possibly none: an empty batch) followed by a refresh.
STEPS = st.lists(st.lists(COMMIT, max_size=3), min_size=2, max_size=3)


def make_project(root: Path, views: str = VIEWS, sources: str = SOURCES) -> Path:
    """A project of two files: views/sources.sql and views/views.sql (by default, this module's)."""
    (root / "views").mkdir(parents=True)
    (root / "views" / "sources.sql").write_text(sources)
    (root / "views" / "views.sql").write_text(views)
    return root


def apply_commit(spark, catalog, commit, options: dict[str, str] | None = None) -> None:
    """Commit one change to a source of SOURCES, written from Arrow by delta-rs (a Spark write of a few rows
    costs about ten times as much; tests of Spark's own writer are in test_refresh_interop)."""
    kind, payload = commit
    options = options or {}
    t = TableRef(catalog.sources["t"].path, options)
    b = TableRef(catalog.sources["b"].path, options)
    if kind == "upsert_t":
        latest = {k: (k, g, v) for k, g, v in payload}  # one row per key in a MERGE
        merge_into(source_rows(catalog.sources["t"].schema, latest.values()), t, ["k"])
    elif kind == "delete_t":
        gone = catalog.sources["t"].schema.append(pa.field("gone", pa.bool_()))
        rows = [(k, None, None, True) for k in sorted(set(payload))]
        merge_into(source_rows(gone, rows), t, ["k"], delete_column="gone")
    elif kind == "insert_b":
        write_table(source_rows(catalog.sources["b"].schema, payload), b)
    else:
        g, v = payload
        DeltaTable(b.uri, storage_options=options or None).delete(
            " AND ".join(
                ["g IS NULL" if g is None else f"g = '{g}'", "v IS NULL" if v is None else f"v = {v}"]
            )
        )


def source_rows(schema: pa.Schema, rows) -> pa.Table:
    """Rows given as tuples, in the order of `schema`'s columns, as an Arrow table of that schema."""
    return pa.Table.from_pylist([dict(zip(schema.names, row)) for row in rows], schema=schema)


def check_view(spark, catalog, name: str, options: dict[str, str] | None = None) -> None:
    """The promise of DESIGN.md §1 for the view's latest snapshot, and changelog replay at every version."""
    with oracle():
        check_snapshot(spark, catalog, name, options)
        check_changelog(spark, catalog, name, options)


# Per view table (its snapshot's URI and table id): the versions already checked and the changelog replayed
# up to there, as a bag. Each check replays only the versions added since (issue 36: replaying every version
# from empty at every step cost Spark jobs growing with the square of the steps).
_REPLAYED: dict[tuple[str, str, tuple[str, ...]], tuple[int, Counter]] = {}


def check_changelog(spark, catalog, name: str, options: dict[str, str] | None = None) -> None:
    """The view's changelog, replayed from empty, gives its snapshot at every version (read by delta-rs, in
    Arrow: no Spark job)."""
    plan = catalog.plans[name]
    tables = view_tables(plan, options or {})
    dt = tables.snapshot.open()
    # (a view redefined with other columns has its changelog's rows in them: replayed anew)
    key = (tables.snapshot.uri, dt.metadata().id, tuple(f"{c.name} {c.type.sql()}" for c in plan.columns))
    checked, replayed = _REPLAYED.get(key, (-1, Counter()))
    latest = dt.version()
    if latest <= checked:
        return
    columns = [c.name for c in plan.columns]
    log = read_arrow(tables.changelog)
    log = log.filter(pc.greater(log.column("_version"), checked)) if log.num_rows else log
    versions = log.column("_version").to_pylist()
    ops = log.column("_op").to_pylist()
    rows = list(zip(*[_comparable(log.column(c)) for c in columns])) if columns else [()] * log.num_rows
    by_version: dict[int, list[tuple[str, tuple]]] = {}
    for version, op, row in zip(versions, ops, rows):
        by_version.setdefault(version, []).append((op, row))
    for version in range(checked + 1, latest + 1):
        for op, row in by_version.get(version, []):
            replayed[row] += 1 if op in ("+I", "+U") else -1
        removed = [row for row, n in replayed.items() if n < 0]
        assert not removed, f"{name}: changelog version {version} removes rows it never added: {removed[:3]}"
        replayed = Counter({row: n for row, n in replayed.items() if n})
        snapshot = read_arrow(tables.snapshot, version=version)
        if snapshot.schema.names != columns:  # a version of the view's earlier definition, in other columns
            continue
        expected = (
            Counter(zip(*[_comparable(snapshot.column(c)) for c in columns]))
            if columns
            else Counter({(): snapshot.num_rows} if snapshot.num_rows else {})
        )
        assert replayed == expected, (
            f"{name}: changelog replay differs from snapshot version {version}: "
            f"{sorted(map(str, (replayed - expected).elements()))[:5]} too many, "
            f"{sorted(map(str, (expected - replayed).elements()))[:5]} missing"
        )
    _REPLAYED[key] = (latest, replayed)


def _comparable(column) -> list:
    """A column's values as hashable Python values with NaN equal to NaN (repr), lists as tuples."""

    def value(v):
        if isinstance(v, float) and v != v:
            return "NaN"
        if isinstance(v, list):
            return tuple(value(x) for x in v)
        if isinstance(v, dict):
            return tuple(sorted((k, value(x)) for k, x in v.items()))
        return v

    return [value(v) for v in column.to_pylist()]


def check_snapshot(spark, catalog, name: str, options: dict[str, str] | None = None) -> None:
    """The view's latest snapshot equals its SQL run by Spark over its inputs at the versions it records (one
    Spark job; the snapshot read by delta-rs)."""
    plan = catalog.plans[name]
    options = options or {}
    tables = view_tables(plan, options)
    dt = tables.snapshot.open()
    inputs = json.loads(commit_metadata(dt, dt.version())["mvengine.inputs"])
    for input_name, version in inputs.items():
        ref = (  # (a source is its declared columns: one another writer added is not the view's)
            source_table(catalog.sources[input_name], options)
            if input_name in catalog.sources
            else view_tables(catalog.plans[input_name], options).snapshot
        )
        read_table(spark, ref, version=version).createOrReplaceTempView(input_name)
    # (the snapshot has the plan's columns in their types: a rebuild would otherwise rewrite the view's tables)
    assert not snapshot_columns_differ(plan, dt), (
        f"{name}: {dt.schema().to_arrow()} is not the plan's columns"
    )
    snapshot = read_arrow(tables.snapshot, version=dt.version())
    sql, clock = plan.spark_sql, commit_metadata(dt, dt.version()).get("mvengine.clock")
    if clock is not None:  # a temporal filter: NOW() is what the batch read it as
        sql = at_clock(sqlglot.parse_one(sql, read="spark"), int(clock)).sql("spark")
    _assert_equal(name, "its SQL", snapshot, spark.sql(sql).toArrow())
    view = catalog.views[name]
    if view.rewrites:
        # The project rewrote its query (scalar subqueries made joins, project/scalar_subqueries.py): the snapshot
        # must also equal the SQL as the user wrote it, over the sources it reflects.
        for source, version in _source_versions(catalog, name, dt.version(), options).items():
            ref = source_table(catalog.sources[source], options)
            read_table(spark, ref, version=version).createOrReplaceTempView(source)
        written = sqlglot.parse_one(view.text, read="spark").expression.sql("spark")
        _assert_equal(name, "its SQL as written", snapshot, spark.sql(written).toArrow())


def _assert_equal(name: str, what: str, snapshot: pa.Table, expected: pa.Table) -> None:
    ours = Counter(zip(*[_comparable(c) for c in snapshot.columns])) if snapshot.num_columns else Counter()
    theirs = Counter(zip(*[_comparable(c) for c in expected.columns])) if expected.num_columns else Counter()
    assert ours == theirs, (
        f"{name} differs from {what}: {sorted(map(str, (ours - theirs).elements()))[:5]} "
        f"too many, {sorted(map(str, (theirs - ours).elements()))[:5]} missing"
    )


def _source_versions(catalog, name: str, version: int, options: dict[str, str]) -> dict[str, int]:
    """The version of each source the view's snapshot at `version` reflects, through the views it reads (one
    per source: a refresh takes a consistent cut)."""
    if name in catalog.sources:
        return {name: version}
    dt = view_tables(catalog.plans[name], options).snapshot.open()
    found: dict[str, int] = {}
    for upstream, upstream_version in json.loads(commit_metadata(dt, version)["mvengine.inputs"]).items():
        for source, v in _source_versions(catalog, upstream, upstream_version, options).items():
            assert found.setdefault(source, v) == v, f"{name}@{version} reflects two versions of {source}"
    return found


def refresh_steps(
    spark,
    root: Path,
    steps,
    *,
    all_incremental: bool = False,
    check=None,
    apply=None,
    engines: tuple[str, ...] = ("driver", "spark"),
    policy: dict[str, float] | None = None,
) -> dict[str, set[str]]:
    """Refresh the project, then per step: apply its commits, refresh, and check every view (`check`, by
    default check_view). The steps that commit something take the engines of `engines` by turns: "driver"
    (small batches on the driver, where the view allows) and "spark" (`driver_max_changes = 0`), so that every
    differential test runs both, each going on from the state the other left (issue 35). With
    `all_incremental`, first check that every view is planned incremental. Returns, per view, the kinds and
    engines of its batches ("stream/spark": the delta rule in Spark; "bootstrap/handed to the driver": a Spark
    bootstrap finished on the driver, incremental/hand_off.py). `apply(spark, catalog, commit)` commits a
    step's change (default apply_commit, for the sources of SOURCES). `policy`: thresholds of the project's
    execution policy to set (mvengine/policy.py), beyond what its config says."""
    config = load_config(root)
    config = replace(config, policy=replace(config.policy, **(policy or {})))
    catalog = load_catalog(config)
    if all_incremental:
        assert {n: p.strategy for n, p in catalog.plans.items()} == {n: "incremental" for n in catalog.plans}
    ran: dict[str, set[str]] = {}
    in_spark = replace(config, policy=replace(config.policy, driver_max_changes=0))
    refreshers = {
        engine: Refresher(
            spark,
            in_spark if engine == "spark" else config,
            catalog,
            report=lambda r: ran.setdefault(r.view, set()).update(
                [f"{r.kind}/{r.engine}"] + ([f"{r.kind}/handed to the driver"] if HANDED in r.note else [])
            ),
        )
        for engine in ("driver", "spark")
    }
    refresher = refreshers["driver"]
    refresher.refresh()
    turn = 0
    for commits in steps:
        for commit in commits:
            (apply or apply_commit)(spark, catalog, commit)
        if commits:
            refresher = refreshers[engines[turn % len(engines)]]
            turn += 1
        refresher.refresh()
        with oracle():
            for name in catalog.plans:
                (check or check_view)(spark, catalog, name)
    return ran


# Each example refreshes six views a few times: few examples.
@refresh_settings(2)
@given(steps=STEPS)
# Always run: duplicates and NULLs, rows deleted in the batch that inserted them, several commits per batch,
# an update that moves a row between groups and out of the filter, and an empty batch.
@example(
    steps=[
        [
            ("insert_b", [("a", 1), ("a", 1), (None, None), ("b", 2)]),
            ("delete_b", ("a", 1)),
            ("upsert_t", [(1, "a", 3), (2, "a", 3), (3, None, None)]),
            ("delete_t", [2]),
        ],
        [],
        [
            ("upsert_t", [(1, "b", -1)]),
            ("insert_b", [("a", 1)]),
            ("delete_b", (None, None)),
            ("delete_t", [3]),
        ],
    ]
)
def test_snapshots_equal_their_sql_after_random_changes(spark, tmp_path_factory, steps):
    refresh_steps(spark, make_project(tmp_path_factory.mktemp("diff")), steps)


@pytest.mark.parametrize("name", ["v_proj", "v_agg", "v_global", "v_distinct", "v_bag"])
def test_every_view_is_maintained_incrementally(tmp_path, name):
    catalog = load_catalog(load_config(make_project(tmp_path)))
    assert catalog.plans[name].strategy == "incremental", catalog.plans[name].reason


@pytest.mark.parametrize(
    "policy, bootstrap",
    [
        ({}, "bootstrap/driver"),
        ({"driver_max_changes": 0}, "bootstrap/spark"),
        ({"driver_max_changes": 0, "write_from_driver": 0}, "bootstrap/spark"),
        ({"driver_max_changes": 1}, "bootstrap/spark"),
    ],
    ids=["driver", "spark", "spark-writes", "spark-hand-off"],
)
def test_a_bootstrap_over_rows_gives_the_views_on_either_engine(spark, tmp_path, policy, bootstrap):
    """A bootstrap over rows already there: on the driver (the inputs are few: runtime/recompute.py), in Spark
    (driver_max_changes 0), in Spark with Spark's writes and checkpoints (inputs above the policy's
    write_from_driver, here 0; a small Spark bootstrap collects its results and writes them with delta-rs), and
    in Spark finished on the driver (inputs above driver_max_changes, here 1: the views whose top rule keeps
    state go on in Arrow from what it keeps, incremental/hand_off.py). Each view equals its SQL, and so do the
    batches that go on from that state."""
    root = make_project(tmp_path)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).prepare_sources()
    apply_commit(spark, catalog, ("upsert_t", [(1, "a", 3), (2, "b", -1), (3, None, None), (4, "a", 3)]))
    apply_commit(spark, catalog, ("insert_b", [("a", 1), ("a", 1), (None, None), ("b", -2)]))
    steps = [
        [("delete_b", ("a", 1)), ("upsert_t", [(2, "a", 5)])],
        [("delete_t", [1]), ("insert_b", [("b", 7)])],
    ]
    if policy.get("write_from_driver") == 0:  # (every write a Spark job: the same changes in one batch)
        steps = [[commit for step in steps for commit in step]]
    engines = refresh_steps(spark, root, steps, policy=policy)  # the bootstrap, then a batch on each engine
    assert all(bootstrap in kinds for kinds in engines.values()), engines
    expected = {"v_agg", "v_chain", "v_global", "v_distinct"} if policy.get("driver_max_changes") else set()
    handed = {view for view, kinds in engines.items() if "bootstrap/handed to the driver" in kinds}
    assert handed == expected
    # (later batches above driver_max_changes too: the driver reads their state through delta-rs)
    handed = {view for view, kinds in engines.items() if "stream/handed to the driver" in kinds}
    assert handed == expected, engines
