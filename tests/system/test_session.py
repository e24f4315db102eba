"""The session's Python workers: the project's interpreter, importing pyspark from site-packages (not from the
zip Spark prepends to their path, which they would compile from source at every start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pyspark

from mvengine.runtime.session import DELTA_EXTENSION, class_archive, delta_jars, worker_python
from mvengine.storage.api import has_native_delta

LAUNCHER = Path(sys.executable).parent / "mvengine-worker-python"


def test_the_launcher_drops_only_the_installed_pyspark_from_the_path(tmp_path: Path):
    bundled = Path(sysconfig.get_paths()["purelib"]) / "pyspark"
    path = os.pathsep.join(
        [
            str(bundled / "python" / "lib" / "pyspark.zip"),
            str(tmp_path / "mine"),
            str(bundled / "jars" / "spark-core.jar"),
            str(tmp_path / "other.zip"),
        ]
    )
    out = subprocess.run(
        [
            str(LAUNCHER),
            "-c",
            "import json, os, sys; print(json.dumps([os.environ['PYTHONPATH'],"
            " sys.executable, sys.argv[1:]]))",
            "a",
            "-b",
        ],
        env=dict(os.environ, PYTHONPATH=path),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == [
        os.pathsep.join([str(tmp_path / "mine"), str(tmp_path / "other.zip")]),
        sys.executable,
        ["a", "-b"],
    ]


def test_workers_run_the_launcher_and_import_the_installed_pyspark(spark):
    assert worker_python() == str(LAUNCHER)
    assert os.environ["PYSPARK_PYTHON"] == str(LAUNCHER)
    where = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("pyspark").__file__).collect()
    assert where == [pyspark.__file__]


def test_the_session_loads_deltas_connector_from_the_projects_jars(spark):
    """`make jars` put Delta's Spark connector in jars/; the session loads it from there (spark.jars, not a
    download) with Delta's extension and catalog."""
    jars = delta_jars()
    assert [Path(j).name.split("-4")[0] for j in jars] == ["delta-spark_4.2_2.13", "delta-storage"], jars
    assert all(j in spark.conf.get("spark.jars").split(",") for j in jars)
    assert spark.conf.get("spark.sql.extensions") == DELTA_EXTENSION
    assert has_native_delta(spark)


START = """
import sys
from mvengine.runtime.session import spark_session
spark = spark_session(master="local[1]", conf={"spark.driver.extraClassPath": sys.argv[1]})
arguments = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
print([a for a in arguments if "SharedArchive" in a], spark.range(2).count())
"""


def test_the_session_maps_the_class_archive_and_passes_over_one_it_cannot_use(spark, tmp_path):
    """Set-up builds the archive of Spark's classes (`python -m mvengine.cli.class_archive`, by make setup,
    run and test) and every session's JVM maps it. A JVM that cannot use it (here a class path with one more
    folder; or another Java) starts without it in silence: its answer and its output are as without one."""
    archive = class_archive()
    assert os.path.exists(archive), "make setup builds it: python -m mvengine.cli.class_archive"
    arguments = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    assert f"-XX:SharedArchiveFile={archive}" in list(arguments)
    started = subprocess.run(
        [sys.executable, "-c", START, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert (started.stdout, started.stderr) == (f"['-XX:SharedArchiveFile={archive}'] 2\n", "")


def test_tables_written_by_either_engine_are_read_by_the_other(spark, tmp_path):
    """Spark's Delta connector and delta-rs write tables the other reads, at every version."""
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "t")
    spark.range(3).selectExpr("id", "CAST(id AS STRING) AS s").write.format("delta").save(path)
    write_deltalake(path, DeltaTable(path).to_pyarrow_table().slice(0, 1), mode="append")
    spark.range(5, 6).selectExpr("id", "'x' AS s").write.format("delta").mode("append").save(path)
    for version, expected in enumerate([[0, 1, 2], [0, 0, 1, 2], [0, 0, 1, 2, 5]]):
        by_spark = spark.read.format("delta").option("versionAsOf", version).load(path)
        assert sorted(r.id for r in by_spark.collect()) == expected
        assert (
            sorted(DeltaTable(path, version=version).to_pyarrow_table().column("id").to_pylist()) == expected
        )


WITHOUT_JARS = """
import json, sys
from mvengine.runtime.session import spark_session
from mvengine.storage.api import has_native_delta
from mvengine.storage.api import read_change_feed, read_table, write_table
from mvengine.storage.tables import TableRef

spark = spark_session(master="local[1]", conf={"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"})
ref = TableRef(sys.argv[1])
write_table(spark.range(6).selectExpr("id", "CAST(id % 2 AS STRING) AS part"), ref, partition_by=["part"])
write_table(spark.range(6, 8).selectExpr("id", "CAST(id % 2 AS STRING) AS part"), ref)
plan = read_table(spark, ref, version=0)._jdf.queryExecution().analyzed().toString()
feed = read_change_feed(spark, ref, 1, 1)  # no driver_rows: read by Spark
print(json.dumps({"native": has_native_delta(spark), "mvdelta": "mvdelta" in plan.lower(),
                  "v0": sorted(r.id for r in read_table(spark, ref, version=0).collect()),
                  "changes": sorted([r.id, r._change_type] for r in feed.rows.collect())}))
"""


def test_a_spark_without_deltas_jars_reads_through_mvdelta(tmp_path):
    """A Spark that has no Delta connector (its jars not in the session) still reads every table and change
    feed: through `mvdelta`, mvengine's data source over delta-rs."""
    empty = tmp_path / "no-jars"
    empty.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", WITHOUT_JARS, str(tmp_path / "t")],
        capture_output=True,
        text=True,
        env=dict(os.environ, MVENGINE_JARS=str(empty)),
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {
        "native": False,
        "mvdelta": True,
        "v0": [0, 1, 2, 3, 4, 5],
        "changes": [[6, "insert"], [7, "insert"]],
    }


def test_a_spark_connect_master_is_refused_with_what_to_set_instead(tmp_path: Path):
    from tests.conftest import write_project

    root = write_project(
        tmp_path,
        "CREATE TABLE t (a INT);",
        "CREATE MATERIALIZED VIEW v AS SELECT a FROM t;",
        # (driver_max_changes = 0: the bootstrap needs Spark; a small one on the driver would start none)
        '[spark]\nmaster = "sc://spark.example.com:15002"\n[refresh]\ndriver_max_changes = 0\n',
    )
    done = subprocess.run(
        [str(Path(sys.executable).parent / "mv"), "--project", str(root), "refresh", "--full"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "Spark Connect (sc://spark.example.com:15002) is not supported" in done.stderr
    assert "spark://host:7077" in done.stderr
