"""Interop with Delta's own Spark connector on real tables (issue 15):
- a source that Spark wrote with deletion vectors and column mapping on, then updated, merged and deleted
  through deletion vectors, is maintained exactly (every view equals its SQL at the versions it records);
- a source that Spark wrote with deletion vectors alone is refreshed on the driver (delta-rs's scan applies
  them), batch after batch of deletes, updates and merges;
- a source written by both engines (Spark SQL and delta-rs) is read through one change data feed;
- `OPTIMIZE` runs on a source while the views refresh, then `VACUUM` removes the files it replaced;
- the views' snapshots, which delta-rs writes, read the same through Delta's connector and through delta-rs
  at every version.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame

from mvengine.config import load_config
from mvengine.project.catalog import load_catalog
from mvengine.reading.describe import describe
from mvengine.reading.versions import Versions
from mvengine.runtime.refresh import Refresher, view_tables
from mvengine.storage.api import merge_into, read_arrow, write_table
from mvengine.storage.tables import TableRef
from tests.conftest import bag
from tests.spark.test_refresh_differential import check_view

SOURCES = """
CREATE TABLE t (k INT NOT NULL, g STRING, v INT, PRIMARY KEY (k) NOT ENFORCED);
CREATE TABLE d (g STRING NOT NULL, label STRING, PRIMARY KEY (g) NOT ENFORCED);
"""
VIEWS = """
CREATE MATERIALIZED VIEW v_agg AS SELECT g, COUNT(*) AS n, SUM(v) AS s, MIN(v) AS lo FROM t GROUP BY g;
CREATE MATERIALIZED VIEW v_proj AS SELECT k, g, v * 2 AS v2 FROM t WHERE v > 0;
CREATE MATERIALIZED VIEW v_join AS SELECT t.k, t.v, d.label FROM t JOIN d ON t.g = d.g;
"""


def test_sources_written_by_spark_with_deletion_vectors_and_by_both_engines(spark, tmp_path: Path):
    config, catalog = _project(tmp_path)
    t, d = catalog.sources["t"].path, catalog.sources["d"].path
    spark.sql(f"""CREATE TABLE delta.`{t}` (k INT NOT NULL, g STRING, v INT) USING delta TBLPROPERTIES (
                  'delta.enableDeletionVectors' = 'true', 'delta.columnMapping.mode' = 'name',
                  'delta.enableChangeDataFeed' = 'true')""")
    features = set(DeltaTable(t).protocol().reader_features or [])
    assert {"deletionVectors", "columnMapping"} <= features

    refresher = Refresher(spark, config, catalog)
    refresher.prepare_sources()  # creates d with delta-rs
    spark.sql(
        f"INSERT INTO delta.`{t}` SELECT CAST(id AS INT), CAST(id % 4 AS STRING), CAST(id - 5 AS INT) "
        "FROM range(40)"
    )
    write_table(
        spark.createDataFrame([(str(i), f"L{i}") for i in range(3)], "g string, label string"), TableRef(d)
    )

    def check_all():
        for name in catalog.plans:
            check_view(spark, catalog, name)

    refresher.refresh()
    check_all()

    # Deletes, updates and a MERGE, each through deletion vectors; d updated by Spark SQL and by delta-rs.
    spark.sql(f"DELETE FROM delta.`{t}` WHERE k % 5 = 0")
    spark.sql(f"UPDATE delta.`{t}` SET v = v + 10, g = '9' WHERE k % 3 = 0")
    spark.sql(f"""MERGE INTO delta.`{t}` AS x USING (SELECT CAST(id * 7 AS INT) AS k FROM range(8)) AS y
                  ON x.k = y.k WHEN MATCHED THEN UPDATE SET v = -x.v
                  WHEN NOT MATCHED THEN INSERT (k, g, v) VALUES (y.k, '2', 1)""")
    spark.sql(f"UPDATE delta.`{d}` SET label = 'spark' WHERE g = '1'")
    merge_into(
        spark.createDataFrame([("2", "rs"), ("9", "nine")], "g string, label string"), TableRef(d), ["g"]
    )
    assert _has_deletion_vectors(t)
    refresher.refresh()
    check_all()

    # OPTIMIZE while the views refresh (either order is a valid history), then VACUUM what it replaced.
    spark.sql(f"DELETE FROM delta.`{t}` WHERE k BETWEEN 10 AND 14")
    refreshing = threading.Thread(target=refresher.refresh)
    refreshing.start()
    spark.sql(f"OPTIMIZE delta.`{t}`")
    refreshing.join()
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        refresher.refresh()
        spark.sql(f"VACUUM delta.`{t}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    spark.sql(f"UPDATE delta.`{t}` SET v = 100 WHERE k = 1")
    refresher.refresh()
    check_all()

    for name, plan in catalog.plans.items():
        snapshot = view_tables(plan, {}).snapshot
        for version in range(snapshot.open().version() + 1):
            native = spark.read.format("delta").option("versionAsOf", version).load(snapshot.uri)
            by_delta_rs = DeltaTable(snapshot.uri, version=version).to_pyarrow_table().to_pylist()
            assert bag(native) == sorted(repr(tuple(r.values())) for r in by_delta_rs), (
                f"{name} version {version}"
            )


LAYOUTS = {
    "plain": ("", ""),
    "partitioned": ("PARTITIONED BY (label)", ""),
    "column mapping": ("", ", 'delta.columnMapping.mode' = 'name'"),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_source_with_deletion_vectors_is_refreshed_on_the_driver(spark, tmp_path: Path, layout: str):
    """Issue 42: a batch that read a Spark-written table with deletion vectors (a join's other side before the
    batch, or its change feed) went to Spark. delta-rs's scan applies them and its change data feed reads the
    `_change_data` files Spark writes: such batches now run on the driver without a Spark job, through deletes,
    updates and merges on both sides, and every view equals its SQL. So do they when the table is partitioned
    (by `label`, which the updates change: a row moves to another partition's files), and when its columns are
    mapped (delta-rs's scan maps them; delta-kernel-rs reads its change feed, which delta-rs does not)."""
    config, catalog = _project(tmp_path)
    t, d = catalog.sources["t"].path, catalog.sources["d"].path
    partitioning, mapping = LAYOUTS[layout]
    spark.sql(f"""CREATE TABLE delta.`{d}` (g STRING NOT NULL, label STRING) USING delta {partitioning}
                  TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableChangeDataFeed' = 'true'
                  {mapping})""")
    metadata = DeltaTable(d).metadata()
    assert metadata.partition_columns == (["label"] if partitioning else [])
    assert metadata.configuration.get("delta.columnMapping.mode", "none") == ("name" if mapping else "none")
    spark.sql(
        f"INSERT INTO delta.`{d}` SELECT CAST(id AS STRING), CONCAT('L', id % 2) FROM range(0, 4, 1, 1)"
    )  # a file of 2 rows a partition
    reports: list = []
    refresher = Refresher(spark, config, catalog, report=reports.append)
    refresher.prepare_sources()  # creates t with delta-rs

    def rows(first: int, last: int) -> DataFrame:
        return spark.createDataFrame(
            [(k, str(k % 4), k - 5) for k in range(first, last)], "k int, g string, v int"
        )

    write_table(rows(0, 40), TableRef(t))
    refresher.refresh()
    for step, (first, last) in (
        (f"UPDATE delta.`{d}` SET label = 'updated' WHERE g = '1'", (40, 44)),
        (f"DELETE FROM delta.`{d}` WHERE g = '2'", (44, 48)),
        (
            f"""MERGE INTO delta.`{d}` AS x USING (SELECT '3' AS g UNION ALL SELECT '2') AS y ON x.g = y.g
                WHEN MATCHED THEN UPDATE SET label = 'merged'
                WHEN NOT MATCHED THEN INSERT (g, label) VALUES (y.g, 'new')""",
            (48, 52),
        ),
    ):
        spark.sql(step)
        merge_into(rows(first, last), TableRef(t), ["k"])
        reports.clear()
        refresher.refresh()
        assert reports and all(r.engine == "driver" for r in reports), [r.line() for r in reports]
        assert all(p.jobs == 0 for r in reports for p in r.phases), [r.profile() for r in reports]
        for name in catalog.plans:
            check_view(spark, catalog, name)
    assert _has_deletion_vectors(d)


def _project(root: Path) -> tuple:
    """The project of SOURCES and VIEWS under `root`: its config and catalog."""
    (root / "views").mkdir()
    (root / "views" / "sources.sql").write_text(SOURCES)
    (root / "views" / "views.sql").write_text(VIEWS)
    config = load_config(root)
    return config, load_catalog(config)


def _has_deletion_vectors(path: str) -> bool:
    """Whether a commit of the table added a file with a deletion vector (read from the log's add actions)."""
    log = os.path.join(path, "_delta_log")
    for name in sorted(os.listdir(log)):
        if name.endswith(".json"):
            with open(os.path.join(log, name), encoding="utf-8") as f:
                if any("deletionVector" in json.loads(line).get("add", {}) for line in f if line.strip()):
                    return True
    return False


def test_a_watermark_over_a_table_spark_wrote_with_deletion_vectors(spark, tmp_path: Path):
    """A source's watermark is read from its rows less their deletion vectors (delta-rs's dataset refuses such a
    table): the refresh works, and a deleted latest row no longer moves the watermark."""
    lake = tmp_path / "lake" / "events"
    spark.sql(
        f"""CREATE TABLE delta.`{lake}` (id BIGINT, ts TIMESTAMP) USING delta
        TBLPROPERTIES ('delta.enableDeletionVectors' = 'true', 'delta.enableChangeDataFeed' = 'true')"""
    )
    spark.sql(
        f"INSERT INTO delta.`{lake}` SELECT id, TIMESTAMP'2026-11-23 12:00:00' + make_interval(0, 0, 0, 0, 0, id, 0)"
        " FROM range(10)"
    )
    spark.sql(f"DELETE FROM delta.`{lake}` WHERE id = 9")  # a deletion vector over the latest row
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "v.sql").write_text(
        f"""CREATE TABLE events (id BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts) WITH ('path' = '{lake}');
        CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM events;"""
    )
    config = load_config(tmp_path)
    catalog = load_catalog(config)
    Refresher(spark, config, catalog).refresh()
    assert read_arrow(view_tables(catalog.plans["n"], {}).snapshot).to_pylist() == [{"n": 9}]
    described = describe(Versions(config, catalog), "n")
    assert described["watermark"] == "2026-11-23 12:08:00"
