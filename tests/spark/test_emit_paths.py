"""A keyed view's changelog computed on the driver (a small batch: runtime/emit.py's rule run by the Arrow engine)
equals the one Spark computes (the same rule run by the Spark engine): the same changelog rows and `_emit_index`es,
snapshot edit, key revisions, Z-set for the views downstream and counts, for random batches over keys with and
without revisions, NULL keys, NaN and -0.0; and a key that occurs twice is refused by both."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.errors import MvError
from mvengine.incremental.batch import Batch
from mvengine.incremental.state import StateStore
from mvengine.incremental.zset import MTIME, WEIGHT
from mvengine.project.catalog import load_catalog
from mvengine.runtime.emit import EMIT_STATE, REVISION, view_changes
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import read_arrow, write_table
from mvengine.storage.tables import TableRef
from tests.conftest import examples, write_project

SQL = """
CREATE TABLE t (k INT, s STRING, x DOUBLE, PRIMARY KEY (k) NOT ENFORCED);
CREATE MATERIALIZED VIEW v AS SELECT k, s, x FROM t;
"""
SCHEMA = "k int, s string, x double, _w long, _mtime timestamp"
KEYS = st.one_of(st.none(), st.integers(0, 6))
VALUES = st.tuples(st.sampled_from([None, "a", "b"]), st.sampled_from([None, 1.0, 2.5, 0.0, -0.0, math.nan]))
# Per key: the row it had (None: none), the row it has (None: none), its last revision (None: never emitted).
BATCHES = st.dictionaries(
    KEYS,
    st.tuples(
        st.one_of(st.none(), VALUES), st.one_of(st.none(), VALUES), st.one_of(st.none(), st.integers(0, 3))
    ),
    max_size=6,
)


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("emit")
    (root / "views").mkdir()
    (root / "views" / "v.sql").write_text(SQL)
    return load_catalog(load_config(root)).plans["v"]


@settings(max_examples=examples(12), deadline=None, suppress_health_check=list(HealthCheck))
@given(batch=BATCHES, duplicated=st.booleans())
def test_the_driver_changelog_equals_the_spark_one(spark, plan, tmp_path_factory, batch, duplicated):
    zset_rows, revisions = [], []
    when = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    for i, (k, (had, has, revision)) in enumerate(
        sorted(batch.items(), key=lambda e: (e[0] is None, e[0] or 0))
    ):
        if had is not None:
            zset_rows.append((k, *had, -1, when))
        if has is not None:
            zset_rows.append((k, *has, 1, when.replace(second=i)))
        if revision is not None:
            revisions.append({"k": k, REVISION: revision})
    if duplicated and zset_rows:
        zset_rows.append(zset_rows[0])
    zset = spark.createDataFrame(zset_rows, SCHEMA)
    outcomes = []
    for on_driver in (False, True):
        folder = tmp_path_factory.mktemp("state")
        write_table(
            pa.Table.from_pylist(revisions, pa.schema([("k", pa.int32()), (REVISION, pa.int64())])),
            TableRef(str(folder / EMIT_STATE)),
        )
        state = StateStore(spark, str(folder), {}, "v-0", 3, fresh=False, on_driver=on_driver)
        work = Batch(spark, {}, state)
        try:
            changes = view_changes(
                plan, zset, work, snapshot=TableRef(str(folder / "snapshot")), snapshot_before=4, batch_id=3
            )
            staged = {name: rows for name, rows, *_ in state._pending}
            outcomes.append(
                {
                    "changelog": _bag(changes.changelog),
                    "zset": _bag(changes.zset),
                    "rows": changes.rows,
                    "retractions": changes.retractions,
                    # (a key's first row at revision 0 is kept by no state row)
                    "revisions": _bag(staged[EMIT_STATE]) if EMIT_STATE in staged else [],
                    "upserts": None if changes.upserts is None else _bag(changes.upserts),
                    "inserts": _bag(changes.inserts),
                }
            )
        except MvError as e:
            outcomes.append(("refused", "is not unique in this batch" in str(e)))
        finally:
            work.release()
    spark_form, driver_form = outcomes
    assert driver_form == spark_form
    if isinstance(driver_form, dict):
        assert driver_form["rows"] == len(driver_form["changelog"])
    else:  # a refusal says why (a duplicated row may also cancel a retraction out, and pass)
        assert driver_form == ("refused", True) and duplicated


def _bag(rows) -> list[str]:
    """Rows (a DataFrame or an Arrow table) as a sorted list of reprs, timestamps in UTC, NaN equal to NaN."""
    listed = []
    for row in _arrow(rows).to_pylist():
        listed.append(
            repr(
                {c: _plain(v) for c, v in sorted(row.items()) if c not in (WEIGHT, MTIME, "_mtime")}
                | {"_w": row.get(WEIGHT), "_t": _instant(row.get(MTIME, row.get("_mtime")))}
            )
        )
    return sorted(listed)


def _plain(value):
    """Equal as Spark compares: NaN to NaN, -0.0 to 0.0 (Spark's grouping turns -0.0 into 0.0; the driver keeps
    the sign, as the view's SQL does)."""
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value + 0.0
    return value


def _instant(value):
    if value is None:
        return None
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


ONE_ROW_SQL = """
CREATE TABLE t (k INT, s STRING, x DOUBLE, PRIMARY KEY (k) NOT ENFORCED);
CREATE MATERIALIZED VIEW one AS SELECT count(*) AS n, max(x) AS top FROM t;
"""
ONE_ROW = st.tuples(st.integers(0, 3), st.sampled_from([None, 1.0, math.nan]))


@settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
@given(had=st.one_of(st.none(), ONE_ROW), has=st.one_of(st.none(), ONE_ROW), revision=st.integers(0, 3))
def test_a_view_of_one_row_counts_its_revisions_on_both_engines(spark, tmp_path_factory, had, has, revision):
    """A view without a key (a global aggregate) has one row, whose revisions `_emit_index` counts on both
    engines (the driver once numbered every revision 0 and kept none)."""
    root: Path = tmp_path_factory.mktemp("one")
    (root / "views").mkdir()
    (root / "views" / "one.sql").write_text(ONE_ROW_SQL)
    plan = load_catalog(load_config(root)).plans["one"]
    assert plan.key == ()
    when = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    rows = ([(*had, -1, when)] if had else []) + ([(*has, 1, when)] if has else [])
    zset = spark.createDataFrame(rows, "n bigint, top double, _w long, _mtime timestamp")
    outcomes = []
    for on_driver in (False, True):
        folder = tmp_path_factory.mktemp("state")
        write_table(
            pa.table({REVISION: pa.array([revision], pa.int64())}), TableRef(str(folder / EMIT_STATE))
        )
        state = StateStore(spark, str(folder), {}, "one-0", 3, fresh=False, on_driver=on_driver)
        work = Batch(spark, {}, state)
        try:
            changes = view_changes(
                plan, zset, work, snapshot=TableRef(str(folder / "snapshot")), snapshot_before=4, batch_id=3
            )
            staged = {name: _arrow(rows) for name, rows, *_ in state._pending}
            outcomes.append(
                {
                    "changelog": _bag(changes.changelog),
                    "indices": sorted(_arrow(changes.changelog).column("_emit_index").to_pylist()),
                    "kept": staged[EMIT_STATE].column(REVISION).to_pylist() if EMIT_STATE in staged else None,
                    "rows": changes.rows,
                    "in arrow": isinstance(changes.changelog, pa.Table),
                }
            )
        finally:
            work.release()
    spark_form, driver_form = outcomes
    assert not spark_form.pop("in arrow") and driver_form.pop("in arrow"), "each engine computed its own form"
    assert driver_form == spark_form
    changed = had != has and not (had and has and had[0] == has[0] and _plain(had[1]) == _plain(has[1]))
    assert spark_form["rows"] == (0 if not changed else (2 if had and has else 1))
    if changed:
        both = [revision, revision + 1] if had and has else [revision if had else revision + 1]
        assert spark_form["indices"] == both
        assert spark_form["kept"] == [revision + 1 if has else revision]


def _arrow(rows) -> pa.Table:
    return rows if isinstance(rows, pa.Table) else rows.toArrow()


POLICIES = {
    "driver": {},
    "spark": {"driver_max_changes": 0},
    # Spark's writes too: the bootstrap's key is checked by the snapshot's sorted write (emit._checked_on_write)
    "spark-writes": {"driver_max_changes": 0, "write_from_driver": 0},
}


@pytest.mark.parametrize("engine", list(POLICIES))
def test_revisions_through_refreshes_keep_only_the_revised_keys(spark, tmp_path, engine):
    """A bootstrap's rows are `+I` at revision 0 and keep no revision; a key updated, deleted and inserted again
    counts on from its implied 0 (1, then -D 1, then +I 2), and the state keeps the keys revised or removed
    only. A bootstrap over a key that occurs twice is refused on both engines, and writes nothing."""
    root = write_project(
        tmp_path,
        "CREATE TABLE t (k INT, x STRING, PRIMARY KEY (k) NOT ENFORCED);",
        "CREATE MATERIALIZED VIEW v AS SELECT k, x FROM t WHERE x <> 'skip';",
    )
    config = _with_policy(load_config(root), engine)
    catalog = load_catalog(config)
    reports = []
    refresher = Refresher(spark, config, catalog, report=reports.append)
    refresher.prepare_sources()
    source = TableRef(catalog.sources["t"].path)
    schema = "k int, x string"
    write_table(spark.createDataFrame([(1, "a"), (2, "b"), (3, "c"), (4, "skip")], schema), source)
    refresher.refresh()
    tables = view_tables(catalog.plans["v"], {})
    state = TableRef(f"{tables.state}/{EMIT_STATE}")
    assert [r.engine for r in reports if r.view == "v"] == [engine.split("-")[0]]
    assert not state.exists()  # every key at its first row
    DeltaTable(source.uri).update({"x": "'a2'"}, predicate="k = 1")
    refresher.refresh()
    DeltaTable(source.uri).delete("k = 2")
    refresher.refresh()
    write_table(spark.createDataFrame([(2, "b2"), (5, "e")], schema), source)
    refresher.refresh()
    logged = sorted(
        (r["k"], r["_version"], r["_op"], r["_emit_index"]) for r in read_arrow(tables.changelog).to_pylist()
    )
    assert logged == [
        (1, 0, "+I", 0),
        (1, 1, "+U", 1),
        (1, 1, "-U", 0),
        (2, 0, "+I", 0),
        (2, 2, "-D", 0),
        (2, 3, "+I", 1),
        (3, 0, "+I", 0),
        (5, 3, "+I", 0),
    ]
    assert sorted((r["k"], r[REVISION]) for r in read_arrow(state).to_pylist()) == [(1, 1), (2, 1)]
    assert {r.engine for r in reports if r.view == "v"} == {engine.split("-")[0]}

    duplicated = write_project(
        tmp_path / "twice",
        "CREATE TABLE t (k INT, x STRING, PRIMARY KEY (k) NOT ENFORCED);",
        "CREATE MATERIALIZED VIEW v AS SELECT k, x FROM t;",
    )
    config = _with_policy(load_config(duplicated), engine)
    catalog = load_catalog(config)
    refresher = Refresher(spark, config, catalog)
    refresher.prepare_sources()
    write_table(
        spark.createDataFrame([(1, "a"), (1, "b"), (2, "c")], schema), TableRef(catalog.sources["t"].path)
    )
    with pytest.raises(MvError, match=r"source t holds the key t.k=1 2 times at version 1.*wrote nothing"):
        refresher.refresh()
    assert not view_tables(catalog.plans["v"], {}).snapshot.exists()


def _with_policy(config, engine: str):
    return replace(config, policy=replace(config.policy, **POLICIES[engine]))
