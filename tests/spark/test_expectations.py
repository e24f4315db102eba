"""Expectations (CONSTRAINT ... EXPECT): how they are declared, and what DROP ROW does to the views.

The differential test: after random inserts, updates and deletes on sources that drop rows, every view equals
its SQL over the sources without the rows their expectations fail (and, for a view with expectations of its
own, without its own failing rows); a correction of a dropped row is applied as if the row had never been
there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given

from mvengine.config import load_config
from mvengine.errors import SqlError
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import view_tables
from mvengine.sql.files import split_statements
from mvengine.storage.api import read_table
from mvengine.storage.tables import TableRef, commit_metadata
from tests.conftest import bag, refresh_settings, write_project
from tests.spark.test_refresh_differential import STEPS, check_changelog, refresh_steps

SOURCES = """
CREATE TABLE t (k INT NOT NULL, g STRING, v INT, PRIMARY KEY (k) NOT ENFORCED,
                CONSTRAINT v_not_two EXPECT (v <> 2) ON VIOLATION DROP ROW,
                CONSTRAINT known_group EXPECT COLUMN g VALUES IN ('a', 'b'));
CREATE TABLE b (g STRING, v INT, CONSTRAINT has_group EXPECT COLUMN g NOT NULL ON VIOLATION DROP ROW);
"""
VIEWS = """
CREATE MATERIALIZED VIEW by_group AS SELECT g, COUNT(*) AS n, SUM(v) AS s FROM t GROUP BY g;
CREATE MATERIALIZED VIEW joined AS SELECT t.k, b.v AS bv FROM t JOIN b ON t.g = b.g;
CREATE MATERIALIZED VIEW small_groups (CONSTRAINT few EXPECT (n < 3) ON VIOLATION DROP ROW) AS
SELECT g, n FROM by_group;
"""
# What a good row of each table satisfies, written here as the oracle (a NULL predicate passes).
KEPT = {"t": "v IS NULL OR v <> 2", "b": "g IS NOT NULL", "small_groups": "n IS NULL OR n < 3"}
CRASH_KEPT = {"b": "v IS NULL OR v > 0", "per_group": "n IS NULL OR n < 3"}


def make_project(root: Path) -> Path:
    return write_project(root, SOURCES, VIEWS)


def check_without_failing_rows(spark, catalog, name: str, kept: dict[str, str] = KEPT) -> None:
    """The view's snapshot equals its SQL over its inputs (at the versions it records) without their failing
    rows (`kept`: what a good row of each table satisfies), less its own failing rows; and its changelog
    replays to it."""
    plan = catalog.plans[name]
    tables = view_tables(plan, {})
    dt = tables.snapshot.open()
    for input_name, version in json.loads(commit_metadata(dt, dt.version())["mvengine.inputs"]).items():
        ref = (
            TableRef(catalog.sources[input_name].path)
            if input_name in catalog.sources
            else view_tables(catalog.plans[input_name], {}).snapshot
        )
        rows = read_table(spark, ref, version=version)
        (rows.where(kept[input_name]) if input_name in catalog.sources else rows).createOrReplaceTempView(
            input_name
        )
    expected = spark.sql(plan.spark_sql)
    if name in kept:
        expected = expected.where(kept[name])
    assert bag(read_table(spark, tables.snapshot)) == bag(expected), f"{name} differs from its SQL"
    check_changelog(spark, catalog, name)


@refresh_settings(1)
@given(steps=STEPS)
# Always run: a dropped row corrected by an update (and one updated into failing), a dropped row deleted, bag
# rows without a group inserted and deleted, a group pushed past the view's own expectation and back.
@example(
    steps=[
        [
            ("upsert_t", [(1, "a", 2), (2, "a", 1), (3, "b", 2)]),
            ("insert_b", [("a", 5), (None, 1), (None, 1)]),
        ],
        [("upsert_t", [(1, "a", 3), (2, "a", 2), (4, "a", 0)]), ("delete_t", [3]), ("delete_b", (None, 1))],
        [("upsert_t", [(5, "a", 1), (2, "b", 4)]), ("delete_t", [1])],
    ]
)
def test_views_equal_their_sql_over_the_rows_expectations_keep(spark, tmp_path_factory, steps):
    refresh_steps(
        spark,
        make_project(tmp_path_factory.mktemp("expect")),
        steps,
        all_incremental=True,
        check=check_without_failing_rows,
    )


def test_plan_shows_the_rows_it_drops(tmp_path):
    catalog = load_catalog(load_config(make_project(tmp_path)))
    assert (
        "without the rows of t its DROP ROW / QUARANTINE expectations fail (keeps COALESCE(v <> 2, TRUE))"
        in catalog.plans["by_group"].notes
    )
    assert catalog.plans["by_group"].drops == ("t: COALESCE(v <> 2, TRUE)",)
    assert catalog.plans["small_groups"].drops == ("small_groups: COALESCE(n < 3, TRUE)",)
    assert catalog.plans["joined"].drops == ("t: COALESCE(v <> 2, TRUE)", "b: NOT g IS NULL")
    assert [e.name for e in catalog.sources["t"].expectations] == ["v_not_two", "known_group"]


def test_declarations_are_read_with_their_places():
    sql = (
        "CREATE TABLE o (id BIGINT, price INT, status STRING,\n"
        "  CONSTRAINT positive EXPECT (price > 0) ON VIOLATION QUARANTINE,\n"
        "  CONSTRAINT one_per_id EXPECT UNIQUE (id) ON VIOLATION FAIL UPDATE,\n"
        "  CONSTRAINT sized EXPECT ROW COUNT BETWEEN 1 AND 10,\n"
        "  CONSTRAINT known EXPECT COLUMN status VALUES IN ('new', 'paid', -1),\n"
        "  PRIMARY KEY (id) NOT ENFORCED);\n"
        "CREATE MATERIALIZED VIEW v (n, CONSTRAINT named EXPECT COLUMN n NOT NULL) AS SELECT id FROM o;\n"
    )
    source, view = split_statements(sql, "f.sql")
    assert source.tree.sql("spark") == (
        "CREATE TABLE o (id BIGINT, price INT, status STRING, PRIMARY KEY (id) NOT ENFORCED)"
    )
    assert [(e.name, e.kind, e.on_violation, e.line, e.col) for e in source.expectations] == [
        ("positive", "predicate", "QUARANTINE", 2, 3),
        ("one_per_id", "unique", "FAIL UPDATE", 3, 3),
        ("sized", "row_count", "WARN", 4, 3),
        ("known", "values_in", "WARN", 5, 3),
    ]
    assert source.expectations[2].low == 1 and source.expectations[2].high == 10
    assert source.expectations[3].values == ("new", "paid", -1)
    assert view.tree.sql("spark") == "CREATE MATERIALIZED VIEW v (n) AS SELECT id FROM o"
    assert view.expectations[0].condition.sql("spark") == "NOT n IS NULL"


@pytest.mark.parametrize(
    "element, message, col",
    [
        (
            "CONSTRAINT u EXPECT UNIQUE (a) ON VIOLATION DROP ROW",
            "u: ON VIOLATION DROP ROW needs a row to act on",
            24,
        ),
        ("CONSTRAINT p EXPECT (a > )", "p: cannot read 'a >'", 24),
        ("CONSTRAINT s EXPECT COLUMN a VALUES IN (b)", "s: VALUES IN takes literal values", 63),
        ("CONSTRAINT p EXPECT (a > 0) ON VIOLATION IGNORE", "p: cannot read 'ON VIOLATION IGNORE'", 52),
        (
            "CONSTRAINT r EXPECT ROW COUNT BETWEEN 5 AND 1",
            "r: ROW COUNT BETWEEN 5 AND 1: the bounds are the wrong way",
            62,
        ),
        ("CONSTRAINT p EXPECT (1 > 0)", "p: the predicate reads no column", 24),
        ("CONSTRAINT p EXPECT COLUMN a", "p: cannot read 'COLUMN a'", 44),
    ],
)
def test_a_mistake_in_a_declaration_is_located(element, message, col):
    with pytest.raises(SqlError) as e:
        split_statements(f"CREATE TABLE t (a INT, {element})", "f.sql")
    assert e.value.line == 1 and e.value.col == col and message in str(e.value)


@pytest.mark.parametrize(
    "views, message",
    [
        (
            "CREATE TABLE s (a INT, CONSTRAINT p EXPECT (b > 0));",
            "source s: expectation p reads unknown column 'b'",
        ),
        (
            "CREATE TABLE s (a INT, CONSTRAINT p EXPECT (a > 0), CONSTRAINT P EXPECT (a < 9));",
            "expectation 'P' is declared twice",
        ),
        (
            "CREATE TABLE s (a INT); CREATE MATERIALIZED VIEW v (CONSTRAINT p EXPECT COLUMN x NOT NULL) AS SELECT a "
            "FROM s;",
            "view v: expectation p reads unknown column 'x'",
        ),
    ],
)
def test_an_expectation_on_an_unknown_column_is_an_error(tmp_path, views, message):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "v.sql").write_text(views)
    with pytest.raises(SqlError, match=message):
        load_catalog(load_config(tmp_path))


OUTCOME_SOURCES = """
CREATE TABLE o (id INT NOT NULL, price INT, status STRING, PRIMARY KEY (id) NOT ENFORCED,
                CONSTRAINT positive EXPECT (price > 0) ON VIOLATION QUARANTINE,
                CONSTRAINT known EXPECT COLUMN status VALUES IN ('new', 'paid'),
                CONSTRAINT short EXPECT (length(status) < 5) ON VIOLATION DROP ROW,
                CONSTRAINT one_per_id EXPECT UNIQUE (id));
"""
OUTCOME_VIEWS = """
CREATE MATERIALIZED VIEW per_status (CONSTRAINT small EXPECT (total <= 10) ON VIOLATION QUARANTINE,
                                     CONSTRAINT few_statuses EXPECT ROW COUNT BETWEEN 0 AND 2) AS
SELECT status, SUM(price) AS total FROM o GROUP BY status;
"""


def outcome_project(root: Path, conf: str = "") -> Path:
    return write_project(root, OUTCOME_SOURCES, OUTCOME_VIEWS, f"[refresh]\n{conf}")


def committed_outcomes(ref) -> dict[str, tuple[int, int, int, int]]:
    dt = ref.open()
    found = json.loads(commit_metadata(dt, dt.version()).get("mvengine.expectations", "[]"))
    return {
        f"{o['table']}.{o['expectation']}": (o["checked"], o["failed"], o["dropped"], o["quarantined"])
        for o in found
    }


@pytest.mark.parametrize("conf", ["", "driver_max_changes = 0"], ids=["driver", "spark"])
def test_outcomes_are_counted_committed_and_quarantined(spark, tmp_path, conf):
    import pyarrow as pa
    from deltalake import write_deltalake

    from mvengine.project.layout import source_quarantine
    from mvengine.runtime.refresh import Refresher

    config = load_config(outcome_project(tmp_path, conf))
    catalog = load_catalog(config)
    lines: list[str] = []
    refresher = Refresher(spark, config, catalog, report=lambda r: lines.append(r.line()))
    refresher.refresh()  # the empty source: nothing to check
    source = catalog.sources["o"].path
    schema = pa.schema([("id", pa.int32(), False), ("price", pa.int32()), ("status", pa.string())])
    write_deltalake(
        source,
        pa.table(
            {
                "id": [1, 2, 3, 4, 5],
                "price": [4, -1, None, 3, 9],
                "status": ["new", "new", "paid", "lost", "xyzzy"],
            },
            schema=schema,
        ),
        mode="append",
    )
    refresher.refresh()
    tables = view_tables(catalog.plans["per_status"], {})
    assert committed_outcomes(tables.snapshot) == {
        "o.positive": (5, 1, 1, 1),
        "o.known": (5, 2, 0, 0),
        "o.short": (5, 1, 1, 0),
        "o.one_per_id": (5, 0, 0, 0),
        "per_status.small": (3, 0, 0, 0),
        "per_status.few_statuses": (3, 1, 0, 0),
    }
    assert (
        "expectations: o.positive 1 of 5 failed (QUARANTINE), o.known 2 of 5 failed (WARN), o.short 1 of 5 "
        "failed (DROP ROW)" in lines[-1]
    )
    # id 2 (price -1) is quarantined and dropped, id 5 (status too long) dropped; 'new' sums to 4, 'paid' to
    # nothing (NULL passes), 'lost' to 3; then 'new' grows past 10 and is quarantined from the view.
    assert sorted(map(tuple, read_table(spark, tables.snapshot).collect()), key=repr) == [
        ("lost", 3),
        ("new", 4),
        ("paid", None),
    ]
    quarantined = read_table(spark, source_quarantine(config.warehouse, "o", {})).collect()
    assert [(r.id, r._expectation, r._version) for r in quarantined] == [(2, "positive", 1)]
    write_deltalake(
        source, pa.table({"id": [6], "price": [7], "status": ["new"]}, schema=schema), mode="append"
    )
    refresher.refresh()
    assert sorted(map(tuple, read_table(spark, tables.snapshot).collect()), key=repr) == [
        ("lost", 3),
        ("paid", None),
    ]
    view_quarantine = read_table(spark, tables.quarantine).collect()
    assert [(r.status, r.total, r._expectation) for r in view_quarantine] == [("new", 11, "small")]
    assert committed_outcomes(tables.snapshot)["o.positive"] == (1, 0, 0, 0)
    assert committed_outcomes(tables.snapshot)["per_status.small"][:2] == (1, 1)
    assert committed_outcomes(tables.snapshot)["per_status.few_statuses"][:2] == (2, 0)  # 'new' left the view
    # Refreshing again with nothing new writes no second copy of the quarantined rows.
    refresher.refresh(full=True)
    assert read_table(spark, source_quarantine(config.warehouse, "o", {})).count() == 1
    # mv describe and mv history say where the quarantine is and what each batch found.
    from mvengine import Project

    project = Project.open(tmp_path, spark=spark)
    source, view = project.describe("o"), project.describe("per_status")
    assert source["quarantine_path"].endswith("warehouse/_quarantine/o") and source["quarantined_rows"] == 1
    assert [(e["name"], e["on_violation"]) for e in source["expectations"]] == [
        ("positive", "QUARANTINE"),
        ("known", "WARN"),
        ("short", "DROP ROW"),
        ("one_per_id", "WARN"),
    ]
    assert (
        source["expectations"][0]["declared"]
        == "CONSTRAINT positive EXPECT (price > 0) ON VIOLATION QUARANTINE"
    )
    assert view["quarantine_path"].endswith("per_status/quarantine") and view["quarantined_rows"] == 1
    assert {o["expectation"] for o in view["last_batch_expectations"]} == {
        "positive",
        "known",
        "short",
        "one_per_id",
        "small",
        "few_statuses",
    }
    history = project.history("per_status")
    assert [o["failed"] for o in history[1]["expectations"] if o["expectation"] == "positive"] == [1]


def test_fail_update_commits_nothing_and_names_the_rows(spark, tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from mvengine.runtime.expectations import ExpectationFailed
    from mvengine.runtime.refresh import Refresher

    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "v.sql").write_text("""
CREATE TABLE early (x INT);
CREATE MATERIALIZED VIEW early_count AS SELECT COUNT(*) AS n FROM early;
CREATE TABLE s (k INT, v INT, CONSTRAINT positive EXPECT (v > 0) ON VIOLATION FAIL UPDATE,
                CONSTRAINT sized EXPECT ROW COUNT BETWEEN 0 AND 3 ON VIOLATION FAIL UPDATE);
CREATE MATERIALIZED VIEW total AS SELECT SUM(v) AS v FROM s;
CREATE MATERIALIZED VIEW counted (CONSTRAINT few EXPECT (n < 3) ON VIOLATION FAIL UPDATE) AS
SELECT COUNT(*) AS n FROM s;
""")
    config = load_config(tmp_path)
    catalog = load_catalog(config)
    refresher = Refresher(spark, config, catalog)
    refresher.refresh()
    source = catalog.sources["s"].path
    schema = pa.schema([("k", pa.int32()), ("v", pa.int32())])
    write_deltalake(source, pa.table({"k": [1], "v": [5]}, schema=schema), mode="append")
    refresher.refresh()
    versions = {n: view_tables(p, {}).snapshot.open().version() for n, p in catalog.plans.items()}
    # A batch that moves both sources: the view of the other one, first in the DAG, does not move either.
    write_deltalake(catalog.sources["early"].path, pa.table({"x": pa.array([1], pa.int32())}), mode="append")
    write_deltalake(source, pa.table({"k": [2, 3], "v": [-4, 0]}, schema=schema), mode="append")
    assert catalog.order.index("early_count") < catalog.order.index("total")
    with pytest.raises(ExpectationFailed) as e:
        refresher.refresh()
    assert (
        "expectation positive (ON VIOLATION FAIL UPDATE) of source s (versions 2 to 2) failed: 2 of 2 rows"
        in str(e.value)
        and "'v': -4" in str(e.value)
    )
    assert {n: view_tables(p, {}).snapshot.open().version() for n, p in catalog.plans.items()} == versions
    from mvengine.cli.main import main

    assert main(["--project", str(tmp_path), "validate", "s"]) == 1  # the next refresh would stop on it
    write_deltalake(source, pa.table({"k": [4], "v": [1]}, schema=schema), mode="overwrite")  # fixed
    refresher.refresh()
    assert read_table(spark, view_tables(catalog.plans["total"], {}).snapshot).collect()[0].v == 1
    write_deltalake(source, pa.table({"k": [5, 6], "v": [1, 1]}, schema=schema), mode="append")
    with pytest.raises(ExpectationFailed, match="expectation few .* of view counted"):
        refresher.refresh()
    assert read_table(spark, view_tables(catalog.plans["counted"], {}).snapshot).collect()[0].n == 1


REPLAY_SOURCES = """
CREATE TABLE keyed (k INT NOT NULL, v INT, PRIMARY KEY (k) NOT ENFORCED,
                    CONSTRAINT positive EXPECT (v > 0) ON VIOLATION QUARANTINE,
                    CONSTRAINT small EXPECT (v < 100));
CREATE TABLE events (k INT, v INT, CONSTRAINT named EXPECT (length(CAST(k AS STRING)) < 3) ON VIOLATION QUARANTINE);
"""
REPLAY_VIEWS = """
CREATE MATERIALIZED VIEW keyed_total AS SELECT SUM(v) AS v, COUNT(*) AS n FROM keyed;
CREATE MATERIALIZED VIEW events_by_k AS SELECT k, SUM(v) AS v FROM events GROUP BY k;
"""


def test_quarantine_then_replay_gives_the_view_a_clean_source_gives(spark, tmp_path, capsys):
    """Bad rows are quarantined; repaired in the quarantine table and replayed, they reach the views as if the
    source had been written clean (a keyed source: upserted over the bad row; an append source: appended)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from mvengine.cli.main import main
    from mvengine.project.layout import source_quarantine
    from mvengine.runtime.quarantine import replay

    root = write_project(tmp_path, REPLAY_SOURCES, REPLAY_VIEWS)
    config = load_config(root)
    catalog = load_catalog(config)
    from mvengine.runtime.refresh import Refresher

    refresher = Refresher(spark, config, catalog)
    refresher.refresh()
    keyed, events = catalog.sources["keyed"].path, catalog.sources["events"].path
    write_deltalake(
        keyed,
        pa.table({"k": pa.array([1, 2, 3], pa.int32()), "v": pa.array([5, -3, 0], pa.int32())}),
        mode="append",
    )
    write_deltalake(
        events,
        pa.table({"k": pa.array([7, 123], pa.int32()), "v": pa.array([1, 2], pa.int32())}),
        mode="append",
    )
    refresher.refresh()
    assert main(["--project", str(root), "quarantine", "keyed"]) == 0
    shown = capsys.readouterr().out
    assert "_expectation" in shown and "positive" in shown and "(2 rows)" in shown
    # Repair one row where it waits, and replay: the repaired row goes back, the other stays.
    DeltaTable(source_quarantine(config.warehouse, "keyed", {}).uri).update({"v": "3"}, predicate="k = 2")
    done = replay(config, catalog, "keyed", lambda: spark)
    assert (done.replayed, done.kept) == (1, 1)
    assert replay(config, catalog, "keyed", lambda: spark).replayed == 0  # nothing passes that did not before
    # An append source, checked by a predicate only GX's Spark engine runs: relaxing is not possible here, so
    # repair the key.
    DeltaTable(source_quarantine(config.warehouse, "events", {}).uri).update({"k": "12"}, predicate="k = 123")
    assert replay(config, catalog, "events", lambda: spark).replayed == 1
    refresher.refresh()
    assert [
        tuple(r) for r in read_table(spark, view_tables(catalog.plans["keyed_total"], {}).snapshot).collect()
    ] == [(8, 2)]  # k1 = 5 and the repaired k2 = 3; k3 = 0 still quarantined
    assert sorted(
        tuple(r) for r in read_table(spark, view_tables(catalog.plans["events_by_k"], {}).snapshot).collect()
    ) == [(7, 1), (12, 2)]
    # mv validate runs every expectation on the tables as they are: k3 is still in the source.
    assert main(["--project", str(root), "validate", "keyed"]) == 0  # (exit 1 is for FAIL UPDATE ones)
    out = capsys.readouterr().out
    assert "positive" in out and "QUARANTINE" in out and "1 of 2 expectations found failing rows" in out
    assert main(["--project", str(root), "validate", "keyed_total"]) == 0
    assert "no expectations declared on keyed_total" in capsys.readouterr().out


CRASH_SOURCES = """
CREATE TABLE b (g STRING, v INT, CONSTRAINT positive EXPECT (v > 0) ON VIOLATION QUARANTINE);
"""
CRASH_VIEWS = """
CREATE MATERIALIZED VIEW per_group (CONSTRAINT few EXPECT (n < 3) ON VIOLATION QUARANTINE) AS
SELECT g, COUNT(*) AS n FROM b GROUP BY g;
"""


@pytest.mark.crash
def test_quarantined_rows_are_never_lost_or_doubled_by_a_crash(spark, tmp_path):
    """`mv refresh` killed (SIGKILL) before and after each quarantine write and the view's snapshot commit; the
    next refresh finishes the batch: the source's quarantine holds each failing row once, and the view equals
    its SQL over the passing rows."""
    import os
    import signal
    import subprocess
    import sys

    import pyarrow as pa
    from deltalake import write_deltalake

    from mvengine.project.layout import source_quarantine
    from mvengine.runtime.refresh import Refresher

    root = write_project(tmp_path, CRASH_SOURCES, CRASH_VIEWS)
    config = load_config(root)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    source = catalog.sources["b"].path
    points = [
        "b:quarantine:before",
        "b:quarantine:after",
        "per_group:quarantine:after",
        "per_group:snapshot:before",
    ]
    written: list[tuple[str, int]] = []
    for i, point in enumerate(points):
        rows = [("g", -i), ("g", i + 1), ("h", 0)]  # g passes 2 rows at the third kill: `few` refuses it
        write_deltalake(
            source,
            pa.table({"g": [g for g, _ in rows], "v": pa.array([v for _, v in rows], pa.int32())}),
            mode="append",
        )
        written += rows
        child = subprocess.run(
            [str(Path(sys.executable).parent / "mv"), "--project", str(root), "refresh"],
            env=dict(os.environ, MVENGINE_CRASH_AT=point),
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert child.returncode == -signal.SIGKILL, f"no kill at {point}: {child.stdout}{child.stderr}"
        Refresher(spark, config, catalog).refresh()
        quarantined = read_table(spark, source_quarantine(config.warehouse, "b", {})).collect()
        assert sorted((r.g, r.v) for r in quarantined) == sorted((g, v) for g, v in written if v <= 0), point
        check_without_failing_rows(spark, catalog, "per_group", CRASH_KEPT)
    view_quarantine = read_table(spark, view_tables(catalog.plans["per_group"], {}).quarantine).collect()
    assert sorted((r.g, r.n) for r in view_quarantine) == [("g", 3), ("g", 4)]


def test_rows_an_expectation_drops_do_not_move_the_watermark(spark, tmp_path):
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from mvengine import Project

    root = write_project(
        tmp_path / "p",
        """
CREATE TABLE scores (team STRING, score INT, ts TIMESTAMP,
  CONSTRAINT sane EXPECT (score BETWEEN 0 AND 100) ON VIOLATION DROP ROW,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('append_only' = 'true');
""",
        "CREATE MATERIALIZED VIEW recent AS SELECT team, ts FROM scores;\n",
    )
    project = Project.open(root, spark=spark)
    project.refresh()
    noon = dt.datetime(2026, 11, 25, 12, tzinfo=dt.UTC)

    def append(rows):
        write_deltalake(
            project.catalog.sources["scores"].path,
            pa.table(
                {
                    "team": pa.array([r[0] for r in rows], pa.string()),
                    "score": pa.array([r[1] for r in rows], pa.int32()),
                    "ts": pa.array(
                        [noon + dt.timedelta(minutes=r[2]) for r in rows], pa.timestamp("us", tz="UTC")
                    ),
                }
            ),
            mode="append",
        )

    append([("red", 5, 0), ("red", 999, 60)])  # the refused row is an hour later in event time
    project.refresh()
    assert project.describe("recent")["watermark"] == "2026-11-25 11:59:55"
    append([("blue", 7, 10)])  # the latest row of the table is still the refused one: the rest are read
    project.refresh()
    assert project.describe("recent")["watermark"] == "2026-11-25 12:09:55"
    assert sorted(r.team for r in project.table("recent").collect()) == ["blue", "red"]
