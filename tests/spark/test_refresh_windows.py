"""Event-time windows, differentially: every form users write (Spark's window()/session_window(), Calcite's
TUMBLE/HOP/SESSION group windows, Flink's table-valued TUMBLE/HOP), maintained over random inserts, updates
(moving rows between windows) and deletes with out-of-order and NULL event times, must equal the same windows
computed by Spark in batch, written in Spark's own form (an oracle independent of mvengine's translation), after
every refresh; on the driver and in Spark."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import merge_into, read_table
from mvengine.storage.tables import TableRef, commit_metadata
from tests.conftest import bag, examples, phases_of_costly
from tests.spark.test_refresh_differential import refresh_steps, source_rows

SOURCES = """
CREATE TABLE e (id INT NOT NULL, g STRING, v INT, ts TIMESTAMP, big BIGINT, money DECIMAL(38, 2),
                WATERMARK FOR ts AS ts - INTERVAL '5' SECOND, PRIMARY KEY (id) NOT ENFORCED);
"""
# Each view, and its oracle: the same windows in Spark's SQL over the source at the snapshot's version (None: the
# view's own SQL is Spark's).
VIEWS = {
    "w_tumble": (
        """SELECT g, window.start AS ws, window.end AS we, COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo
                    FROM e GROUP BY g, window(ts, '10 seconds')""",
        None,
    ),
    "w_hop": (
        """SELECT window.start, window.end, SUM(v) AS s, COUNT(*) AS n FROM e
                 GROUP BY window(ts, '10 seconds', '4 seconds')""",
        None,
    ),
    "w_offset": (
        """SELECT window.start AS ws, COUNT(*) AS n FROM e WHERE v > 0
                    GROUP BY window(ts, '10 seconds', '5 seconds', '2 seconds')""",
        None,
    ),
    "w_calcite": (
        """SELECT g, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, TUMBLE_END(ts, INTERVAL '10' SECOND) AS we,
                            SUM(v) AS s
                     FROM e GROUP BY g, TUMBLE(ts, INTERVAL '10' SECOND)""",
        """SELECT g, window.start AS ws, window.end AS we, SUM(v) AS s FROM e
                     GROUP BY g, window(ts, '10 seconds')""",
    ),
    "w_calcite_hop": (
        """SELECT HOP_START(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) AS ws, MAX(v) AS hi
                         FROM e GROUP BY HOP(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND)""",
        """SELECT window.start AS ws, MAX(v) AS hi FROM e
                         GROUP BY window(ts, '15 seconds', '5 seconds')""",
    ),
    "w_tvf": (
        """SELECT g, window_start, window_end, COUNT(*) AS n, SUM(v) AS s
                 FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                 GROUP BY g, window_start, window_end""",
        """SELECT g, window.start AS window_start, window.end AS window_end, COUNT(*) AS n, SUM(v) AS s
                 FROM e GROUP BY g, window(ts, '10 seconds')""",
    ),
    "w_tvf_hop": (
        """SELECT window_start, window_end, COUNT(*) AS n
                     FROM TABLE(HOP(TABLE e, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
                     GROUP BY window_start, window_end""",
        """SELECT window.start AS window_start, window.end AS window_end, COUNT(*) AS n FROM e
                     GROUP BY window(ts, '10 seconds', '5 seconds')""",
    ),
    "w_tvf_rows": (
        """SELECT id, v, window_start, window_end, window_time
                      FROM TABLE(TUMBLE(TABLE e, DESCRIPTOR(ts), INTERVAL '10' SECOND)) WHERE v > 0""",
        """SELECT id, v, w.start AS window_start, w.end AS window_end, window_time(w) AS window_time
                      FROM (SELECT *, window(ts, '10 seconds') AS w FROM e) WHERE v > 0""",
    ),
    # Held until the watermark passes the window's end, late changes applied at once: the windows the
    # watermark recorded in the snapshot's commit has passed.
    "w_emit": (
        """SELECT g, window.end AS we, SUM(v) AS s, COUNT(*) AS n FROM e GROUP BY g, window(ts, '10 seconds')
                  EMIT WHEN WATERMARK PAST we AND THEN AFTER 0 SECONDS""",
        """SELECT * FROM (SELECT g, window.end AS we, SUM(v) AS s, COUNT(*) AS n FROM e
                                GROUP BY g, window(ts, '10 seconds')) WHERE unix_micros(we) <= {watermark}""",
    ),
    "w_session": (
        """SELECT g, session_window.start AS s0, session_window.end AS s1, SUM(v) AS total FROM e
                     GROUP BY g, session_window(ts, '5 seconds')""",
        None,
    ),
    "w_session_calcite": (
        """SELECT g, SESSION_START(ts, INTERVAL '5' SECOND) AS s0, COUNT(*) AS n FROM e
                             GROUP BY g, SESSION(ts, INTERVAL '5' SECOND)""",
        """SELECT g, session_window.start AS s0, COUNT(*) AS n FROM e
                             GROUP BY g, session_window(ts, '5 seconds')""",
    ),
    # Partitions by an expression, sessions that meet at the gap (whole seconds, 3 apart), every aggregate the
    # driver computes over a session.
    "w_session_many": (
        """SELECT lower(g) AS lg, session_window.end AS s1, COUNT(v) AS nv, MIN(g) AS lo, MAX(v) AS hi,
                          COUNT(*) AS n, SUM(v) AS total, SUM(big) AS big_total, MIN(big) AS big_lo,
                          MAX(money) AS money_hi, MIN(money) AS money_lo
                          FROM e GROUP BY lower(g), session_window(ts, '3 seconds')""",
        None,
    ),
}
BASE = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)

TIMES = st.one_of(
    st.none(),
    st.integers(0, 40).map(lambda s: BASE + dt.timedelta(seconds=s)),
    st.integers(0, 40_000).map(lambda ms: BASE + dt.timedelta(milliseconds=ms)),
)
ROW = st.tuples(
    st.integers(0, 8), st.sampled_from(["a", "b", None]), st.one_of(st.none(), st.integers(-2, 9)), TIMES
)
COMMIT = st.one_of(
    st.tuples(st.just("upsert"), st.lists(ROW, min_size=1, max_size=5)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 8), min_size=1, max_size=3)),
)
STEPS = st.lists(st.lists(COMMIT, min_size=1, max_size=3), min_size=2, max_size=3)


def make_project(root: Path, conf: str = "") -> Path:
    (root / "views").mkdir(parents=True)
    (root / "conf").mkdir()
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "windows.sql").write_text(
        "".join(f"CREATE MATERIALIZED VIEW {name} AS\n{sql};\n\n" for name, (sql, _) in VIEWS.items())
    )
    (root / "conf" / "mvengine.toml").write_text("[refresh]\nrecompute_min_changes = 1000000\n" + conf)
    return root


def apply(spark, catalog, commit) -> None:
    kind, payload = commit
    source = catalog.sources["e"]
    if kind == "upsert":
        latest = {i: (i, g, v, ts, *_beyond(i, v)) for i, g, v, ts in payload}
        merge_into(source_rows(source.schema, latest.values()), TableRef(source.path), ["id"])
    else:
        rows = [(i, None, None, None, None, None, True) for i in sorted(set(payload))]
        gone = source.schema.append(pa.field("gone", pa.bool_()))
        merge_into(source_rows(gone, rows), TableRef(source.path), ["id"], delete_column="gone")


def _beyond(i: int, v: int | None) -> tuple[int | None, Decimal | None]:
    """A row's `big` (beyond 2^53, odd: a double would round it) and `money` (near DECIMAL(38, 2)'s limit),
    from its `v`."""
    if v is None:
        return None, None
    return v * 2**55 + 2 * i + 1, Decimal(v) * 10**34 + Decimal(i) / 100


def check(spark, catalog, name: str) -> None:
    plan = catalog.plans[name]
    tables = view_tables(plan, {})
    dt_ = tables.snapshot.open()
    version = json.loads(commit_metadata(dt_, dt_.version())["mvengine.inputs"])["e"]
    read_table(spark, TableRef(catalog.sources["e"].path), version=version).createOrReplaceTempView("e")
    sql, oracle = VIEWS[name]
    watermark = commit_metadata(dt_, dt_.version()).get("mvengine.watermark", -(2**63))
    expected = spark.sql((oracle or sql).replace("{watermark}", str(watermark)))
    assert bag(read_table(spark, tables.snapshot)) == bag(expected), f"{name} differs from Spark's windows"


def run(spark, root: Path, steps) -> dict[str, set[str]]:
    """refresh_steps over the windows' source: the steps that commit run on the driver and in Spark by turns."""
    return refresh_steps(spark, root, steps, check=check, apply=apply)


def test_every_window_form_is_planned_with_its_strategy(tmp_path):
    catalog = load_catalog(load_config(make_project(tmp_path)))
    strategies = {n: p.strategy for n, p in catalog.plans.items()}
    assert strategies == {n: "incremental" for n in VIEWS}
    assert catalog.plans["w_tumble"].key == ("g", "ws", "we")  # the window is part of the view's key
    assert [c.name for c in catalog.plans["w_tvf_rows"].columns] == [
        "id",
        "v",
        "window_start",
        "window_end",
        "window_time",
    ]
    types = {c.name: c.type.sql("spark") for c in catalog.plans["w_calcite"].columns}
    assert types["ws"] == types["we"] == "TIMESTAMP"


EXAMPLE = [
    [
        (
            "upsert",
            [
                (1, "a", 3, BASE + dt.timedelta(seconds=8)),  # a session with 2's: 5 seconds apart
                (2, "a", 4, BASE + dt.timedelta(seconds=3)),
                (3, None, 5, None),
                (4, "b", 1, BASE + dt.timedelta(seconds=9, microseconds=999_999)),
                (6, "A", 2, BASE + dt.timedelta(seconds=6)),  # 3 seconds from 2's
                (7, "b", 1, BASE + dt.timedelta(seconds=9, microseconds=999_999)),  # 4's row twice
            ],
        )
    ],
    [
        (
            "upsert",
            [(1, "a", 3, BASE + dt.timedelta(seconds=2)), (5, "b", -1, BASE + dt.timedelta(seconds=10))],
        ),
        ("delete", [2]),
    ],
    [("upsert", [(3, "a", 7, BASE + dt.timedelta(seconds=35))]), ("delete", [4, 1])],
]


@settings(
    max_examples=examples(1),
    deadline=None,
    phases=phases_of_costly(),  # generated examples: make test-nightly
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(steps=STEPS)
@example(steps=EXAMPLE)
def test_windows_equal_sparks_after_random_changes_on_both_engines(spark, tmp_path_factory, steps):
    engines = run(spark, make_project(tmp_path_factory.mktemp("win")), steps)
    every = {"bootstrap/driver", "stream/driver", "stream/spark"}  # a bootstrap of few rows on the driver too
    assert all(engines[n] <= every for n in VIEWS), engines
    if steps == EXAMPLE:  # three steps that commit: driver, Spark, driver
        assert all(engines[n] == every for n in VIEWS), engines


def test_a_bootstrap_over_rows_writes_the_same_changelog_on_the_driver_and_in_spark(spark, tmp_path):
    """A windowed view built over rows already there: on the driver (its inputs are few) and in Spark
    (driver_max_changes 0), the same snapshot and the same changelog rows, `_emit_timing` included."""
    changelogs = {}
    for engine, conf in (("driver", ""), ("spark", "driver_max_changes = 0\n")):
        root = make_project(tmp_path / engine, conf)
        catalog = load_catalog(load_config(root))
        Refresher(spark, load_config(root), catalog).prepare_sources()
        for commit in EXAMPLE[0]:
            apply(spark, catalog, commit)
        ran: list[tuple[str, str]] = []
        Refresher(
            spark, load_config(root), catalog, report=lambda r, ran=ran: ran.append((r.view, r.engine))
        ).refresh()
        assert {e for v, e in ran} == {engine}, ran
        for name in catalog.plans:
            check(spark, catalog, name)
        changelogs[engine] = {
            n: bag(read_table(spark, view_tables(p, {}).changelog).drop("_mtime"))
            for n, p in catalog.plans.items()
        }
    assert changelogs["driver"] == changelogs["spark"]
    assert any(r[-1] is not None for rows in changelogs["driver"].values() for r in rows)  # _emit_timing set
